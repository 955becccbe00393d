"""Node keys travel as int tensors, string lists or, mixed, key by key; the int 5 is not the str "5"."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from gnnstore.common.errors import InvalidRequestError
from gnnstore.proto import idmap_pb2
from gnnstore.proto.key_codec import MAX_KEY_BYTES, keys_from_proto, keys_to_proto


def test_int_keys_travel_as_one_tensor() -> None:
    message = keys_to_proto([5, -3, 2**40])
    assert message.WhichOneof("kind") == "ints"
    assert keys_from_proto(message).tolist() == [5, -3, 2**40]


def test_str_and_mixed_keys_keep_their_types() -> None:
    assert keys_from_proto(keys_to_proto(["a", "é"])) == ["a", "é"]
    mixed = keys_from_proto(keys_to_proto([5, "5"]))
    assert mixed == [5, "5"] and isinstance(mixed[0], int) and isinstance(mixed[1], str)


def test_tensor_keys_must_be_integers() -> None:
    assert keys_from_proto(keys_to_proto(torch.tensor([1, 2], dtype=torch.int32))).dtype == np.int64
    with pytest.raises(InvalidRequestError, match="1-D integers"):
        keys_to_proto(torch.tensor([1.5]))


@pytest.mark.parametrize("bad", [[1.5], [True], [None], [b"x"]])
def test_other_key_types_are_refused(bad: list) -> None:
    with pytest.raises(InvalidRequestError, match="an int or a str"):
        keys_to_proto(bad)


def test_a_str_key_over_the_bound_is_refused_by_either_side() -> None:
    longest = "é" * (MAX_KEY_BYTES // 2)  # two bytes a character: exactly the bound
    assert keys_from_proto(keys_to_proto([longest])) == [longest]
    over = longest + "x"
    with pytest.raises(InvalidRequestError, match=r"is 1,025 bytes; keys are at most 1,024 bytes"):
        keys_to_proto([over])
    for message in (idmap_pb2.Keys(strs=idmap_pb2.StringKeys(values=["ok", "x" * (1 << 20)])),
                    idmap_pb2.Keys(mixed=idmap_pb2.MixedKeys(values=[idmap_pb2.Key(str_key="y" * 2000)]))):
        with pytest.raises(InvalidRequestError, match=r"keys are at most 1,024 bytes"):
            keys_from_proto(message)  # what a server decodes from a stranger's request
