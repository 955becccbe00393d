"""The attach spec: what `gnnstore attach neo4j --spec` reads, and how a wrong one is named."""
from __future__ import annotations

from pathlib import Path

import pytest

from gnnstore.backend.server.server_process import free_port
from gnnstore.common.errors import MalformedFileError, ServerUnavailableError
from gnnstore.ingest.neo4j_attach import LabelSpec, read_neo4j_graph, read_spec

GOOD = """
[labels.User]
key = "uid"
features = { x = "embedding", y = "segment" }

[labels."Odd `Label`"]
features = { x = "v" }

[[relationships]]
from = "User"
type = "FOLLOWS"
to = "User"
features = { edge_attr = "since" }

[[relationships]]
from = "Odd `Label`"
type = "TAGS"
to = "User"
"""


def test_a_spec_reads_as_labels_and_edge_types(tmp_path: Path) -> None:
    path = tmp_path / "spec.toml"
    path.write_text(GOOD)
    spec = read_spec(path)
    assert spec.labels["User"] == LabelSpec("User", "uid", {"x": "embedding", "y": "segment"})
    assert spec.labels["Odd `Label`"].key is None  # Neo4j's element id
    assert spec.relationships == [("User", "FOLLOWS", "User"), ("Odd `Label`", "TAGS", "User")]
    assert spec.relationship_features == {("User", "FOLLOWS", "User"): {"edge_attr": "since"}}


@pytest.mark.parametrize("text, message", [
    ("[labels.User\n", r"spec.toml: .*line 1"),
    ("[nodes.User]\nkey = 'a'\n", r"unknown entries \['nodes'\]"),
    ("", r"no \[labels.NAME\] entry"),
    ("[labels.User]\nkey = 'a'\n", r"\[labels.User\]: names no features"),
    ("[labels.User]\nkey = ''\nfeatures = { x = 'v' }\n", r"non-empty property names"),
    ("[labels.User]\nfeatures = { x = 'v' }\ncolour = 1\n", r"unknown entries \['colour'\]"),
    ("[labels.User]\nfeatures = { x = 'v' }\n[[relationships]]\nfrom = 'User'\ntype = 'R'\n",
     r"relationships\[0\]: needs exactly from, type and to"),
    ("[labels.User]\nfeatures = { x = 'v' }\n[[relationships]]\nfrom = 'User'\ntype = 'R'\nto = 'User'\n"
     "features = { w = '' }\n", r"relationships\[0\]: features must map names to non-empty property names"),
    ("[labels.User]\nfeatures = { x = 'v' }\n[[relationships]]\nfrom = 'User'\ntype = 'R'\nto = 'Item'\n",
     r"to = 'Item' is not among the labels \['User'\]"),
    ("[labels.User]\nfeatures = { x = 'v' }\n" + "[[relationships]]\nfrom = 'User'\ntype = 'R'\nto = 'User'\n" * 2,
     r"relationships\[1\]: \('User', 'R', 'User'\) is given twice"),
])
def test_a_wrong_spec_is_named_by_file_and_entry(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "spec.toml"
    path.write_text(text)
    with pytest.raises(MalformedFileError, match=message):
        read_spec(path)


def test_a_neo4j_that_does_not_answer_is_named(tmp_path: Path) -> None:
    path = tmp_path / "spec.toml"
    path.write_text(GOOD)
    port = free_port()  # nothing listens there
    named = rf"Neo4j at bolt://127.0.0.1:{port} \(user 'reader'\) cannot be read"
    with pytest.raises(ServerUnavailableError, match=named):
        read_neo4j_graph(f"bolt://127.0.0.1:{port}", ("reader", "secret-password"), read_spec(path))
