"""A request fuzzer over every gnnstore RPC, driven by the messages' own descriptors.

``requests(rng)`` yields ``(method, body bytes)``: random bytes, and messages of the method's
request type filled field by field with adversarial values (ids -1, N, 2^63-1; NaN and inf;
odd strings; tensors whose dtype, shape and bytes disagree; absurd sizes; nested messages),
often starting from a plausible value so the fuzzer reaches past the first check. ``run``
sends them to a live server and checks after each one that the server is alive, answered with
an expected status, and still gives the canary's answer; writes target scratch attributes
only, so the served data's checksum must not change.
"""
from __future__ import annotations

import hashlib
import random
import re
import socket
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import grpc
import torch
from google.protobuf import message_factory
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2

from gnnstore.proto import admin_pb2, feature_pb2, graph_pb2, idmap_pb2
from gnnstore.proto.data_port_wire import FOUND, HEADER, TICKET_BYTES, UNKNOWN

EXPECTED = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.OUT_OF_RANGE,
}
"""Statuses a stranger's request may get; INTERNAL or UNKNOWN means a bug, a timeout a hang."""

PROTECTED = {"x", "y", "train_mask", "val_mask", "test_mask"}
"""The served attributes: fuzzed writes are renamed away from them."""

INTS = [0, 1, 2, -1, 7, 63, 64, 255, 256, 399, 400, 401, 2**31 - 1, 2**31, 2**62, 2**63 - 1, -(2**63), 10_000]
FLOATS = [0.0, -1.0, 0.5, 1.0, 3.0, float("inf"), float("-inf"), float("nan"), 1e300, -0.0]
STRINGS = ["", "x", "y", "paper", "author", "coo", "csr", "csc", "binary", "triplet", "int64", "float32",
           "bool", "bfloat16", "complex64", "uint64", "nonsense", "\x00", "é" * 300, "../../etc/passwd",
           "a" * 70_000, "train_mask", "fuzz"]
DTYPES = ["int64", "int32", "float32", "float64", "bool", "uint8", "bfloat16", "complex64", "uint64", "", "str"]


def method_types() -> dict[str, type[Message]]:
    """Every gnnstore RPC and the health check: full method name → request message class."""
    methods: dict[str, type[Message]] = {}
    for module in (admin_pb2, feature_pb2, graph_pb2, idmap_pb2):
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                methods[f"/{service.full_name}/{method.name}"] = message_factory.GetMessageClass(method.input_type)
    methods["/grpc.health.v1.Health/Check"] = health_pb2.HealthCheckRequest
    return methods


def streaming() -> set[str]:
    """The server-streaming methods."""
    return {
        f"/{s.full_name}/{m.name}"
        for module in (feature_pb2, graph_pb2)
        for s in module.DESCRIPTOR.services_by_name.values()
        for m in s.methods
        if m.server_streaming
    }


def requests(rng: random.Random, count: int) -> Iterator[tuple[str, bytes]]:
    """``count`` fuzzed ``(method, body)`` pairs."""
    types = method_types()
    names = sorted(types)
    for _ in range(count):
        method = rng.choice(names)
        if rng.random() < 0.15:
            yield method, rng.randbytes(rng.choice([0, 1, 5, 64, 700]))
            continue
        message = types[method]()
        _fill(message, rng, depth=0)
        if method.endswith(("/Put", "/Remove")):
            _away_from_protected(message)
        yield method, message.SerializeToString()


def _fill(message: Message, rng: random.Random, depth: int) -> None:
    if message.DESCRIPTOR.name == "Tensor":
        _tensor(message, rng)
        return
    for descriptor in message.DESCRIPTOR.fields:
        if rng.random() < 0.35:
            continue  # left unset
        if descriptor.is_repeated:
            for _ in range(rng.choice([0, 1, 1, 2, 3, 9])):
                _add(message, descriptor, rng, depth)
        else:
            _set(message, descriptor, rng, depth)


def _value(descriptor: FieldDescriptor, rng: random.Random) -> object:
    kind = descriptor.type
    if kind in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return rng.choice(FLOATS)
    if kind == FieldDescriptor.TYPE_BOOL:
        return rng.random() < 0.5
    if kind == FieldDescriptor.TYPE_STRING:
        return rng.choice(STRINGS)
    if kind == FieldDescriptor.TYPE_BYTES:
        return rng.randbytes(rng.choice([0, 8, 16, 17, 64]))
    if kind == FieldDescriptor.TYPE_ENUM:
        return rng.choice([v.number for v in descriptor.enum_type.values])
    value = rng.choice(INTS)
    unsigned = kind in (FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64)
    bits = 32 if kind in (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_SINT32) else 64
    return value % (1 << bits) if unsigned else ((value + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1))


def _set(message: Message, descriptor: FieldDescriptor, rng: random.Random, depth: int) -> None:
    if descriptor.type == FieldDescriptor.TYPE_MESSAGE:
        if depth < 4:
            _fill(getattr(message, descriptor.name), rng, depth + 1)
            getattr(message, descriptor.name).SetInParent()
        return
    setattr(message, descriptor.name, _value(descriptor, rng))


def _add(message: Message, descriptor: FieldDescriptor, rng: random.Random, depth: int) -> None:
    container = getattr(message, descriptor.name)
    if descriptor.type == FieldDescriptor.TYPE_MESSAGE:
        if depth < 4:
            _fill(container.add(), rng, depth + 1)
        return
    container.append(_value(descriptor, rng))


def _tensor(message: Message, rng: random.Random) -> None:
    """A tensor that is plausible (ids, rows) or at odds with itself (dtype, shape, bytes)."""
    roll = rng.random()
    if roll < 0.6:  # plausible ids, some out of range
        n = rng.choice([0, 1, 3, 64, 1000])
        ids = torch.tensor([rng.choice(INTS[:12]) if rng.random() < 0.1 else rng.randrange(400) for _ in range(n)])
        dtype = rng.choice(["int64", "int64", "int32"])
        values = ids.to(getattr(torch, dtype))
        message.dtype, message.shape[:] = dtype, [n]
        message.data = values.numpy().tobytes()
    elif roll < 0.8:  # rows of features
        rows, width = rng.choice([0, 1, 5, 400]), rng.choice([0, 1, 2, 16])
        message.dtype, message.shape[:] = "float32", [rows, width]
        message.data = torch.randn(rows, width).numpy().tobytes()
    else:  # at odds with itself
        message.dtype = rng.choice(DTYPES)
        message.shape[:] = [rng.choice(INTS) for _ in range(rng.choice([0, 1, 2, 3]))]
        message.data = rng.randbytes(rng.choice([0, 3, 8, 64]))
    if rng.random() < 0.1:
        message.shared.offset, message.shared.length = rng.choice(INTS) % 2**64, rng.choice(INTS) % 2**64


def _away_from_protected(message: Message) -> None:
    key = getattr(message, "key", None)
    if key is not None and key.attr_name in PROTECTED:
        key.attr_name = "fuzz-" + key.attr_name


@dataclass
class Outcome:
    """What a run saw: counts by status, and the requests that broke a rule."""

    tried: int = 0
    statuses: Counter = field(default_factory=Counter)
    wrong_codes: list[str] = field(default_factory=list)
    hangs: list[str] = field(default_factory=list)
    crashes: list[str] = field(default_factory=list)
    canary_failures: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"tried {self.tried}, crashes {len(self.crashes)}, hangs {len(self.hangs)}, wrong codes "
            f"{len(self.wrong_codes)}, canary failures {len(self.canary_failures)}; statuses "
            + ", ".join(f"{code.name} {n}" for code, n in self.statuses.most_common())
        )


def run(
    address: str,
    alive: Callable[[], bool],
    canary: Callable[[], bool],
    rng: random.Random,
    count: int,
    *,
    timeout: float = 20.0,
    canary_every: int = 1,
) -> Outcome:
    """Send ``count`` fuzzed requests; after each, check the server is alive and (every
    ``canary_every``) that the canary still holds."""
    outcome, stream = Outcome(), streaming()
    options = [("grpc.max_send_message_length", 1 << 30), ("grpc.max_receive_message_length", 1 << 30)]
    with grpc.insecure_channel(address, options=options) as channel:
        for i, (method, body) in enumerate(requests(rng, count)):
            what = f"#{i} {method} ({len(body)} bytes, sha1 {hashlib.sha1(body).hexdigest()[:10]})"
            outcome.tried += 1
            code = _call(channel, method, body, method in stream, timeout)
            outcome.statuses[code] += 1
            if not alive():
                outcome.crashes.append(what)
                break
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                outcome.hangs.append(what)
            elif code not in EXPECTED:
                outcome.wrong_codes.append(f"{what}: {code.name}")
            if i % canary_every == 0 and not canary():
                outcome.canary_failures.append(what)
    return outcome


def _call(channel: grpc.Channel, method: str, body: bytes, streams: bool, timeout: float) -> grpc.StatusCode:
    passthrough = dict(request_serializer=None, response_deserializer=None)
    try:
        if streams:
            for _ in channel.unary_stream(method, **passthrough)(body, timeout=timeout):
                pass
        else:
            channel.unary_unary(method, **passthrough)(body, timeout=timeout)
    except grpc.RpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


def data_port_frames(rng: random.Random, count: int) -> Iterator[bytes]:
    """What strangers send the data port: random bytes of any length, tickets of random bits
    (alone, in a row, with a tail), a ticket cut short, a TLS hello on the plain port."""
    hello = bytes.fromhex("16030100c4010000c00303") + rng.randbytes(32)
    for _ in range(count):
        kind = rng.randrange(6)
        if kind == 0:
            yield rng.randbytes(rng.randrange(0, 64))
        elif kind == 1:
            yield rng.randbytes(TICKET_BYTES)
        elif kind == 2:
            yield rng.randbytes(TICKET_BYTES * rng.randrange(2, 8))
        elif kind == 3:
            yield rng.randbytes(TICKET_BYTES - rng.randrange(1, TICKET_BYTES))
        elif kind == 4:
            yield hello + rng.randbytes(rng.randrange(0, 200))
        else:
            yield bytes(TICKET_BYTES) + rng.randbytes(rng.randrange(0, 4096))


def send_data_port_frame(port: int, frame: bytes, timeout: float) -> str:
    """Send ``frame`` to the data port on 127.0.0.1, then end our side; what came back:
    ``"unknown"`` (the header saying no payload waits), ``"closed"`` (nothing), ``"found"`` (a
    payload: a stranger must never get one), ``"hang"`` (no end within ``timeout``) or
    ``"other"`` (bytes that are not a header)."""
    answer = _exchange(port, frame, timeout)
    if answer is None:
        return "hang"
    if not answer:
        return "closed"
    if len(answer) == HEADER.size:
        status, size = HEADER.unpack(answer)
        if status == UNKNOWN and size == 0:
            return "unknown"
        if status == FOUND:
            return "found"
    return "other"


def http_requests(rng: random.Random, count: int) -> Iterator[tuple[bytes, bool]]:
    """Requests for the metrics endpoint, each with whether it is a scrape (``GET /metrics``,
    any query): odd methods, paths, versions, header floods, overlong lines, bodies, junk."""
    methods = ["GET", "POST", "HEAD", "PUT", "DELETE", "OPTIONS", "get", "G\x00T", "", "BREW"]
    paths = ["/metrics", "/metrics?x=1", "/", "/favicon.ico", "/x/../../etc/passwd", "//metrics",
             "/metrics/", "/metricsx", "/%2e%2e/metrics", "*", "http://evil/metrics", "",
             "/" + "a" * 70_000, "/metrics?" + "q" * 70_000, "/\xff\xfe"]
    versions = ["HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "HTTP/9.9", "HTTP/1", "junk", ""]
    for _ in range(count):
        if rng.random() < 0.15:
            yield rng.randbytes(rng.randrange(0, 2048)), False
            continue
        # each part plausible (a scrape's) half the time, so the fuzzer reaches past the first check
        method, path, version = (part if rng.random() < 0.5 else rng.choice(parts) for part, parts in (
            ("GET", methods), ("/metrics", paths), ("HTTP/1.1", versions)))
        headers = [f"Host: {rng.choice(['127.0.0.1', '', 'x' * 9000])}"]
        headers += [f"X-{i}: {rng.choice(STRINGS)[:100]}" for i in range(rng.choice([0, 1, 5, 150]))]
        if rng.random() < 0.3:
            headers.append(f"Content-Length: {rng.choice(INTS)}")
        head = f"{method} {path} {version}".rstrip() + "\r\n" + "\r\n".join(headers) + "\r\n\r\n"
        body = rng.randbytes(rng.choice([0, 0, 10, 5000]))
        scrape = method == "GET" and path.split("?", 1)[0] == "/metrics" and version in ("HTTP/1.1", "HTTP/1.0")
        yield head.encode("utf-8", "surrogateescape") + body, scrape and len(path) < 65_000 and len(headers) < 100


def send_http_request(port: int, request: bytes, timeout: float) -> int | None:
    """Send ``request`` to the metrics endpoint on 127.0.0.1, then end our side; the status of
    the first answer, ``None`` when the connection closed without one, ``-1`` when nothing ended
    within ``timeout``."""
    answer = _exchange(port, request, timeout)
    if answer is None:
        return -1
    status = re.match(rb"HTTP/1\.[01] (\d{3}) ", answer)
    return int(status.group(1)) if status else None


def _exchange(port: int, data: bytes, timeout: float) -> bytes | None:
    """Send ``data`` to 127.0.0.1:``port``, end our side, and read until the server closes: what
    it sent (empty where it cut us while we sent), ``None`` when nothing ended within ``timeout``."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            return _read_all(sock)
        except TimeoutError:
            return None
        except OSError:  # cut while we sent: a stranger is owed nothing
            return b""


def _read_all(sock: socket.socket) -> bytes:
    """Everything the peer sends until it closes (or resets: what it sent before counts)."""
    parts = []
    while True:
        try:
            part = sock.recv(1 << 16)
        except ConnectionResetError:
            return b"".join(parts)
        if not part:
            return b"".join(parts)
        parts.append(part)
