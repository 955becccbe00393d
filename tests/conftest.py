"""Fixtures every room's tests share."""
from __future__ import annotations

from pathlib import Path

import pytest

CORA_RAW = Path(__file__).resolve().parent / "data" / "planetoid" / "Cora" / "raw"


@pytest.fixture(scope="session")
def cora_raw() -> Path:
    """The raw Planetoid files of Cora in ``tests/data`` (copy them before PyG processes them)."""
    if not CORA_RAW.is_dir():
        pytest.fail(f"Cora is missing: expected {CORA_RAW}")
    return CORA_RAW
