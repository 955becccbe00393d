"""Fixtures every room's tests share."""
from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
CORA_RAW = SHARED / "data" / "planetoid" / "Cora" / "raw"


@pytest.fixture(scope="session")
def cora_raw() -> Path:
    """The raw Planetoid files of Cora in ../shared (read-only: copy before PyG processes them)."""
    if not CORA_RAW.is_dir():
        pytest.fail(f"Cora is missing: expected {CORA_RAW} (../shared/data beside the clone)")
    return CORA_RAW
