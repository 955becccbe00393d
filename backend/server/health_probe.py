"""``python -m gnnstore.backend.server.health_probe``: exit 0 when the server on this host is SERVING.

For a container's health check and Kubernetes probes (the Dockerfile's HEALTHCHECK, the pods of
``deploy/kubernetes``). It asks the standard gRPC health service, which needs no token, on
``localhost:$GNNSTORE_PORT`` (default 50051); with ``$GNNSTORE_TLS_CA`` set it speaks TLS and
trusts that CA, so the server's certificate must name ``localhost``. A server that requires
client certificates (mutual TLS) cannot be probed this way. Exit 1, with one line on stderr,
for anything but SERVING: not listening, shutting down, or no answer within 3 s.

``--alive`` (for liveness probes) also passes NOT_SERVING: a replica behind its primary, or
waiting for it, is not ready but alive, and restarting it would not bring it closer.
"""
from __future__ import annotations

import os
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

TIMEOUT_S = 3.0


def probe(port: str, ca_path: str | None) -> str:
    """The health status name the server on ``localhost:port`` answers."""
    target = f"localhost:{port}"
    if ca_path:
        with open(ca_path, "rb") as ca:
            channel = grpc.secure_channel(target, grpc.ssl_channel_credentials(ca.read()))
    else:
        channel = grpc.insecure_channel(target)
    with channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=TIMEOUT_S)
    return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)


def main(args: list[str]) -> int:
    if args not in ([], ["--alive"]):
        print("usage: python -m gnnstore.backend.server.health_probe [--alive]", file=sys.stderr)
        return 2
    passing = ("SERVING", "NOT_SERVING") if args else ("SERVING",)
    port = os.environ.get("GNNSTORE_PORT", "50051")
    try:
        status = probe(port, os.environ.get("GNNSTORE_TLS_CA"))
    except grpc.RpcError as exc:
        status = exc.code().name
    except OSError as exc:
        status = f"cannot read $GNNSTORE_TLS_CA ({exc.strerror})"
    if status in passing:
        return 0
    print(f"gnnstore on localhost:{port}: {status}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
