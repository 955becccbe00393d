"""``gnnstore demo``'s command line and settings (the run itself is ``gnnstore.demo``)."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import click

from gnnstore.stores.graph_engines import DEFAULT_ENGINE, ENGINES


@dataclass(frozen=True)
class DemoSettings:
    """Size of the generated graph and of the training run (the defaults take ~1-2 min on 2 cores)."""

    nodes: int = 20_000
    avg_degree: float = 10.0
    features: int = 64
    classes: int = 8
    epochs: int = 3
    batch_size: int = 512
    fanouts: tuple[int, ...] = (10, 5)
    hidden: int = 64
    lr: float = 0.01
    num_workers: int = 0
    cache_fraction: float = 0.2
    prefetch: int = 2
    seed: int = 0
    target_accuracy: float = 0.8
    graph_engine: str = DEFAULT_ENGINE.name



@click.command("demo")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where to ingest the graph.  [default: a temporary folder, removed afterwards]")
@click.option("--nodes", type=click.IntRange(min=100), default=DemoSettings.nodes, show_default=True,
              help="Nodes of the generated graph.")
@click.option("--epochs", type=click.IntRange(min=1), default=DemoSettings.epochs, show_default=True,
              help="Training epochs.")
@click.option("--batch-size", type=click.IntRange(min=1), default=DemoSettings.batch_size,
              show_default=True, help="Seed nodes per mini-batch.")
@click.option("--fanouts", default=",".join(map(str, DemoSettings.fanouts)), show_default=True,
              help="Neighbours per hop, comma-separated (-1 = all).")
@click.option("--num-workers", type=click.IntRange(min=0), default=DemoSettings.num_workers,
              show_default=True, help="DataLoader worker processes.")
@click.option("--cache-fraction", type=click.FloatRange(0.0, 1.0), default=DemoSettings.cache_fraction,
              show_default=True, help="Share of the feature bytes cached on the trainer (0: none).")
@click.option("--prefetch", type=click.IntRange(min=1), default=DemoSettings.prefetch,
              show_default=True, help="Batches made ahead while the model trains.")
@click.option("--seed", type=int, default=DemoSettings.seed, show_default=True, help="Random seed.")
@click.option("--target-accuracy", type=click.FloatRange(0.0, 1.0), default=DemoSettings.target_accuracy,
              show_default=True, help="Validation accuracy whose first reaching is timed.")
@click.option("--report-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="Where gnnstore-demo-report.json and .png are written.")
@click.option("--graph-backend", type=click.Choice(sorted(ENGINES)), default=DEFAULT_ENGINE.name,
              show_default=True, help="The embedded graph database the graph goes to.")
@click.option("-v", "--verbose", is_flag=True, help="Show gnnstore's INFO logs.")
def demo_command(
    data_dir: Path | None, nodes: int, epochs: int, batch_size: int, fanouts: str, num_workers: int,
    cache_fraction: float, prefetch: int, seed: int, target_accuracy: float, report_dir: Path,
    graph_backend: str, verbose: bool,
) -> None:
    """Generate a graph, ingest it, serve it and train GraphSAGE through the remote loaders."""
    if not verbose and logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        logging.getLogger("gnnstore").setLevel(logging.WARNING)  # the demo's own lines only
    try:
        hops = tuple(int(part) for part in fanouts.split(","))
    except ValueError:
        raise click.BadParameter(f"expected integers like 10,5; got {fanouts!r}", param_hint="--fanouts")
    settings = DemoSettings(nodes=nodes, epochs=epochs, batch_size=batch_size, fanouts=hops,
                            num_workers=num_workers, cache_fraction=cache_fraction,
                            prefetch=prefetch, seed=seed, target_accuracy=target_accuracy,
                            graph_engine=graph_backend)
    from gnnstore.demo import run_demo  # torch and PyG load when the demo runs, not for --help

    run_demo(settings, data_dir, report_dir, click.echo)
