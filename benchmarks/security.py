"""What tokens and TLS cost a trainer: the loader benchmark's target row against an open server
and against one with tokens and TLS, in paired rounds of one run.

The graph is the loader benchmark's (``benchmarks.loader``: default 1M nodes, 25M edges, 100
float32 features); two read-only ``gnnstore serve`` processes serve the same data directory,
one open on loopback, one with tokens (``$GNNSTORE_AUTH_TOKENS``) and TLS (a self-signed
certificate made with ``openssl`` at run time). Each round runs the in-memory engine, then the
target row (20% static cache, prefetch 2) against each server, with shared-memory replies and
with the socket only (what a trainer on another machine gets), back to back.

    nice python -m benchmarks.security --small   # 100k nodes
    nice python -m benchmarks.security           # 1M nodes, 25M edges
"""
from __future__ import annotations

import argparse
import logging
import secrets
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from benchmarks.loader import ENGINE, RESULTS, TARGET, Phase, graph_arguments, paired_rounds, prepare, table
from gnnstore.backend.server.server_process import ServerProcess


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and localhost, valid one day, and its key (P-256)."""
    cert, key = folder / "server.pem", folder / "server-key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True,
    )
    return cert, key


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    graph_arguments(parser)
    parser.add_argument("--batches", type=int, default=200, help="batches timed per row")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--small", action="store_true", help="100k nodes, 20 batches")
    parser.add_argument("--work-dir", type=Path, default=None, help="default: a temporary folder")
    args = parser.parse_args()
    if args.small:
        args.nodes, args.batches = 100_000, 20
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory(dir=args.work_dir, prefix="gnnstore-security-") as tmp:
        work = Path(tmp)
        (work / "full").mkdir()
        tensors, data_dir, train_ids = prepare(
            args.nodes, args.avg_degree, args.dim, args.out_degree_exponent, work / "full"
        )
        order = torch.randperm(train_ids.numel(), generator=torch.Generator().manual_seed(1))
        seeds = train_ids[order][: (10 + args.batches) * 1024]
        cert, key = self_signed(work)
        token = secrets.token_urlsafe(32)
        common = Phase("", "", (15, 10), 1024, 10, args.batches, graph_file=str(tensors))
        engine = replace(common, name=ENGINE, kind="engine")
        with ServerProcess(data_dir, "--read-only", log=work / "open.log", startup_timeout=3600) as open_server, \
                ServerProcess(data_dir, "--read-only", "--tls-cert", str(cert), "--tls-key", str(key),
                              env={"GNNSTORE_AUTH_TOKENS": f"{token} admin"}, log=work / "secure.log",
                              startup_timeout=3600) as secure_server:
            target = replace(common, kind="remote", graph_file="", cache_fraction=0.2, policy="static",
                             prefetch=2)
            open_row = replace(target, name=TARGET, address=open_server.address,
                               server_pid=open_server.proc.pid)
            secure_row = replace(target, name=f"{TARGET}, token + TLS", address=secure_server.address,
                                 server_pid=secure_server.proc.pid, token=token, tls_ca=str(cert))
            rows = [open_row, secure_row]
            rows += [replace(r, name=f"{r.name}, socket only", shared_memory=False) for r in rows]
            rounds = paired_rounds(engine, rows, seeds, args.rounds)
    base = float(np.median([r[0].batches_per_s for r in rounds]))
    lines = [f"Graph: {args.nodes:,} nodes, {args.dim} float32 features; {args.batches} timed batches a row.\n"]
    for plain, secure in ((1, 2), (3, 4)):
        pairs = [(r[plain], r[secure]) for r in rounds]
        speed = [s.batches_per_s / p.batches_per_s for p, s in pairs]
        trainer = [s.trainer_cpu_ms - p.trainer_cpu_ms for p, s in pairs]
        server = [(s.server_cpu_ms or 0.0) - (p.server_cpu_ms or 0.0) for p, s in pairs]
        lines.append(
            f"{pairs[0][1].phase.name} vs open: batches/s × {', '.join(f'{x:.2f}' for x in speed)} "
            f"(median {np.median(speed):.2f}); extra CPU a batch: trainer "
            f"{np.median(trainer):+.2f} ms, server {np.median(server):+.2f} ms (medians).\n"
        )
    text = table([r for round_ in rounds for r in round_], base, base) + "\n\n" + "".join(lines)
    print("\n" + text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "security.md").write_text(text)
    print(f"wrote {RESULTS / 'security.md'}")


if __name__ == "__main__":
    main()
