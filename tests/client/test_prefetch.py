"""Prefetcher: order, bounded look-ahead, errors at the right place, no leaked threads, stall counters."""
from __future__ import annotations

import gc
import multiprocessing
import threading
import time
from collections import namedtuple
from collections.abc import Callable, Iterator

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader as PyGDataLoader

from gnnstore.client.device_copy import move_to
from gnnstore.client.prefetch import THREAD_NAME, EpochState, Prefetcher
from gnnstore.common.errors import InvalidRequestError


def prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(THREAD_NAME)]


def eventually(condition: Callable[[], bool], seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


@pytest.fixture(autouse=True)
def no_thread_survives() -> Iterator[None]:
    yield
    gc.collect()
    assert eventually(lambda: not prefetch_threads()), "a prefetch thread outlived its test"


class Counting:
    """An iterable of ``n`` ints that records how many it has produced."""

    def __init__(self, n: int | None, delay: float = 0.0, fail_at: int | None = None) -> None:
        self.n, self.delay, self.fail_at, self.produced = n, delay, fail_at, 0

    def __iter__(self) -> Iterator[int]:
        i = 0
        while self.n is None or i < self.n:
            if i == self.fail_at:
                raise ValueError(f"batch {i} is broken")
            time.sleep(self.delay)
            self.produced += 1
            yield i
            i += 1


@pytest.mark.parametrize("depth", [1, 2, 5])
def test_batches_arrive_in_order_every_epoch(depth: int) -> None:
    pf = Prefetcher(Counting(50), depth=depth)
    assert list(pf) == list(range(50))
    assert list(pf) == list(range(50))


@pytest.mark.parametrize("depth", [1, 2, 4])
def test_depth_batches_are_made_ahead_and_no_more(depth: int) -> None:
    src = Counting(None)
    with Prefetcher(src, depth=depth) as pf:
        it = iter(pf)
        assert next(it) == 0
        # one taken, ``depth`` queued, one made and waiting to be queued
        assert eventually(lambda: src.produced == depth + 2)
        time.sleep(0.2)
        assert src.produced == depth + 2
        assert [next(it) for _ in range(3)] == [1, 2, 3]


def test_a_producer_error_reaches_the_loop_at_its_position() -> None:
    seen = []
    with pytest.raises(ValueError, match="batch 3 is broken"):
        for batch in Prefetcher(Counting(10, fail_at=3), depth=2):
            seen.append(batch)
    assert seen == [0, 1, 2]


class FailingAt:
    """An iterator like a PyG loader's: ``next`` fails at the positions in ``broken``, and the
    call after a failure gives the next item."""

    def __init__(self, n: int, broken: set[int]) -> None:
        self.n, self.broken, self.position = n, broken, 0

    def __iter__(self) -> FailingAt:
        return self

    def __next__(self) -> int:
        i, self.position = self.position, self.position + 1
        if i >= self.n:
            raise StopIteration
        if i in self.broken:
            raise ValueError(f"batch {i} is broken")
        return i


@pytest.mark.parametrize("depth", [1, 3])
def test_a_trainer_that_goes_on_after_an_error_gets_every_other_batch(depth: int) -> None:
    got: list[int | str] = []
    epoch = iter(Prefetcher(FailingAt(12, {0, 4, 5, 11}), depth=depth))
    while True:
        try:
            got.append(next(epoch))
        except ValueError as error:
            got.append(str(error))
        except StopIteration:
            break
    broken = {0, 4, 5, 11}
    assert got == [f"batch {i} is broken" if i in broken else i for i in range(12)]


def test_break_leaves_no_thread_behind() -> None:
    pf = Prefetcher(Counting(None), depth=2)
    for batch in pf:
        if batch == 3:
            break
    assert eventually(lambda: not prefetch_threads())


def test_close_and_context_manager_end_the_thread_at_once() -> None:
    with Prefetcher(Counting(None), depth=3) as pf:
        it = iter(pf)
        next(it)
        assert len(prefetch_threads()) == 1
    assert not prefetch_threads()
    with pytest.raises(StopIteration):
        next(it)


def test_a_dropped_prefetcher_is_collected_with_its_thread() -> None:
    it = iter(Prefetcher(Counting(None), depth=2))
    next(it)
    del it
    gc.collect()
    assert eventually(lambda: not prefetch_threads())


def test_a_new_epoch_ends_the_previous_one() -> None:
    pf = Prefetcher(Counting(None), depth=2)
    first = iter(pf)
    next(first)
    second = iter(pf)
    assert next(second) == 0 and len(prefetch_threads()) == 1
    pf.close()


def test_slow_producer_means_high_stall_fast_producer_low() -> None:
    slow = Prefetcher(Counting(8, delay=0.05), depth=2)
    for _ in slow:
        pass
    assert slow.stall_fraction > 0.5 and slow.stall_seconds > 0.2
    fast = Prefetcher(Counting(8), depth=2)
    for _ in fast:
        time.sleep(0.05)
    assert fast.stall_fraction < 0.5
    assert 0.0 <= fast.timing.stall_seconds <= fast.timing.wall_seconds and fast.timing.batches == 8


def test_wraps_a_torch_dataloader_with_worker_processes() -> None:
    data = TensorDataset(torch.arange(64).view(-1, 1).float())
    loader = DataLoader(data, batch_size=8, num_workers=1)
    got = [b[0] for b in Prefetcher(loader, depth=2)]
    assert torch.equal(torch.cat(got), data.tensors[0])
    pf = Prefetcher(loader, depth=2)
    for _ in pf:
        break
    assert eventually(lambda: not prefetch_threads() and not multiprocessing.active_children())


def test_wraps_a_pyg_loader_and_moves_batches() -> None:
    graphs = [Data(x=torch.full((3, 2), float(i)), edge_index=torch.tensor([[0, 1], [1, 2]])) for i in range(6)]
    batches = list(Prefetcher(PyGDataLoader(graphs, batch_size=2), depth=2, device="cpu"))
    assert [b.num_graphs for b in batches] == [2, 2, 2]
    assert torch.equal(batches[2].x[:, 0], torch.tensor([4.0] * 3 + [5.0] * 3))


def test_move_to_walks_containers() -> None:
    Pair = namedtuple("Pair", "a b")
    moved = move_to({"p": Pair(torch.ones(2), [torch.zeros(1), "keep"])}, torch.device("cpu"), False)
    assert isinstance(moved["p"], Pair) and moved["p"].b[1] == "keep"
    assert torch.equal(moved["p"].a, torch.ones(2))


def test_bad_depth_is_refused() -> None:
    with pytest.raises(InvalidRequestError, match="depth must be an int >= 1; got 0"):
        Prefetcher([1], depth=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device; the CPU path runs above")
def test_cuda_batches_arrive_on_the_device_pinned_and_exact() -> None:
    batches = [{"x": torch.randn(1000, 16), "n_id": torch.arange(1000)} for _ in range(6)]
    pf = Prefetcher(batches, depth=2, device="cuda")
    assert pf.pin_memory
    for got, want in zip(pf, batches, strict=True):
        assert got["x"].is_cuda and torch.equal(got["x"].cpu(), want["x"])
        assert torch.equal((got["x"] * 2).cpu(), want["x"] * 2)  # a kernel queued after the copy


def test_only_a_loader_over_the_remote_sampler_checkpoints_its_epochs() -> None:
    pf = Prefetcher(Counting(5), depth=2)
    assert not pf.resumable
    with pytest.raises(InvalidRequestError, match="RemoteNeighborSampler"):
        pf.state_dict()
    with pytest.raises(InvalidRequestError, match="num_workers=0"):
        pf.load_state_dict({"epoch_seed": 1, "position": 2, "claimed": 0, "generator_state": None})


@pytest.mark.parametrize("state", [
    {"epoch_seed": 1, "position": 2},
    {"epoch_seed": 1, "position": -2, "claimed": 0, "generator_state": None},
    {"epoch_seed": 1.5, "position": 2, "claimed": 0, "generator_state": None},
    {"epoch_seed": 1, "position": True, "claimed": 0, "generator_state": None},
    {"epoch_seed": 1, "position": 2, "claimed": 0, "generator_state": "abc"},
    {"epoch_seed": 1, "position": 2, "claimed": 0, "generator_state": None, "graph_version": -1},
    {"epoch_seed": 1, "position": 2, "claimed": 0, "generator_state": None, "graph_version": "3"},
])
def test_a_state_no_state_dict_makes_is_refused(state: dict) -> None:
    with pytest.raises(InvalidRequestError, match="epoch state"):
        EpochState.from_dict(state)


def test_a_state_saved_before_graph_versions_still_loads() -> None:
    old = {"epoch_seed": 1, "position": 2, "claimed": 0, "generator_state": None}
    assert EpochState.from_dict(old).graph_version is None  # its resumed epoch reads the newest
    assert EpochState.from_dict({**old, "graph_version": 4}).graph_version == 4
