"""Planetoid datasets (Cora, CiteSeer, PubMed) from their raw files, through PyG's own reader."""
from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path

from torch_geometric.data import Data
from torch_geometric.datasets import Planetoid

from gnnstore.common.errors import MalformedFileError

logger = logging.getLogger(__name__)

RAW_SUFFIXES = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")


def load_planetoid(raw_dir: Path, name: str = "Cora") -> Data:
    """Read the raw Planetoid files in ``raw_dir`` (``ind.<name>.x`` ...) as PyG's ``Planetoid``.

    The files are copied to a temporary root first, so ``raw_dir`` may be read-only and no
    processed files are left behind; nothing is downloaded.

    Raises:
        MalformedFileError: a raw file is missing or PyG cannot read the files.
    """
    raw_dir = Path(raw_dir)
    files = [raw_dir / f"ind.{name.lower()}.{suffix}" for suffix in RAW_SUFFIXES]
    missing = [str(path) for path in files if not path.is_file()]
    if missing:
        raise MalformedFileError(f"Planetoid {name!r}: missing raw file(s) {missing}")
    with tempfile.TemporaryDirectory(prefix="gnnstore-planetoid-") as root:
        raw_copy = Path(root) / name / "raw"
        raw_copy.mkdir(parents=True)
        for path in files:
            shutil.copy(path, raw_copy / path.name)
        try:
            data = Planetoid(root, name)[0]
        except (ValueError, OSError, EOFError, IndexError) as exc:
            raise MalformedFileError(
                f"Planetoid {name!r} in {raw_dir}: cannot be read ({exc})"
            ) from exc
    logger.info("Planetoid %s: %d nodes, %d edges from %s",
                name, data.num_nodes, data.num_edges, raw_dir)
    return data
