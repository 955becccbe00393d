"""Splitting seeds across DDP ranks: exactly ``world_size`` parts whose sizes differ by at most one."""
from __future__ import annotations

import torch
from torch import Tensor

from gnnstore.common.errors import InvalidRequestError


def split_for_rank(seeds: Tensor, rank: int, world_size: int, *, dim: int = -1) -> Tensor:
    """The part of ``seeds`` that ``rank`` trains on.

    Uses ``torch.tensor_split``, never ``seeds.split(len // world_size)``: the latter makes
    ``world_size + 1`` chunks whenever the length is not a multiple, and the last chunk's seeds
    are never trained. Parts are contiguous, cover every seed once and differ in size by at
    most one.

    Args:
        seeds: node ids ``[N]`` (global), or links ``[2, E]`` (split along ``dim``).
        rank: this process's rank, ``0 .. world_size-1``.
        world_size: number of ranks.
        dim: the dimension to split (default: the last one).

    Raises:
        InvalidRequestError: ``world_size < 1``, ``rank`` out of range, or a 0-d tensor.
    """
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise InvalidRequestError(f"world_size must be an int >= 1, got {world_size!r}")
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world_size:
        raise InvalidRequestError(f"rank must be an int in 0..{world_size - 1}, got {rank!r}")
    seeds = torch.as_tensor(seeds)
    if seeds.dim() == 0:
        raise InvalidRequestError("seeds must have at least one dimension, got a scalar")
    return torch.tensor_split(seeds, world_size, dim=dim)[rank]
