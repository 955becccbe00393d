"""Regenerate the committed Python stubs from the ``.proto`` files: ``python -m gnnstore.proto.generate``.

The ``.proto`` files sit flat in this folder but are compiled under the virtual path
``gnnstore/v1/`` so their descriptor names cannot clash with another library's
``common.proto``. protoc writes absolute imports (``from gnnstore.v1 import common_pb2``);
they are rewritten to package-relative ones (``from . import common_pb2``). Needs
``grpcio-tools`` (the ``test`` extra).
"""
from __future__ import annotations

import argparse
import logging
import re
import tempfile
from pathlib import Path

logger = logging.getLogger(__name__)

PROTO_DIR = Path(__file__).resolve().parent
VIRTUAL_DIR = "gnnstore/v1"
PROTO_FILES = ("common.proto", "feature.proto", "graph.proto", "idmap.proto", "admin.proto")
_ABSOLUTE_IMPORT = re.compile(r"^from gnnstore\.v1 import ", re.MULTILINE)
_SERVICE = re.compile(r"^service ", re.MULTILINE)


def generated_names() -> list[str]:
    """File names the generator writes, in a fixed order."""
    names = []
    for proto in PROTO_FILES:
        stem = proto.removesuffix(".proto")
        names += [f"{stem}_pb2.py", f"{stem}_pb2.pyi"]
        if _SERVICE.search((PROTO_DIR / proto).read_text()):
            names.append(f"{stem}_pb2_grpc.py")
    return names


def generate(out_dir: Path = PROTO_DIR) -> list[Path]:
    """Compile every ``.proto`` into ``out_dir`` and return the files written.

    Raises:
        RuntimeError: protoc rejected a ``.proto`` file (its message names file and line).
    """
    from grpc_tools import protoc  # a build-time tool, not a runtime dependency

    include = Path(protoc.__file__).resolve().parent / "_proto"
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        args = [
            "grpc_tools.protoc",
            f"-I{VIRTUAL_DIR}={PROTO_DIR}",
            f"-I{include}",
            f"--python_out={tmp}",
            f"--pyi_out={tmp}",
            f"--grpc_python_out={tmp}",
            *(f"{VIRTUAL_DIR}/{name}" for name in PROTO_FILES),
        ]
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc failed on {PROTO_DIR}/*.proto (its message is above)")
        written = []
        for name in generated_names():
            text = (Path(tmp) / VIRTUAL_DIR / name).read_text()
            target = out_dir / name
            target.write_text(_ABSOLUTE_IMPORT.sub("from . import ", text))
            written.append(target)
    logger.info("wrote %d stub files to %s", len(written), out_dir)
    return written


def main() -> None:
    """Command line: regenerate into this folder, or into ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=PROTO_DIR, help="Where to write the stubs.")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    generate(args.out)


if __name__ == "__main__":
    main()
