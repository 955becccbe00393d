"""The committed stubs are exactly what ``python -m gnnstore.proto.generate`` writes."""
from __future__ import annotations

from pathlib import Path

from gnnstore.proto import generate


def test_committed_stubs_match_the_proto_files(tmp_path: Path) -> None:
    written = generate.generate(tmp_path)
    assert [p.name for p in written] == generate.generated_names()
    stale = [
        p.name
        for p in written
        if p.read_text() != (generate.PROTO_DIR / p.name).read_text()
    ]
    assert not stale, f"regenerate with `python -m gnnstore.proto.generate`: {stale} drifted"


def test_generated_imports_are_package_relative() -> None:
    for name in generate.generated_names():
        text = (generate.PROTO_DIR / name).read_text()
        assert "from gnnstore.v1" not in text, name
        assert "import common_pb2" not in text or "from . import common_pb2" in text, name


def test_every_service_has_a_stub_module() -> None:
    names = generate.generated_names()
    for service in ("feature", "graph", "idmap", "admin"):
        assert f"{service}_pb2_grpc.py" in names
    assert "common_pb2_grpc.py" not in names
