"""AttrSchema: the one record of an attr's node type, name, dtype and shape, and its wire form."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from gnnstore.common.attr_schema import AttrSchema
from gnnstore.common.errors import InvalidRequestError
from gnnstore.proto.codec import attr_schema_from_proto, attr_schema_to_proto


@pytest.mark.parametrize("group", [None, "paper"])
def test_round_trips_through_the_wire(group: str | None) -> None:
    schema = AttrSchema(group, "x", torch.bfloat16, (7, 3, 2))
    assert attr_schema_from_proto(attr_schema_to_proto(schema)) == schema
    assert schema.row_bytes == 3 * 2 * 2


@pytest.mark.parametrize("dtype", ["int64", torch.int64, np.dtype(np.int64)])
def test_a_dtype_is_kept_by_name_and_any_int_sequence_is_normalised(dtype: object) -> None:
    schema = AttrSchema(None, "y", dtype, [torch.tensor(9)])
    assert schema.dtype == "int64" and schema.shape == (9,) and schema.row_bytes == 8
    assert getattr(torch, schema.dtype) is torch.int64


@pytest.mark.parametrize(("dtype", "shape", "match"), [
    ("float128", (4,), "unknown tensor dtype 'float128'"),
    (torch.float32, (), r"needs a shape \[num_nodes, \*row\]"),
    (torch.quint8, (4,), "unknown tensor dtype 'quint8'"),
])
def test_junk_is_refused_by_name(dtype: object, shape: tuple[int, ...], match: str) -> None:
    with pytest.raises(InvalidRequestError, match=match):
        AttrSchema("paper", "x", dtype, shape)
