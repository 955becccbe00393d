"""Node classification through a gnnstore server: connect, build the loaders, train, evaluate.

Start a server over a graph with node features ``x``, labels ``y`` and a ``train_mask`` /
``val_mask`` / ``test_mask`` (what ``gnnstore ingest generate`` and ``planetoid`` write):

    gnnstore ingest generate --nodes 20000 --data-dir data
    gnnstore serve --data-dir data --port 50051

then, in another shell:

    python examples/node_classification.py --address 127.0.0.1:50051

Ids: ``batch.n_id`` holds global node ids (the rows the store returned), ``batch.edge_index``
is local to the batch, and the first ``batch.batch_size`` nodes are the seeds.
"""
from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from torch_geometric.loader import NodeLoader
from torch_geometric.nn.models import GraphSAGE

from gnnstore.client import RemoteNeighborSampler, connect


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default="127.0.0.1:50051", help="host:port of gnnstore serve")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--fanouts", default="10,5", help="neighbours per hop, comma-separated")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--num-workers", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(0)

    # The store pair PyG's loaders take; nothing is sent until the first call.
    fs, gs = connect(args.address, timeout=60)
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

    model = GraphSAGE(num_features, args.hidden, 2, int(y.max()) + 1, dropout=0.5)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    train_loader = loader(masks["train"], shuffle=True)
    for epoch in range(1, args.epochs + 1):
        model.train()
        started, total, batches = time.perf_counter(), 0.0, 0
        for batch in train_loader:
            optimizer.zero_grad()
            out = model(batch.x, batch.edge_index)[: batch.batch_size]  # seeds come first
            loss = F.cross_entropy(out, batch.y[: batch.batch_size])
            loss.backward()
            optimizer.step()
            total, batches = total + loss.item(), batches + 1
        seconds = time.perf_counter() - started
        print(f"epoch {epoch}: loss {total / batches:.4f}, {seconds:.1f} s, {batches / seconds:.1f} batches/s")

    @torch.no_grad()
    def accuracy(mask: torch.Tensor) -> float:
        model.eval()
        correct = 0
        for batch in loader(mask, shuffle=False):
            pred = model(batch.x, batch.edge_index)[: batch.batch_size].argmax(-1)
            correct += int((pred == batch.y[: batch.batch_size]).sum())
        return correct / int(mask.sum())

    print(f"validation accuracy {accuracy(masks['val']):.3f}, test accuracy {accuracy(masks['test']):.3f}")


if __name__ == "__main__":
    main()
