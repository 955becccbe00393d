"""Node classification on several trainer processes (DDP), each connected to the same servers.

Start a server as for ``node_classification.py`` (or several ``--read-only`` ones over its data
directory), then:

    python examples/ddp_node_classification.py --address 127.0.0.1:50051 --world-size 2
    python examples/ddp_node_classification.py --address 127.0.0.1:50051 127.0.0.1:50052

Each rank trains on its own part of the training seeds (``split_for_rank``: exactly
``world_size`` parts whose sizes differ by at most one, so every seed is trained once an
epoch), samples through its own connection, and DDP averages the gradients (gloo on CPU,
NCCL with ``--device cuda``). Parts may differ by one batch, so the loop runs under DDP's
``Join``, which lets a rank that ran out of batches wait without hanging the others.
``--amp`` trains under ``torch.autocast`` in bfloat16 and ``--accumulate K`` steps the
optimizer every K batches (gradients are synchronised only then), options that users training
large GNNs ask for. Rank 0 prints each epoch's loss and the batches/s of every rank and of all.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel
from torch_geometric.loader import NodeLoader
from torch_geometric.nn.models import GraphSAGE

from gnnstore.client import RemoteNeighborSampler, connect, split_for_rank


def train(rank: int, args: argparse.Namespace, rendezvous: str) -> None:
    """One rank's whole run."""
    device = torch.device(f"cuda:{rank}" if args.device == "cuda" else "cpu")
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo",
                            init_method=f"file://{rendezvous}", rank=rank, world_size=args.world_size)
    torch.manual_seed(rank)  # each rank shuffles its own part its own way
    fs, gs = connect(args.address[0] if len(args.address) == 1 else args.address, timeout=60)
    num_features = fs.get_tensor_size(group_name=None, attr_name="x")[1]
    y = fs.get_tensor(group_name=None, attr_name="y", index=None)
    ids = torch.arange(y.numel())
    masks = {name: fs.get_tensor(group_name=None, attr_name=f"{name}_mask", index=None)
             for name in ("train", "val", "test")}
    mine = split_for_rank(ids[masks["train"]], rank, args.world_size)

    fanouts = [int(k) for k in args.fanouts.split(",")]
    sampler = RemoteNeighborSampler(fs, fanouts, feature_store=fs)
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=mine, batch_size=args.batch_size,
                        shuffle=True)
    torch.manual_seed(0)  # the same initial weights on every rank (DDP also broadcasts them)
    model = DistributedDataParallel(GraphSAGE(num_features, args.hidden, 2, int(y.max()) + 1, dropout=0.5)
                                    .to(device), device_ids=[rank] if device.type == "cuda" else None)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    def autocast() -> contextlib.AbstractContextManager:
        return torch.autocast(device.type, dtype=torch.bfloat16) if args.amp else contextlib.nullcontext()

    for epoch in range(1, args.epochs + 1):
        model.train()
        started, total, batches, seen = time.perf_counter(), 0.0, 0, []
        with Join([model]):
            for batch in loader:
                batch = batch.to(device)
                step = (batches + 1) % args.accumulate == 0 or batches + 1 == len(loader)
                with (contextlib.nullcontext() if step else model.no_sync()), autocast():
                    out = model(batch.x, batch.edge_index)[: batch.batch_size]  # seeds come first
                    loss = F.cross_entropy(out.float(), batch.y[: batch.batch_size]) / args.accumulate
                loss.backward()
                if step:
                    optimizer.step()
                    optimizer.zero_grad()
                total, batches = total + loss.item() * args.accumulate, batches + 1
                seen.append(batch.n_id[: batch.batch_size].cpu())
        rate = batches / (time.perf_counter() - started)
        if args.seeds_out:  # for tests: which seeds this rank trained this epoch
            torch.save(torch.cat(seen), Path(args.seeds_out, f"epoch{epoch}-rank{rank}.pt"))
        figures = torch.tensor([rate, total, float(batches)], dtype=torch.float64)
        gathered = [torch.zeros_like(figures) for _ in range(args.world_size)]
        dist.all_gather(gathered, figures)
        if rank == 0:
            rates = [float(g[0]) for g in gathered]
            loss_mean = sum(float(g[1]) for g in gathered) / sum(float(g[2]) for g in gathered)
            print(f"epoch {epoch}: loss {loss_mean:.4f}, {sum(rates):.1f} batches/s in all "
                  f"(per rank: {', '.join(f'{r:.1f}' for r in rates)})", flush=True)

    if rank == 0:
        print(json.dumps({"val_accuracy": accuracy(model.module, fs, gs, ids[masks["val"]], sampler, args, device)}))
    dist.destroy_process_group()


@torch.no_grad()
def accuracy(model: torch.nn.Module, fs: object, gs: object, seeds: torch.Tensor,
             sampler: RemoteNeighborSampler, args: argparse.Namespace, device: torch.device) -> float:
    """The share of ``seeds`` whose class the model predicts (rank 0 alone)."""
    model.eval()
    correct = 0
    for batch in NodeLoader((fs, gs), node_sampler=sampler, input_nodes=seeds, batch_size=args.batch_size):
        batch = batch.to(device)
        pred = model(batch.x, batch.edge_index)[: batch.batch_size].argmax(-1)
        correct += int((pred == batch.y[: batch.batch_size]).sum())
    return correct / seeds.numel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", nargs="+", default=["127.0.0.1:50051"],
                        help="host:port of gnnstore serve; several: calls go round robin over them")
    parser.add_argument("--world-size", type=int, default=2, help="trainer processes")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--fanouts", default="10,5", help="neighbours per hop, comma-separated")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--amp", action="store_true", help="train under torch.autocast in bfloat16")
    parser.add_argument("--accumulate", type=int, default=1, help="batches per optimizer step")
    parser.add_argument("--seeds-out", default=None, help=argparse.SUPPRESS)  # tests: seeds per rank
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # ranks share the cores
    # The ranks of one machine meet through a file: no port to pick that another process may take first.
    with tempfile.TemporaryDirectory(prefix="gnnstore-ddp-") as folder:
        mp.spawn(train, args=(args, str(Path(folder) / "rendezvous")), nprocs=args.world_size, join=True)


if __name__ == "__main__":
    main()
