"""The import rules ARCHITECTURE.md states, checked over every module, function-local imports
included, and a run-time check that the wire-free rooms load no gRPC."""
from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {  # folder -> the import package it becomes (pyproject.toml's package-dir)
    "core": "gnnstore",
    "common": "gnnstore.common",
    "stores": "gnnstore.stores",
    "ingest": "gnnstore.ingest",
    "proto": "gnnstore.proto",
    "backend": "gnnstore.backend",
    "client": "gnnstore.client",
}
ROOT_MODULES = ("gnnstore.config", "gnnstore.__version__")  # the package root's shared parts


@dataclass(frozen=True)
class Rule:
    """Modules under ``room`` import only gnnstore modules under ``may_import`` (their own room
    always), and no gRPC unless ``grpc``."""

    room: str
    may_import: tuple[str, ...]
    grpc: bool = False


ENGINE = "gnnstore.backend.engine"
RULES = [
    Rule("gnnstore.common", ()),
    Rule("gnnstore.stores", ("gnnstore.common",)),
    Rule("gnnstore.ingest", ("gnnstore.common", "gnnstore.stores", *ROOT_MODULES)),
    Rule("gnnstore.proto", ("gnnstore.common",), grpc=True),
    Rule("gnnstore.client", ("gnnstore.common", "gnnstore.proto", *ROOT_MODULES), grpc=True),
    Rule(ENGINE, ("gnnstore.common", "gnnstore.stores")),
    Rule("gnnstore.backend.features", ("gnnstore.common", "gnnstore.stores")),
    Rule("gnnstore.backend.versions", (ENGINE, "gnnstore.common", "gnnstore.stores")),
    Rule(
        "gnnstore.backend.service",
        (ENGINE, "gnnstore.backend.features", "gnnstore.backend.versions", "gnnstore.common", "gnnstore.stores",
         "gnnstore.proto", *ROOT_MODULES),
        grpc=True,
    ),
    Rule(
        "gnnstore.backend.server",
        ("gnnstore.backend", "gnnstore.common", "gnnstore.stores", "gnnstore.proto", *ROOT_MODULES),
        grpc=True,
    ),
]


def _modules() -> dict[str, Path]:
    found = {}
    for folder, package in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package, *parts))] = path
    return found


def _imports(module: str, path: Path) -> set[str]:
    """Every module ``module`` imports, anywhere in its body; ``from m import name`` counts as
    ``m.name`` (a name may be a submodule)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


MODULES = _modules()


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.room)
def test_room_imports_only_what_its_rule_allows(rule: Rule) -> None:
    covered = [m for m in MODULES if _under(m, rule.room)]
    assert covered, f"no module under {rule.room}"
    broken = []
    for module in covered:
        for name in _imports(module, MODULES[module]):
            if _under(name, "grpc") and not rule.grpc:
                broken.append(f"{module} imports {name}")
            elif _under(name, "gnnstore") and not _under(name, rule.room) and not any(
                _under(name, allowed) for allowed in rule.may_import
            ):
                broken.append(f"{module} imports {name}")
    assert not broken, "\n".join(sorted(broken))


def test_every_backend_module_is_in_a_room() -> None:
    rooms = [rule.room for rule in RULES]
    loose = [m for m in MODULES if _under(m, "gnnstore.backend") and m != "gnnstore.backend"
             and not any(_under(m, room) for room in rooms)]
    assert not loose, f"backend modules outside every room: {loose}"


def test_the_rule_checker_sees_a_function_local_import(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("def f():\n    from ..proto import codec\n    import grpc\n")
    assert _imports("gnnstore.backend.engine.m", path) == {"gnnstore.backend.proto.codec", "grpc"}
    assert _imports("gnnstore.stores.m", path) == {"gnnstore.proto.codec", "grpc"}


@pytest.mark.parametrize(
    "module", ["gnnstore.stores", "gnnstore.ingest.graph_ingest", "gnnstore.backend.engine.sampler"]
)
def test_module_loads_neither_grpc_nor_the_wire(module: str) -> None:
    code = (
        f"import sys, {module}\n"
        "print('\\n'.join(m for m in sys.modules if m.split('.')[0] == 'grpc' or m.startswith('gnnstore.proto')))"
    )
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [], f"{module} loads {out.stdout.split()}"


SERVING_ROOMS = ("gnnstore.common", "gnnstore.stores", "gnnstore.proto", "gnnstore.backend", *ROOT_MODULES)
TRAINER_SIDE = {  # torch and PyG over the server's numpy, for PyG's loaders and the trainer: by design
    "gnnstore.backend.engine.sampler", "gnnstore.common.tensor_rows", "gnnstore.proto.tensor_codec",
    "gnnstore.stores.pyg_graph_store", "gnnstore.stores.rocksdb_feature_store",
}
LAZY_EXPORTS = {"gnnstore.stores"}  # names its PyG stores for type checkers, and loads them on first use


def test_no_server_module_imports_torch_pyg_or_the_trainers_side() -> None:
    serving = [m for m in MODULES if any(_under(m, room) for room in SERVING_ROOMS) and m not in TRAINER_SIDE]
    broken = sorted(
        f"{m} imports {n}" for m in serving if m not in LAZY_EXPORTS for n in _imports(m, MODULES[m])
        if any(_under(n, side) for side in ("torch", "torch_geometric", *TRAINER_SIDE))
    )
    assert not broken, "the server is to run without torch and PyG:\n" + "\n".join(broken)
