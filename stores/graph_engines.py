"""The embedded graph databases a data directory can keep its graph in, and everything in which
they differ, in one place.

LadybugDB continues Kùzu (archived in October 2025, last release 0.11.3) with the same Python
API and Cypher, so one store (``EmbeddedGraphStore``) serves both. What differs:

* the package and the file: ``ladybug`` writes ``graph.lbug``, ``kuzu`` writes ``graph.kuzu``;
  neither opens the other's file ("not a valid Lbug/Kuzu database file");
* **one process loads one of them**: both register native types of the same names, so importing
  the second one fails ("generic_type: type \"Database\" is already registered!") and the
  process crashes on exit. ``GraphEngine.module()`` refuses that with a message instead, and a
  migration reads the old engine in a child process;
* Kùzu is an optional extra now (``pip install gnnstore[kuzu]``), LadybugDB a dependency.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import sys
from dataclasses import dataclass
from types import ModuleType

from gnnstore.common.errors import PreconditionError


@dataclass(frozen=True)
class GraphEngine:
    """One embedded graph database gnnstore can keep a graph in.

    Attributes:
        name: the ``--graph-backend`` value that picks it.
        label: how messages name it.
        package: its Python package (import name and distribution).
        file_name: the database file it keeps in a data directory.
        install: what installs it.
    """

    name: str
    label: str
    package: str
    file_name: str
    install: str

    def module(self) -> ModuleType:
        """The engine's Python module, imported on first use.

        Raises:
            PreconditionError: it is not installed, or the other engine is loaded in this process.
        """
        for other in ENGINES.values():
            if other is not self and other.package in sys.modules:
                raise PreconditionError(
                    f"{self.label} cannot be opened in a process that has loaded {other.label}: the two "
                    "engines cannot share a process (run each in its own, e.g. `gnnstore migrate`)"
                )
        try:
            return importlib.import_module(self.package)
        except ImportError:
            raise PreconditionError(f"{self.label} is not installed: {self.install}") from None

    def version(self) -> str | None:
        """The installed engine's version, or ``None`` when it is not installed."""
        try:
            return importlib.metadata.version(self.package)
        except importlib.metadata.PackageNotFoundError:
            return None


LADYBUG = GraphEngine("ladybug", "LadybugDB", "ladybug", "graph.lbug", "pip install ladybug")
KUZU = GraphEngine("kuzu", "Kùzu", "kuzu", "graph.kuzu", "pip install 'gnnstore[kuzu]' (Kùzu is archived)")
ENGINES = {engine.name: engine for engine in (LADYBUG, KUZU)}
DEFAULT_ENGINE = LADYBUG
"""The engine a new data directory's graph is made with."""


def engine_named(name: str) -> GraphEngine:
    """The engine called ``name``.

    Raises:
        PreconditionError: no such engine.
    """
    try:
        return ENGINES[name]
    except KeyError:
        raise PreconditionError(f"unknown graph engine {name!r}; one of {sorted(ENGINES)}") from None


def open_failure(engine: GraphEngine, what: str, exc: Exception) -> PreconditionError:
    """``exc``, raised by ``engine`` opening ``what``, as an error that says what it means."""
    text = str(exc).removeprefix("Runtime exception: ")
    if "not a valid" in text or "version" in text.lower():
        return PreconditionError(
            f"{what} is not a {engine.label} {engine.version()} database ({text}); it was made by another "
            "engine or another version of it"
        )
    if "lock" in text.lower():
        return PreconditionError(f"{what} is in use by another process ({engine.label}: {text})")
    return PreconditionError(f"cannot open {what} with {engine.label} {engine.version()}: {text}")
