"""``gnnstore ingest``: a generated graph, Planetoid files or CSV/Parquet files into the stores.

The graph goes to an embedded database in ``--data-dir`` or, with ``--graph-backend neo4j``, to Neo4j (or to
``neo4j-admin`` import files for a new database, ``--neo4j-import-dir``); the
features and the id map always go to RocksDB in ``--data-dir``. The graph options are read as
the server reads them (``gnnstore.config``): flag, else ``GNNSTORE_GRAPH_BACKEND``,
``GNNSTORE_NEO4J_URI``, ``GNNSTORE_NEO4J_USER``; the password only from
``GNNSTORE_NEO4J_PASSWORD``.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import shlex
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from gnnstore.common.errors import InvalidRequestError
from gnnstore.config import EMBEDDED_ENGINES, GRAPH_BACKENDS, ServerConfig, embedded_engine, load_config
from gnnstore.ingest.file_columns import KEY_COLUMN, LABEL_COLUMN

if TYPE_CHECKING:
    from gnnstore.common.graph_types import EdgeType, NodeType
    from gnnstore.ingest.report import IngestReport
    from gnnstore.stores.data_dir import Stores

# The commands import what they run when they run: `gnnstore ingest --help` loads no torch.
DEFAULT_DATA_DIR = Path("gnnstore-data")
_DEFAULTS = ServerConfig()


@dataclass(frozen=True)
class Target:
    """Where an ingest writes.

    Attributes:
        data_dir: features and id map (RocksDB), and the graph unless ``graph_backend`` is
            ``neo4j``.
        graph_backend: one of ``GRAPH_BACKENDS`` (``embedded``: the directory's own engine,
            LadybugDB for a new one).
        neo4j_uri: the Bolt URI (``neo4j`` only).
        neo4j_auth: ``(user, password)``, or ``None`` when no password is set (auth off).
        neo4j_import_dir: write the graph as ``neo4j-admin database import`` files here, for a
            new database, instead of into a running Neo4j (``neo4j`` only).
    """

    data_dir: Path
    graph_backend: str = "embedded"
    neo4j_uri: str = _DEFAULTS.neo4j_uri
    neo4j_auth: tuple[str, str] | None = dataclasses.field(default=None, repr=False)
    neo4j_import_dir: Path | None = None


def resolve_target(
    data_dir: Path, environ: Mapping[str, str], neo4j_import_dir: Path | None = None, **flags: str | None
) -> Target:
    """The target from flags (``None``: unset), then ``GNNSTORE_*`` variables, then defaults.

    Raises:
        InvalidRequestError: a bad value in a ``GNNSTORE_*`` variable (the message names it), or
            an import directory for a graph backend other than ``neo4j``.
    """
    config = load_config(None, environ, {**flags, "data_dir": data_dir})
    if neo4j_import_dir is not None and config.graph_backend != "neo4j":
        raise InvalidRequestError("--neo4j-import-dir writes import files for Neo4j; add --graph-backend neo4j")
    auth = None if config.neo4j_password is None else (config.neo4j_user, config.neo4j_password)
    return Target(config.data_dir, config.graph_backend, config.neo4j_uri, auth, neo4j_import_dir)


def target_options(command: Callable) -> Callable:
    """Add the options that say where the graph goes; the command receives ``target: Target``."""

    @functools.wraps(command)
    def with_target(
        *args: object, data_dir: Path, graph_backend: str | None, neo4j_uri: str | None,
        neo4j_user: str | None, neo4j_import_dir: Path | None, skip_if_done: bool, **kwargs: object,
    ) -> object:
        target = resolve_target(data_dir, os.environ, neo4j_import_dir, graph_backend=graph_backend,
                                neo4j_uri=neo4j_uri, neo4j_user=neo4j_user)
        return command(*args, target=target, skip_if_done=skip_if_done, **kwargs)

    options = [
        click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path),
                     default=DEFAULT_DATA_DIR, show_default=True,
                     help="Features, id map (and the graph's database); created if missing."),
        click.option("--graph-backend", type=click.Choice(GRAPH_BACKENDS),
                     help="Where the graph goes: an embedded database in --data-dir (embedded: the "
                          "one the directory has, LadybugDB for a new one; or ladybug, kuzu), or "
                          f"Neo4j ($GNNSTORE_GRAPH_BACKEND).  [default: {_DEFAULTS.graph_backend}]"),
        click.option("--neo4j-uri", help="Bolt URI of Neo4j ($GNNSTORE_NEO4J_URI).  "
                                         f"[default: {_DEFAULTS.neo4j_uri}]"),
        click.option("--neo4j-user", help="Neo4j user ($GNNSTORE_NEO4J_USER; password: "
                                          f"$GNNSTORE_NEO4J_PASSWORD).  [default: {_DEFAULTS.neo4j_user}]"),
        click.option("--neo4j-import-dir", type=click.Path(file_okay=False, path_type=Path),
                     help="With --graph-backend neo4j: write the graph as `neo4j-admin database "
                          "import` files here (a new, empty directory) instead of into a running "
                          "Neo4j; then import them and run `gnnstore neo4j-adopt`."),
        click.option("--skip-if-done", is_flag=True,
                     help="Do nothing when the last ingest that finished in --data-dir read the "
                          "same input into the same graph target (the stores are not opened)."),
    ]  # fmt: skip
    for option in reversed(options):
        with_target = option(with_target)
    return with_target


@contextmanager
def open_target(target: Target) -> Iterator[Stores]:
    """Open the stores ``target`` names, for writing (Neo4j writes show a progress bar).

    Raises:
        ServerUnavailableError: Neo4j does not answer or refuses the login; nothing is written.
    """
    from gnnstore.stores.data_dir import open_stores
    from gnnstore.stores.neo4j_graph_store import Neo4jGraphStore
    from gnnstore.stores.neo4j_import import ImportFilesGraphStore

    graph = None
    if target.neo4j_import_dir is not None:
        graph = ImportFilesGraphStore(target.neo4j_import_dir)
    elif target.graph_backend == "neo4j":
        graph = Neo4jGraphStore(target.neo4j_uri, target.neo4j_auth, progress=True)
        try:
            graph.verify()
        except BaseException:
            graph.close()
            raise
    with open_stores(target.data_dir, graph_store=graph, engine=embedded_engine(target.graph_backend)) as stores:
        yield stores


def run_ingest(
    target: Target, source: dict, skip_if_done: bool, ingest: Callable[[Stores], IngestReport]
) -> None:
    """Run ``ingest`` on the opened target and record ``source`` once every write committed.

    ``source`` names the input (parameters, or file digests); with ``skip_if_done`` an ingest
    whose record matches is skipped before the stores are opened, so a running server's lock
    on them does not stop it. The record is removed before the first write: an ingest that
    fails or is killed leaves none, and the next run redoes it.
    """
    from gnnstore.stores.data_dir import (
        clear_ingest_record,
        discard_graph_writes,
        read_ingest_record,
        write_ingest_record,
    )
    from gnnstore.stores.neo4j_attached import AttachedSchema
    from gnnstore.stores.neo4j_import import ImportFilesGraphStore, admin_import_args

    graph = {"backend": target.graph_backend}
    if target.neo4j_import_dir is not None:
        graph["import_dir"] = str(target.neo4j_import_dir.resolve())
    elif target.graph_backend == "neo4j":
        graph["uri"] = target.neo4j_uri
    record = {"source": source, "graph": graph}
    if skip_if_done and read_ingest_record(target.data_dir) == record:
        click.echo(f"nothing to do: {target.data_dir} holds this ingest already (--skip-if-done)")
        return
    with open_target(target) as stores:
        clear_ingest_record(target.data_dir)
        AttachedSchema.forget(target.data_dir)  # the folder no longer mirrors an attached graph
        report = ingest(stores)
        if isinstance(stores.graph_store, ImportFilesGraphStore):
            stores.graph_store.finish()
    discarded = discard_graph_writes(target.data_dir)  # made over the graph this ingest replaced
    if discarded:
        click.echo(f"discarded {discarded} graph write(s) made through the service over the previous graph")
    write_ingest_record(target.data_dir, record)
    click.echo(report.summary())
    if target.neo4j_import_dir is not None:
        click.echo(
            f"graph written as import files to {target.neo4j_import_dir}. With the database stopped, "
            f"run on the Neo4j host:\n  neo4j-admin {shlex.join(admin_import_args(target.neo4j_import_dir))}\n"
            f"then start it and run:\n  gnnstore neo4j-adopt --import-dir {target.neo4j_import_dir}"
        )


def _digest(path: Path) -> str:
    """The sha256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while block := file.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _digests(paths: Mapping[object, Path]) -> list[list]:
    """``[[type, sha256], ...]`` of typed paths, in a stable order (types may be None or tuples)."""
    return sorted(([list(t) if isinstance(t, tuple) else t, _digest(p)] for t, p in paths.items()),
                  key=repr)


@click.group("ingest")
def ingest_command() -> None:
    """Load a graph into the stores: RocksDB in --data-dir, the graph in a database there or in Neo4j.

    Re-running the same ingest is safe: the same keys keep their ids and edge types are
    replaced, not appended.
    """


@ingest_command.command("generate")
@click.option("--nodes", type=click.IntRange(min=1), default=10_000, show_default=True,
              help="Number of nodes.")
@click.option("--avg-degree", type=click.FloatRange(min=0), default=10.0, show_default=True,
              help="Mean out-degree (edges = nodes x avg-degree).")
@click.option("--features", type=click.IntRange(min=1), default=100, show_default=True,
              help="Width of the float32 feature matrix x.")
@click.option("--classes", type=click.IntRange(min=1), default=47, show_default=True,
              help="Number of planted classes (labels y).")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed.")
@target_options
def generate_command(
    nodes: int, avg_degree: float, features: int, classes: int, seed: int, target: Target,
    skip_if_done: bool,
) -> None:
    """A power-law graph with planted classes, class-correlated features and splits."""
    from gnnstore.ingest.generator import generate_graph
    from gnnstore.ingest.graph_ingest import ingest_graph

    if classes > nodes:
        raise click.BadParameter(f"{classes} classes need at least as many nodes, got {nodes}",
                                 param_hint="--classes")
    source = {"generate": {"nodes": nodes, "avg_degree": avg_degree, "features": features,
                           "classes": classes, "seed": seed}}
    run_ingest(target, source, skip_if_done, lambda stores: ingest_graph(
        generate_graph(nodes, avg_degree, features, classes, seed=seed), stores, progress=True))


@ingest_command.command("planetoid")
@click.argument("raw_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--name", default="Cora", show_default=True,
              help="Dataset name: Cora, CiteSeer or PubMed (raw files ind.<name>.*).")
@target_options
def planetoid_command(raw_dir: Path, name: str, target: Target, skip_if_done: bool) -> None:
    """PyG's Planetoid raw files (e.g. tests/data/planetoid/Cora/raw)."""
    from gnnstore.ingest.graph_ingest import ingest_graph
    from gnnstore.ingest.planetoid import RAW_SUFFIXES, load_planetoid

    data = load_planetoid(raw_dir, name)
    files = {suffix: raw_dir / f"ind.{name.lower()}.{suffix}" for suffix in RAW_SUFFIXES}
    source = {"planetoid": {"name": name, "files": _digests(files)}}
    run_ingest(target, source, skip_if_done, lambda stores: ingest_graph(data, stores, progress=True))


@ingest_command.command("files")
@click.option("--nodes", "node_specs", multiple=True, metavar="[TYPE=]PATH",
              help="Node file (CSV/Parquet) with a key column, optional y and *_mask columns, "
                   "other columns are features. Repeat once per node type.")
@click.option("--edges", "edge_specs", multiple=True, metavar="[SRC,REL,DST=]PATH",
              help="Edge file (CSV/Parquet) with src and dst key columns; other columns become its "
              "edge_attr (float32). Repeat per edge type.")
@click.option("--features", "feature_specs", multiple=True, metavar="[TYPE=]PATH",
              help="A .npy feature matrix for a node type, row i = node file row i.")
@click.option("--key-column", default=KEY_COLUMN, show_default=True,
              help="The node files' key column.")
@click.option("--label-column", default=LABEL_COLUMN, show_default=True,
              help="The node files' label column (optional in each file).")
@target_options
def files_command(
    node_specs: tuple[str, ...], edge_specs: tuple[str, ...], feature_specs: tuple[str, ...],
    key_column: str, label_column: str, target: Target, skip_if_done: bool,
) -> None:
    """Node and edge files; untyped paths make a homogeneous graph.

    Example: --nodes paper=papers.parquet --nodes author=authors.csv
    --edges author,writes,paper=writes.csv
    """
    from gnnstore.ingest.file_source import ingest_files

    nodes = _parse_specs(node_specs, "--nodes", _node_type)
    features = _parse_specs(feature_specs, "--features", _node_type)
    edges = _parse_specs(edge_specs, "--edges", _edge_type)
    if not nodes and not features:
        raise click.BadParameter("give at least one node file", param_hint="--nodes")
    typed = {t is None for t in [*nodes, *features, *edges]}
    if len(typed) > 1:
        raise click.BadParameter(
            "mix of untyped (homogeneous) and typed paths; type all of them or none",
            param_hint="--nodes/--edges/--features",
        )
    source = {"files": {"nodes": _digests(nodes), "edges": _digests(edges),
                        "features": _digests(features), "key_column": key_column,
                        "label_column": label_column}}
    run_ingest(target, source, skip_if_done, lambda stores: ingest_files(
        stores, nodes=nodes, edges=edges, features=features, key_column=key_column,
        label_column=label_column, progress=True))


def _parse_specs(
    specs: tuple[str, ...], option: str, parse_type: Callable[[str, str], object]
) -> dict:
    """``{type: Path}`` from ``TYPE=PATH`` (or a bare ``PATH``: type ``None``) values."""
    parsed: dict = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep:
            name, path = "", spec
        key = parse_type(name, option) if sep else None
        if key in parsed:
            raise click.BadParameter(f"type {key!r} is given twice", param_hint=option)
        parsed[key] = Path(path)
        if not parsed[key].is_file():
            raise click.BadParameter(f"file {path!r} does not exist", param_hint=option)
    return parsed


def _node_type(name: str, option: str) -> NodeType:
    if not name:
        raise click.BadParameter("empty node type before '='", param_hint=option)
    return name


def _edge_type(name: str, option: str) -> EdgeType:
    parts = tuple(name.split(","))
    if len(parts) != 3 or not all(parts):
        raise click.BadParameter(
            f"edge type must be SRC,REL,DST (three non-empty names), got {name!r}",
            param_hint=option,
        )
    return parts


@click.command("neo4j-adopt")
@click.option("--import-dir", type=click.Path(exists=True, file_okay=False, path_type=Path), required=True,
              help="The directory `gnnstore ingest --neo4j-import-dir` wrote and neo4j-admin imported.")
@click.option("--neo4j-uri", help=f"Bolt URI of Neo4j ($GNNSTORE_NEO4J_URI).  [default: {_DEFAULTS.neo4j_uri}]")
@click.option("--neo4j-user", help="Neo4j user ($GNNSTORE_NEO4J_USER; password: "
                                   f"$GNNSTORE_NEO4J_PASSWORD).  [default: {_DEFAULTS.neo4j_user}]")
def adopt_command(import_dir: Path, neo4j_uri: str | None, neo4j_user: str | None) -> None:
    """Make a graph imported by neo4j-admin a gnnstore graph: constraints, indexes, metadata.

    Run once, after `neo4j-admin database import full` of the files and a start of the database.
    """
    from gnnstore.stores.neo4j_graph_store import Neo4jGraphStore

    target = resolve_target(DEFAULT_DATA_DIR, os.environ, graph_backend="neo4j", neo4j_uri=neo4j_uri,
                            neo4j_user=neo4j_user)
    store = Neo4jGraphStore(target.neo4j_uri, target.neo4j_auth)
    try:
        store.verify()
        store.adopt_import(import_dir)
        click.echo(f"adopted the imported graph in {target.neo4j_uri}: "
                   f"{', '.join(str(a.edge_type) for a in store.edge_attrs())} (version {store.version()})")
    finally:
        store.close()


@click.group("attach")
def attach_command() -> None:
    """Serve a graph kept in another database, in its own schema (read only)."""


@attach_command.command("neo4j")
@click.option("--spec", "spec_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True,
              help="TOML file naming the labels (key, features) and relationship types to serve.")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_DATA_DIR,
              show_default=True, help="Where the id map, features and topology go (edge files + RocksDB).")
@click.option("--neo4j-uri", help=f"Bolt URI of Neo4j ($GNNSTORE_NEO4J_URI).  [default: {_DEFAULTS.neo4j_uri}]")
@click.option("--neo4j-user", help="Neo4j user, a reader is enough ($GNNSTORE_NEO4J_USER; password: "
                                   f"$GNNSTORE_NEO4J_PASSWORD).  [default: {_DEFAULTS.neo4j_user}]")
@click.option("--database", help="The Neo4j database.  [default: the server's default]")
def attach_neo4j_command(
    spec_path: Path, data_dir: Path, neo4j_uri: str | None, neo4j_user: str | None, database: str | None
) -> None:
    """Read labels and relationships of your own Neo4j graph into --data-dir, then serve it with
    `gnnstore serve --data-dir`. Run again to pick up new nodes and relationships (known keys keep
    their ids). Neo4j is only read.

    The spec (labels become node types, relationships edge types):

    \b
      [labels.User]
      key = "uid"                      # omit: Neo4j's elementId
      features = { x = "embedding", y = "segment" }
      [[relationships]]
      from = "User"
      type = "FOLLOWS"
      to = "User"
      features = { edge_attr = "weight" }   # optional: edge features
    """
    from gnnstore.ingest.neo4j_attach import attach_neo4j, read_spec

    spec = read_spec(spec_path)
    source = resolve_target(DEFAULT_DATA_DIR, os.environ, graph_backend="neo4j", neo4j_uri=neo4j_uri,
                            neo4j_user=neo4j_user)
    report = attach_neo4j(source.neo4j_uri, source.neo4j_auth, spec, data_dir, database=database, progress=True)
    for line in report.lines():
        click.echo(line)
    click.echo(f"attached {source.neo4j_uri} into {data_dir}; serve it with: gnnstore serve --data-dir {data_dir}")


@click.command("migrate")
@click.option("--data-dir", type=click.Path(exists=True, file_okay=False, path_type=Path), required=True,
              help="The data directory whose graph database to convert (stop a server writing to it first).")
@click.option("--to", "engine", type=click.Choice(sorted(EMBEDDED_ENGINES)), required=True,
              help="The engine to keep the graph in from now on.")
def migrate_command(data_dir: Path, engine: str) -> None:
    """Convert a data directory's graph database to another engine, in place: a kill at any
    point leaves the old graph serving, and running it again finishes the job."""
    from gnnstore.stores.engine_migration import migrate

    click.echo(migrate(data_dir, engine))
