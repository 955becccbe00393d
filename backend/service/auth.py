"""Who may call what: bearer tokens with a role each, checked by one server interceptor.

Tokens come from ``--auth-file`` (one ``token role [name]`` per line; blank lines and ``#``
comments ignored) and ``$GNNSTORE_AUTH_TOKENS`` (the same entries separated by commas or new
lines), never from flags. A call carries ``authorization: Bearer <token>`` in its metadata;
the token is compared with every known one in constant time. Roles nest: a ``reader`` samples
and reads, a ``writer`` also changes data, an ``admin`` also sees per-client statistics.
Every gnnstore method is in ``METHOD_ROLES``; one missing from it needs ``admin``, so a new
RPC is closed until someone decides who may call it. The standard health check stays open:
orchestrators probe it without credentials. A server without tokens lets every call through
(it only binds loopback unless told ``--insecure``; see ``server.py``).
"""
from __future__ import annotations

import hashlib
import hmac
import logging
import re
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import grpc

from gnnstore.common.errors import InvalidRequestError

logger = logging.getLogger(__name__)

ROLES = ("reader", "writer", "admin")
"""Each role may do what the ones before it may."""

MIN_TOKEN_CHARS = 16
AUTHORIZATION_KEY = "authorization"
OPEN_PREFIX = "/grpc.health.v1.Health/"

_SERVICE = "/gnnstore.v1."
METHOD_ROLES: dict[str, str] = {
    **{f"{_SERVICE}FeatureService/{m}": "reader"
       for m in ("ListTensorAttrs", "GetTensorSize", "MultiGet", "GetTensor")},
    **{f"{_SERVICE}FeatureService/{m}": "writer" for m in ("Put", "Remove")},
    **{f"{_SERVICE}GraphService/{m}": "reader"
       for m in ("ListEdgeAttrs", "GetEdgeIndex", "SampleFromNodes", "SampleFromEdges", "HotNodes")},
    f"{_SERVICE}GraphService/WriteGraph": "writer",
    **{f"{_SERVICE}IdMapService/{m}": "reader" for m in ("ToIds", "ToKeys")},
    f"{_SERVICE}AdminService/Info": "reader",
    f"{_SERVICE}AdminService/Stats": "admin",
}


@dataclass(frozen=True)
class Principal:
    """Who made a call: the token's name (for statistics) and its role."""

    name: str
    role: str

    def may(self, role: str) -> bool:
        """Whether this principal's role includes ``role``."""
        return self.role in ROLES and ROLES.index(self.role) >= ROLES.index(role)


ANONYMOUS = Principal("anonymous", "admin")
"""Every caller of a server without tokens."""
REFUSED = Principal("unauthenticated", "none")
"""How statistics name a caller whose token a server with tokens does not know (it may do nothing)."""


def required_role(method: str) -> str:
    """The role a full method name (``/gnnstore.v1.Service/Method``) needs; ``admin`` if unlisted."""
    return METHOD_ROLES.get(method, "admin")


def parse_tokens(lines: Iterable[str], source: str) -> list[tuple[str, Principal]]:
    """``(token, principal)`` pairs from ``token role [name]`` entries.

    A name defaults to the role and the first 8 hex digits of the token's SHA-256, so
    statistics can tell tokens apart without showing them.

    Raises:
        InvalidRequestError: an entry that does not fit, naming ``source`` and the entry's
            number, never the token.
    """
    entries: list[tuple[str, Principal]] = []
    for number, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{source} entry {number}"
        parts = line.split()
        if len(parts) not in (2, 3):
            raise InvalidRequestError(f"{where}: expected 'token role [name]', got {len(parts)} fields")
        token, role = parts[0], parts[1]
        if role not in ROLES:
            raise InvalidRequestError(f"{where}: role {role!r} is not one of {', '.join(ROLES)}")
        if len(token) < MIN_TOKEN_CHARS or not (token.isascii() and token.isprintable()):
            raise InvalidRequestError(
                f"{where}: a token must be at least {MIN_TOKEN_CHARS} printable ASCII characters "
                "(e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`)"
            )
        if any(hmac.compare_digest(token, known) for known, _ in entries):
            raise InvalidRequestError(f"{where}: the same token is listed twice")
        name = parts[2] if len(parts) == 3 else f"{role}-{hashlib.sha256(token.encode()).hexdigest()[:8]}"
        entries.append((token, Principal(name, role)))
    return entries


class TokenTable:
    """The server's tokens, from an auth file and the environment's entries; ``reload()`` re-reads the file.

    Args:
        auth_file: a file of ``token role [name]`` lines, or ``None``.
        env_entries: ``$GNNSTORE_AUTH_TOKENS`` (entries separated by commas or new lines), or ``None``.

    Raises:
        InvalidRequestError: the file cannot be read or an entry does not fit.
    """

    def __init__(self, auth_file: Path | None = None, env_entries: str | None = None) -> None:
        self._file = None if auth_file is None else Path(auth_file)
        self._env = env_entries
        self._entries = self._read()

    def __len__(self) -> int:
        return len(self._entries)

    def reload(self) -> bool:
        """Re-read the tokens (on SIGHUP); on error keep the current ones and log why."""
        try:
            entries = self._read()
        except InvalidRequestError as exc:
            logger.error("kept the previous %d token(s): %s", len(self._entries), exc)
            return False
        self._entries = entries  # one reference swap: a call sees the old table or the new one
        logger.info("reloaded %d token(s)", len(entries))
        return True

    def authenticate(self, metadata: Iterable[tuple[str, str]] | None) -> Principal | None:
        """The principal of the call's bearer token; ``None`` for a missing or unknown one.

        Every known token is compared, in constant time each, whether or not one matched.
        """
        presented = bearer_token(metadata)
        if presented is None:
            return None
        found = None
        for token, principal in self._entries:
            if hmac.compare_digest(presented.encode(), token.encode()):
                found = principal
        return found

    def _read(self) -> list[tuple[str, Principal]]:
        entries: list[tuple[str, Principal]] = []
        if self._env:
            entries += parse_tokens(re.split(r"[,\n]", self._env), "$GNNSTORE_AUTH_TOKENS")
        if self._file is not None:
            try:
                text = self._file.read_text()
                mode = self._file.stat().st_mode
            except (OSError, UnicodeDecodeError) as exc:
                raise InvalidRequestError(f"--auth-file cannot be read: {getattr(exc, 'strerror', exc)}") from None
            if mode & (stat.S_IRWXG | stat.S_IRWXO):
                logger.warning("the auth file can be read by other users; chmod 600 it")
            entries += parse_tokens(text.splitlines(), "--auth-file")
        known: list[str] = []
        for token, _ in entries:
            if any(hmac.compare_digest(token, other) for other in known):
                raise InvalidRequestError("a token is listed both in $GNNSTORE_AUTH_TOKENS and --auth-file")
            known.append(token)
        return entries


def bearer_token(metadata: Iterable[tuple[str, str]] | None) -> str | None:
    """The token of an ``authorization: Bearer <token>`` entry, if there is one."""
    for key, value in metadata or ():
        if key == AUTHORIZATION_KEY and isinstance(value, str):
            scheme, _, token = value.partition(" ")
            return token.strip() if scheme.lower() == "bearer" else None
    return None


class AuthInterceptor(grpc.ServerInterceptor):
    """Refuses a call without a known token (``UNAUTHENTICATED``) or whose role may not make it
    (``PERMISSION_DENIED``, naming the method and the role it needs), before its request is
    even parsed. The health check passes untouched."""

    def __init__(self, tokens: TokenTable) -> None:
        self._tokens = tokens

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        method = handler_call_details.method
        if method.startswith(OPEN_PREFIX):
            return continuation(handler_call_details)
        principal = self._tokens.authenticate(handler_call_details.invocation_metadata)
        if principal is None:
            return refusal(
                continuation(handler_call_details),
                grpc.StatusCode.UNAUTHENTICATED,
                "this gnnstore server needs a token: connect(..., token=...) or $GNNSTORE_TOKEN "
                "(the call carried none, or one the server does not know)",
            )
        needed = required_role(method)
        if not principal.may(needed):
            rpc = method.removeprefix(_SERVICE).replace("/", ".")
            return refusal(
                continuation(handler_call_details),
                grpc.StatusCode.PERMISSION_DENIED,
                f"{rpc} needs the {needed} role; this token ({principal.name}) is a {principal.role}",
            )
        return continuation(handler_call_details)


def identify(tokens: TokenTable | None) -> Callable[[grpc.HandlerCallDetails], Principal]:
    """Who made a call, for statistics: the token's principal, ``REFUSED`` for an unknown or
    missing token, or ``ANONYMOUS`` on a server without tokens."""
    if not tokens:
        return lambda details: ANONYMOUS
    return lambda details: tokens.authenticate(details.invocation_metadata) or REFUSED


def refusal(
    handler: grpc.RpcMethodHandler | None, code: grpc.StatusCode, message: str
) -> grpc.RpcMethodHandler:
    """A handler of ``handler``'s kind that refuses any call; its request stays unparsed bytes."""

    def refuse(request: bytes, context: grpc.ServicerContext) -> None:
        context.abort(code, message)

    if handler is not None and handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(refuse)
    return grpc.unary_unary_rpc_method_handler(refuse)


def load_tokens(auth_file: Path | None, env_entries: str | None) -> TokenTable | None:
    """The server's token table, or ``None`` when neither source names a token."""
    if auth_file is None and not env_entries:
        return None
    table = TokenTable(auth_file, env_entries)
    if not table:
        raise InvalidRequestError("--auth-file and $GNNSTORE_AUTH_TOKENS name no token")
    return table

