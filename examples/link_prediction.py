"""Link prediction through a gnnstore server: LinkNeighborLoader with negatives drawn on the server.

Start a server (see node_classification.py), then:

    python examples/link_prediction.py --address 127.0.0.1:50051

Ids: ``batch.edge_label_index`` (binary) and ``src_index`` / ``dst_pos_index`` /
``dst_neg_index`` (triplet) are LOCAL to the batch; ``batch.n_id[...]`` turns them into global
node ids, e.g. ``batch.n_id[batch.edge_label_index[:, num_pos:]]`` are the negatives' global ids.
For brevity the supervision links below are also in the message-passing graph; a real split
would hold them out (ingest the training edges only).
"""
from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from torch_geometric.loader import LinkNeighborLoader
from torch_geometric.nn.models import GraphSAGE
from torch_geometric.sampler import NegativeSampling

from gnnstore.client import RemoteNeighborSampler, connect


def auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """Area under the ROC curve: how often a positive outranks a negative."""
    ranks = scores.argsort().argsort().double() + 1
    positives = labels.bool()
    num_pos, num_neg = int(positives.sum()), int((~positives).sum())
    return float((ranks[positives].sum() - num_pos * (num_pos + 1) / 2) / (num_pos * num_neg))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default="127.0.0.1:50051", help="host:port of gnnstore serve")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--links", type=int, default=20_000, help="supervision links used")
    parser.add_argument("--fanouts", default="10,5", help="neighbours per hop, comma-separated")
    args = parser.parse_args()
    torch.manual_seed(0)

    fs, gs = connect(args.address, timeout=60)
    num_features = fs.get_tensor_size(group_name=None, attr_name="x")[1]
    row, col = gs.get_edge_index(edge_type=None, layout="coo")  # streamed in chunks
    links = torch.stack([row, col])[:, torch.randperm(row.numel())[: args.links]]
    split = int(0.9 * links.size(1))
    train_links, val_links = links[:, :split], links[:, split:]

    fanouts = [int(k) for k in args.fanouts.split(",")]
    sampler = RemoteNeighborSampler(fs, fanouts, feature_store=fs)

    def loader(edges: torch.Tensor, shuffle: bool) -> LinkNeighborLoader:
        return LinkNeighborLoader((fs, gs), num_neighbors=fanouts, neighbor_sampler=sampler,
                                  edge_label_index=(None, edges), batch_size=args.batch_size,
                                  shuffle=shuffle, neg_sampling=NegativeSampling("binary", 1))

    model = GraphSAGE(num_features, 128, 2, 64)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.005)
    for epoch in range(1, args.epochs + 1):
        model.train()
        started, total, batches = time.perf_counter(), 0.0, 0
        for batch in loader(train_links, shuffle=True):
            optimizer.zero_grad()
            h = model(batch.x, batch.edge_index)
            src, dst = batch.edge_label_index  # local positions into batch.n_id
            loss = F.binary_cross_entropy_with_logits((h[src] * h[dst]).sum(-1), batch.edge_label)
            loss.backward()
            optimizer.step()
            total, batches = total + loss.item(), batches + 1
        seconds = time.perf_counter() - started
        print(f"epoch {epoch}: loss {total / batches:.4f}, {seconds:.1f} s, {batches / seconds:.1f} batches/s")

    model.eval()
    scores, labels = [], []
    with torch.no_grad():
        for batch in loader(val_links, shuffle=False):
            h = model(batch.x, batch.edge_index)
            src, dst = batch.edge_label_index
            scores.append((h[src] * h[dst]).sum(-1))
            labels.append(batch.edge_label)
    print(f"validation AUC {auc(torch.cat(scores), torch.cat(labels)):.3f}")


if __name__ == "__main__":
    main()
