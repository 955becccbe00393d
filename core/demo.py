"""``gnnstore demo``: generate a learnable graph, ingest it, serve it, train GraphSAGE through it.

Everything a user would do, on the embedded default (LadybugDB + RocksDB): the graph goes through
``ingest_graph`` into a data directory, a ``gnnstore serve`` child process serves it on a free
port, and a 2-layer GraphSAGE trains with PyG's ``NodeLoader`` over the remote stores and the
remote sampler (features ride with each sample: one round trip per mini-batch). A feature cache
(20% of the feature bytes, hot set + SIEVE) keeps rows on the trainer so only misses travel,
and a ``Prefetcher`` makes two batches ahead. Each epoch prints one line (loss, accuracies,
batches/s, stall, cache hit rate per tier, memory); the run's ``TrainingReport`` is saved as
JSON and PNG. gnnstore's INFO logs are off unless ``-v``.
"""
from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.data import Data, FeatureStore, GraphStore
from torch_geometric.loader import NodeLoader
from torch_geometric.nn.models import GraphSAGE
from torch_geometric.sampler import BaseSampler

from gnnstore.backend.server.server_process import ServerProcess
from gnnstore.client import EpochRecord, Prefetcher, RemoteNeighborSampler, TrainingReport, connect
from gnnstore.demo_command import DemoSettings
from gnnstore.ingest.generator import generate_graph
from gnnstore.ingest.graph_ingest import ingest_graph
from gnnstore.stores.data_dir import open_stores
from gnnstore.stores.graph_engines import ENGINES


@dataclass(frozen=True)
class DemoResult:
    """What the demo measured: every epoch, validation and test accuracy, the server's exit code."""

    epochs: list[EpochRecord]
    val_accuracy: float
    test_accuracy: float
    server_exit_code: int
    report_files: tuple[Path, Path]


def train_node_classifier(
    model: torch.nn.Module,
    data: tuple[FeatureStore, GraphStore],
    sampler: BaseSampler,
    train_ids: Tensor,
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    report: TrainingReport,
    val_ids: Tensor | None = None,
    num_workers: int = 0,
    prefetch: int = 2,
    say: Callable[[str], None] | None = None,
) -> list[EpochRecord]:
    """Train ``model`` on the seed nodes ``train_ids`` (global ids) with PyG's ``NodeLoader``.

    The loss counts only each batch's seeds (``out[:batch.batch_size]``): the seeds come first.
    A ``Prefetcher`` keeps ``prefetch`` batches ready. Each epoch goes into ``report`` (with the
    validation accuracy on ``val_ids`` when given, and the cache's hit rates when the feature
    store has a cache) and its line to ``say``; the first batch's FLOPs are counted.
    """
    loader = Prefetcher(
        NodeLoader(data, node_sampler=sampler, input_nodes=train_ids, batch_size=batch_size,
                   shuffle=True, num_workers=num_workers),
        depth=prefetch,
    )
    cache = getattr(data[0], "cache", None)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=5e-4)

    def step(batch: Data) -> tuple[Tensor, Tensor]:
        optimizer.zero_grad()
        out = model(batch.x.float(), batch.edge_index)[: batch.batch_size]
        loss = F.cross_entropy(out, batch.y[: batch.batch_size])
        loss.backward()
        optimizer.step()
        return out, loss

    for epoch in range(1, epochs + 1):
        model.train()
        if cache is not None:
            cache.start_epoch()
        report.start_epoch()
        total_loss, correct, seen, batches = 0.0, 0, 0, 0
        for batch in loader:
            if report.flops_per_batch is None:
                out, loss = report.count_flops(lambda: step(batch))
            else:
                out, loss = step(batch)
            y = batch.y[: batch.batch_size]
            total_loss += loss.item() * y.numel()
            correct += int((out.argmax(-1) == y).sum())
            seen += y.numel()
            batches += 1
        record = report.end_epoch(
            loss=total_loss / max(seen, 1), accuracy=correct / max(seen, 1), batches=batches,
            stall_fraction=loader.stall_fraction, cache=None if cache is None else cache.stats(),
            note="includes one-time kernel compilation and connection set-up" if epoch == 1 else "",
        )
        if val_ids is not None:
            record = report.validated(evaluate(model, data, sampler, val_ids, batch_size=batch_size))
        if say is not None:
            say(record.line())
    return report.epochs


@torch.no_grad()
def evaluate(
    model: torch.nn.Module,
    data: tuple[FeatureStore, GraphStore],
    sampler: BaseSampler,
    ids: Tensor,
    *,
    batch_size: int,
) -> float:
    """Accuracy of ``model`` on the nodes ``ids`` (global ids)."""
    model.eval()
    loader = NodeLoader(data, node_sampler=sampler, input_nodes=ids, batch_size=batch_size)
    correct = seen = 0
    for batch in loader:
        out = model(batch.x.float(), batch.edge_index)[: batch.batch_size]
        correct += int((out.argmax(-1) == batch.y[: batch.batch_size]).sum())
        seen += batch.batch_size
    return correct / max(seen, 1)


def run_demo(
    settings: DemoSettings, data_dir: Path | None, report_dir: Path, say: Callable[[str], None]
) -> DemoResult:
    """Generate, ingest, serve and train; ``say`` receives one line per step and per epoch.

    Args:
        settings: graph and training sizes.
        data_dir: where to ingest (a fresh temporary folder when ``None``).
        report_dir: where the training report (JSON and PNG) goes.
        say: where progress lines go (the CLI passes ``click.echo``).
    """
    with tempfile.TemporaryDirectory(prefix="gnnstore-demo-") as tmp:
        target = Path(tmp) / "data" if data_dir is None else Path(data_dir)
        return _run(settings, target, report_dir, Path(tmp), say)


def _run(
    settings: DemoSettings, data_dir: Path, report_dir: Path, tmp: Path, say: Callable[[str], None]
) -> DemoResult:
    torch.manual_seed(settings.seed)
    started = time.perf_counter()
    graph = generate_graph(settings.nodes, settings.avg_degree, settings.features, settings.classes,
                           seed=settings.seed)
    say(f"generated a power-law graph: {graph.num_nodes} nodes, {graph.num_edges} edges, "
        f"{settings.features} features, {settings.classes} classes")
    with open_stores(data_dir, engine=settings.graph_engine) as stores:
        ingest_graph(graph, stores)
    engine = ENGINES[settings.graph_engine].label
    say(f"ingested into {data_dir} ({engine} + RocksDB) in {time.perf_counter() - started:.1f} s")
    serve_args = ("--read-only", "--graph-backend", settings.graph_engine)
    with ServerProcess(data_dir, *serve_args, log=tmp / "server.log") as server:
        say(server.startup_line)
        feature_bytes = sum(graph[k].numel() * graph[k].element_size() for k in graph.node_attrs())
        fs, gs = connect(server.address, cache_bytes=int(settings.cache_fraction * feature_bytes))
        sampler = RemoteNeighborSampler(fs, list(settings.fanouts), feature_store=fs)
        model = GraphSAGE(settings.features, settings.hidden, 2, settings.classes, dropout=0.5)
        ids = torch.arange(graph.num_nodes)
        report = TrainingReport(target_accuracy=settings.target_accuracy)
        epochs = train_node_classifier(
            model, (fs, gs), sampler, ids[graph.train_mask], epochs=settings.epochs,
            batch_size=settings.batch_size, lr=settings.lr, report=report,
            val_ids=ids[graph.val_mask], num_workers=settings.num_workers,
            prefetch=settings.prefetch, say=say,
        )
        val = epochs[-1].val_accuracy
        test = evaluate(model, (fs, gs), sampler, ids[graph.test_mask], batch_size=settings.batch_size)
        reached = report.time_to_target_s
        say(f"one training step: {report.flops_per_batch / 1e6:.0f} MFLOPs (matmuls only)")
        say(f"validation accuracy {val:.3f}, test accuracy {test:.3f} "
            f"(chance: {1 / settings.classes:.3f}); validation accuracy "
            f"{settings.target_accuracy:.2f} " + ("not reached" if reached is None else f"reached after {reached:.1f} s"))
        fs.connection.close()
    code = server.proc.returncode
    files = report.save(report_dir, "gnnstore-demo-report")
    say(f"server stopped (exit code {code}); total {time.perf_counter() - started:.1f} s; "
        f"training report: {files[0]} and {files[1]}")
    return DemoResult(epochs, val, test, code, files)
