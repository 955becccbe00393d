"""split_for_rank: exactly world_size contiguous parts, sizes within one, every seed once."""
from __future__ import annotations

import pytest
import torch

from gnnstore.client import split_for_rank
from gnnstore.common.errors import InvalidRequestError


@pytest.mark.parametrize("n, world_size", [(10, 4), (10, 3), (1001, 8), (3, 5), (0, 2), (8, 8)])
def test_parts_cover_every_seed_once_and_differ_by_at_most_one(n: int, world_size: int) -> None:
    seeds = torch.randperm(n) if n else torch.empty(0, dtype=torch.long)
    parts = [split_for_rank(seeds, rank, world_size) for rank in range(world_size)]
    assert len(parts) == world_size
    assert torch.equal(torch.cat(parts), seeds)
    sizes = [p.numel() for p in parts]
    assert max(sizes) - min(sizes) <= 1


def test_known_sizes_match_tensor_split_not_floor_split() -> None:
    seeds = torch.arange(10)
    assert [split_for_rank(seeds, r, 4).numel() for r in range(4)] == [3, 3, 2, 2]
    assert len(seeds.split(10 // 4)) == 5  # the bug this helper avoids: a fifth, untrained chunk


def test_links_split_along_the_last_dimension() -> None:
    links = torch.arange(20).view(2, 10)
    part = split_for_rank(links, 1, 3)
    assert part.shape == (2, 3)
    assert torch.equal(part, links[:, 4:7])


@pytest.mark.parametrize(
    "rank, world_size, fragment",
    [(0, 0, "world_size must be an int >= 1"), (3, 3, "rank must be an int in 0..2"), (-1, 2, "rank")],
)
def test_bad_rank_or_world_size_is_refused(rank: int, world_size: int, fragment: str) -> None:
    with pytest.raises(InvalidRequestError, match=fragment):
        split_for_rank(torch.arange(4), rank, world_size)
