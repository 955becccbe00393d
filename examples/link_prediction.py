"""Link prediction through a gnnstore server: LinkNeighborLoader with negatives drawn on the server.

Start a server (see node_classification.py), then:

    python examples/link_prediction.py --address 127.0.0.1:50051

Ids: ``batch.edge_label_index`` (binary) and ``src_index`` / ``dst_pos_index`` /
``dst_neg_index`` (triplet) are LOCAL to the batch; ``batch.n_id[...]`` turns them into global
node ids, e.g. ``batch.n_id[batch.edge_label_index[:, num_pos:]]`` are the negatives' global ids.
For brevity the supervision links below are also in the message-passing graph; a real split
would hold them out (ingest the training edges only).

``--time-attr time`` makes it temporal link prediction: the server samples each link's
neighbourhood from nodes no later than the link (a link's time is the later of its ends' times,
read for those ends only), negatives too, and the model trains on the earliest 90% of the links
and is validated on the latest 10%.

``--amp`` (torch.autocast: bfloat16 on CPU, float16 with a gradient scaler on CUDA),
``--accumulate K`` and ``--report-dir`` work as in node_classification.py; the report's
accuracy is the share of links the model classifies right.
"""
from __future__ import annotations

import argparse
import contextlib

import torch
import torch.nn.functional as F
from torch_geometric.loader import LinkNeighborLoader
from torch_geometric.nn.models import GraphSAGE
from torch_geometric.sampler import NegativeSampling

from gnnstore.client import RemoteNeighborSampler, TrainingReport, connect


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
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--amp", action="store_true", help="mixed precision (torch.autocast)")
    parser.add_argument("--accumulate", type=int, default=1, help="batches per optimizer step")
    parser.add_argument("--report-dir", default=None, help="save the training report here (JSON, PNG)")
    parser.add_argument("--time-attr", default=None, help="node attribute of integer times: temporal sampling")
    args = parser.parse_args()
    device = torch.device(args.device)
    torch.manual_seed(0)

    fs, gs = connect(args.address, timeout=60)
    num_features = fs.get_tensor_size(group_name=None, attr_name="x")[1]
    row, col = gs.get_edge_index(edge_type=None, layout="coo")  # streamed in chunks
    links = torch.stack([row, col])[:, torch.randperm(row.numel())[: args.links]]
    link_time = None
    if args.time_attr:  # the past to train on, the future to validate on
        ends_time = fs.get_tensor(group_name=None, attr_name=args.time_attr, index=links.flatten())
        link_time = ends_time.view(2, -1).max(0).values
        order = link_time.argsort()
        links, link_time = links[:, order], link_time[order]
    split = int(0.9 * links.size(1))
    train, val = slice(0, split), slice(split, None)

    fanouts = [int(k) for k in args.fanouts.split(",")]
    sampler = RemoteNeighborSampler(fs, fanouts, feature_store=fs, time_attr=args.time_attr)

    def loader(part: slice, shuffle: bool) -> LinkNeighborLoader:
        return LinkNeighborLoader((fs, gs), num_neighbors=fanouts, neighbor_sampler=sampler,
                                  edge_label_index=(None, links[:, part]), batch_size=args.batch_size,
                                  edge_label_time=None if link_time is None else link_time[part],
                                  time_attr=args.time_attr, shuffle=shuffle,
                                  neg_sampling=NegativeSampling("binary", 1))

    model = GraphSAGE(num_features, 128, 2, 64).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.005)
    amp_dtype = torch.float16 if device.type == "cuda" else torch.bfloat16
    scaler = torch.amp.GradScaler(device.type, enabled=args.amp and amp_dtype == torch.float16)

    def scores_of(batch: object) -> torch.Tensor:
        with torch.autocast(device.type, dtype=amp_dtype) if args.amp else contextlib.nullcontext():
            h = model(batch.x, batch.edge_index)
        src, dst = batch.edge_label_index  # local positions into batch.n_id
        return (h[src].float() * h[dst].float()).sum(-1)

    report = TrainingReport(device=device)
    for _ in range(args.epochs):
        model.train()
        report.start_epoch()
        train_loader = loader(train, shuffle=True)
        total, correct, seen = 0.0, 0, 0
        for step, batch in enumerate(train_loader, start=1):
            batch = batch.to(device)
            scores = scores_of(batch)
            loss = F.binary_cross_entropy_with_logits(scores, batch.edge_label)
            scaler.scale(loss / args.accumulate).backward()
            if step % args.accumulate == 0 or step == len(train_loader):
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
            total += loss.item() * scores.numel()
            correct += int(((scores > 0).float() == batch.edge_label).sum())
            seen += scores.numel()
        report.end_epoch(loss=total / seen, accuracy=correct / seen, batches=len(train_loader))
        print(report.epochs[-1].line(), flush=True)

    model.eval()
    scores, labels = [], []
    with torch.no_grad():
        for batch in loader(val, shuffle=False):
            batch = batch.to(device)
            scores.append(scores_of(batch).cpu())
            labels.append(batch.edge_label.cpu())
    print(f"validation AUC {auc(torch.cat(scores), torch.cat(labels)):.3f}")
    if args.report_dir:
        json_path, png_path = report.save(args.report_dir, "link-prediction")
        print(f"training report: {json_path} and {png_path}")


if __name__ == "__main__":
    main()
