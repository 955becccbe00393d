"""The stores and the sampling engine stand on ``gnnstore.common``, not on the wire."""
from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("module", ["gnnstore.stores", "gnnstore.ingest.graph_ingest", "gnnstore.backend.sampling_engine"])
def test_module_loads_neither_grpc_nor_the_wire(module: str) -> None:
    code = (
        f"import sys, {module}\n"
        "print('\\n'.join(m for m in sys.modules if m.split('.')[0] == 'grpc' or m.startswith('gnnstore.proto')))"
    )
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [], f"{module} loads {out.stdout.split()}"
