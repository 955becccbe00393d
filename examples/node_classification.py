"""Node classification through a gnnstore server: connect, build the loaders, train, evaluate.

Start a server over a graph with node features ``x``, labels ``y`` and a ``train_mask`` /
``val_mask`` / ``test_mask`` (what ``gnnstore ingest generate`` and ``planetoid`` write):

    gnnstore ingest generate --nodes 20000 --data-dir data
    gnnstore serve --data-dir data --port 50051

then, in another shell:

    python examples/node_classification.py --address 127.0.0.1:50051

Ids: ``batch.n_id`` holds global node ids (the rows the store returned), ``batch.edge_index``
is local to the batch, and the first ``batch.batch_size`` nodes are the seeds.

Options users training large GNNs ask for: ``--amp`` trains under ``torch.autocast`` (bfloat16
on CPU, float16 with a gradient scaler on CUDA), ``--accumulate K`` steps the optimizer every K
batches. Each epoch prints a ``TrainingReport`` line; ``--report-dir`` also saves it as JSON
and PNG.
"""
from __future__ import annotations

import argparse
import contextlib

import torch
import torch.nn.functional as F
from torch_geometric.loader import NodeLoader
from torch_geometric.nn.models import GraphSAGE

from gnnstore.client import RemoteNeighborSampler, TrainingReport, connect


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default="127.0.0.1:50051", help="host:port of gnnstore serve")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--fanouts", default="10,5", help="neighbours per hop, comma-separated")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--num-workers", type=int, default=0)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--amp", action="store_true", help="mixed precision (torch.autocast)")
    parser.add_argument("--accumulate", type=int, default=1, help="batches per optimizer step")
    parser.add_argument("--report-dir", default=None, help="save the training report here (JSON, PNG)")
    parser.add_argument("--wire-dtype", choices=["bfloat16", "float16"], default=None,
                        help="send float features rounded to 16 bits: half the bytes on a slow link (lossy)")
    args = parser.parse_args()
    device = torch.device(args.device)
    torch.manual_seed(0)

    # The store pair PyG's loaders take; nothing is sent until the first call.
    fs, gs = connect(args.address, timeout=60, wire_dtype=args.wire_dtype)
    num_features = fs.get_tensor_size(group_name=None, attr_name="x")[1]
    y = fs.get_tensor(group_name=None, attr_name="y", index=None)
    ids = torch.arange(y.numel())
    masks = {name: fs.get_tensor(group_name=None, attr_name=f"{name}_mask", index=None)
             for name in ("train", "val", "test")}

    # Sampling runs on the server; with feature_store=fs the rows of the sampled nodes come
    # back in the same RPC, so each mini-batch costs one round trip.
    fanouts = [int(k) for k in args.fanouts.split(",")]
    sampler = RemoteNeighborSampler(fs, fanouts, feature_store=fs)

    def loader(mask: torch.Tensor, shuffle: bool) -> NodeLoader:
        return NodeLoader((fs, gs), node_sampler=sampler, input_nodes=ids[mask],
                          batch_size=args.batch_size, shuffle=shuffle, num_workers=args.num_workers)

    model = GraphSAGE(num_features, args.hidden, 2, int(y.max()) + 1, dropout=0.5).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    # bfloat16 keeps float32's range, so only float16 (CUDA) needs its gradients scaled.
    amp_dtype = torch.float16 if device.type == "cuda" else torch.bfloat16
    scaler = torch.amp.GradScaler(device.type, enabled=args.amp and amp_dtype == torch.float16)

    def autocast() -> contextlib.AbstractContextManager:
        return torch.autocast(device.type, dtype=amp_dtype) if args.amp else contextlib.nullcontext()

    @torch.no_grad()
    def accuracy(mask: torch.Tensor) -> float:
        model.eval()
        correct = 0
        for batch in loader(mask, shuffle=False):
            batch = batch.to(device)
            with autocast():
                pred = model(batch.x, batch.edge_index)[: batch.batch_size].argmax(-1)
            correct += int((pred == batch.y[: batch.batch_size]).sum())
        return correct / int(mask.sum())

    report = TrainingReport(device=device)
    train_loader = loader(masks["train"], shuffle=True)
    for _ in range(args.epochs):
        model.train()
        report.start_epoch()
        total, correct, seen = 0.0, 0, 0
        for step, batch in enumerate(train_loader, start=1):
            batch = batch.to(device)
            with autocast():
                out = model(batch.x, batch.edge_index)[: batch.batch_size]  # seeds come first
                loss = F.cross_entropy(out.float(), batch.y[: batch.batch_size])
            scaler.scale(loss / args.accumulate).backward()
            if step % args.accumulate == 0 or step == len(train_loader):
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
            total += loss.item() * batch.batch_size
            correct += int((out.argmax(-1) == batch.y[: batch.batch_size]).sum())
            seen += batch.batch_size
        report.end_epoch(loss=total / seen, accuracy=correct / seen, batches=len(train_loader))
        print(report.validated(accuracy(masks["val"])).line(), flush=True)

    print(f"validation accuracy {report.epochs[-1].val_accuracy:.3f}, test accuracy {accuracy(masks['test']):.3f}")
    if args.report_dir:
        json_path, png_path = report.save(args.report_dir, "node-classification")
        print(f"training report: {json_path} and {png_path}")


if __name__ == "__main__":
    main()
