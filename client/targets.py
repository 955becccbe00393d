"""What ``connect()`` may be given: one ``host:port``, a list of them, or a gRPC target.

Several servers serving one graph (replicas, or ``--read-only`` servers over one data directory)
are reached through one gRPC channel whose ``round_robin`` policy spreads consecutive calls over
every address (gRPC's own client-side balancing; nothing is balanced here). A list of
``host:port`` becomes an ``ipv4:`` / ``ipv6:`` target (names resolved once, now); a target with
a scheme (``dns:///name:port``, ``ipv4:a:p,b:p``) goes to gRPC as it is, and ``dns:`` is
resolved again by gRPC as the name's addresses change (e.g. a Kubernetes headless Service).
"""
from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence
from dataclasses import dataclass

from gnnstore.common.errors import InvalidRequestError

_SCHEMES = ("dns:", "ipv4:", "ipv6:")


@dataclass(frozen=True)
class Target:
    """Where a connection's calls go.

    Attributes:
        grpc_target: what the gRPC channel is opened on.
        address: how messages name it (the address, the list joined by commas, or the target).
        servers: each server's ``host:port`` where the target lists them (one for a plain
            address); empty for a name gRPC resolves (``dns:``).
        host: the one host every server shares (for the data port and shared memory), or
            ``None`` where the servers are on several hosts or behind a name.
        authority: the host name TLS checks the servers' certificates against: the first
            listed host, or the ``dns:`` name (replicas share a certificate that names it).
        balanced: several servers: calls go round robin over them.
    """

    grpc_target: str
    address: str
    servers: tuple[str, ...]
    host: str | None
    authority: str
    balanced: bool


def parse_target(address: str | Sequence[str]) -> Target:
    """The target of ``address``: ``"host:port"``, a list of them, or a gRPC target with a scheme.

    Raises:
        InvalidRequestError: an empty list, an address that is not ``host:port``, a name that
            does not resolve, or a target with an unknown scheme; the message names it.
    """
    if isinstance(address, str) and address.startswith(_SCHEMES):
        return _scheme_target(address)
    addresses = [address] if isinstance(address, str) else list(address)
    if not addresses:
        raise InvalidRequestError("connect() needs at least one server address, got an empty list")
    hosts = [_split(a) for a in addresses]
    if len(addresses) == 1:
        host = hosts[0][0]
        return Target(addresses[0], addresses[0], (addresses[0],), host.strip("[]"), host.strip("[]"), False)
    ips = [_resolve(host.strip("[]"), a) for (host, _), a in zip(hosts, addresses)]
    families = {ip.version for ip in ips}
    if len(families) > 1:
        raise InvalidRequestError(f"the servers {', '.join(addresses)} mix IPv4 and IPv6 addresses; use one family")
    family = families.pop()
    listed = ",".join(f"[{ip}]:{port}" if family == 6 else f"{ip}:{port}" for ip, (_, port) in zip(ips, hosts))
    shared = {h.strip("[]") for h, _ in hosts}
    return Target(
        f"ipv{family}:{listed}", ",".join(addresses), tuple(addresses),
        shared.pop() if len(shared) == 1 else None, hosts[0][0].strip("[]"), True,
    )


def _scheme_target(target: str) -> Target:
    scheme, _, rest = target.partition(":")
    if scheme == "dns":
        name = rest.lstrip("/").rpartition("/")[2] if rest.startswith("//") else rest
        host, _ = _split(name, target)
        return Target(target, target, (), None, host.strip("[]"), True)
    servers = tuple(rest.split(","))
    hosts = {_split(s, target)[0].strip("[]") for s in servers}
    return Target(target, target, servers, hosts.pop() if len(hosts) == 1 else None,
                  _split(servers[0], target)[0].strip("[]"), len(servers) > 1)


def _split(address: str, where: str | None = None) -> tuple[str, str]:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise InvalidRequestError(f"address must look like 'host:port', got {address!r}"
                                  + ("" if where is None or where == address else f" in {where!r}"))
    return host, port


def _resolve(host: str, address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        return ipaddress.ip_address(socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)[0][4][0])
    except (OSError, IndexError) as exc:
        raise InvalidRequestError(f"the server address {address!r} does not resolve ({exc})") from None
