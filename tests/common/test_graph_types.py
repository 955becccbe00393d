"""Node and edge type keys: what every room accepts, and one error wording for the rest."""
from __future__ import annotations

import pytest

from gnnstore.common.errors import InvalidRequestError
from gnnstore.common.graph_types import checked_edge_type, checked_node_type


def test_edge_types_are_three_non_empty_names_and_lists_become_tuples() -> None:
    assert checked_edge_type(("a", "to", "b")) == ("a", "to", "b")
    assert checked_edge_type(["a", "to", "b"]) == ("a", "to", "b")
    for bad in (None, "a__to__b", ("a", "b"), ("a", "", "b"), ("a", 1, "b")):
        with pytest.raises(InvalidRequestError, match=r"a num_neighbors key is a \(src, rel, dst\) tuple"):
            checked_edge_type(bad, what="a num_neighbors key")


def test_node_types_are_none_or_a_non_empty_name() -> None:
    assert checked_node_type(None) is None and checked_node_type("paper") == "paper"
    for bad in ("", 3, ("paper",)):
        with pytest.raises(InvalidRequestError, match="non-empty str or None"):
            checked_node_type(bad)
