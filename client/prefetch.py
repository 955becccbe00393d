"""Pipeline stage: keep batches in flight on background threads and measure the trainer's stall.

``Prefetcher`` wraps any iterable of batches (a PyG ``NodeLoader``, a torch ``DataLoader``, a
chain of gnnstore stages). Each ``iter()`` is one epoch. Over a PyG ``NodeLoader`` or
``LinkLoader`` (``num_workers=0``) whose sampler claims request seeds in order (gnnstore's
``RemoteNeighborSampler``), ``depth`` batches are in flight at once: their sampling RPCs run
on a pool of threads while one more thread assembles their features in order (each batch's
seed is claimed in loader order, so thread timing never changes a batch). Any other iterable
is pulled by one thread into a queue of ``depth``, so ``depth`` batches wait ready and one
more is being made. Order is kept either way; an exception raised while producing a batch
reaches the trainer at that batch's position, and a trainer that catches it and goes on gets
the next batch, as from a plain loader (the epoch never ends early without saying so). On
CUDA, batches are made on a stream of the epoch's own and handed to the trainer's stream with an
event (``device_copy``): their copies and a GPU cache's gathers overlap the trainer's kernels.

The time the trainer waits in ``next()`` is the stall: ``stall_seconds`` and ``stall_fraction``
(of the epoch's wall time) describe the current or last epoch. A loop left early (``break``)
ends its thread when its iterator is dropped; ``close()`` or ``with`` ends it at once.

Over a PyG loader with ``depth`` batches in flight, an epoch is resumable: its index order and
its request seeds come from a random stream of its own, seeded by one draw from torch's
generator when the epoch begins (so they do not depend on what the trainer draws between
batches). ``state_dict()`` holds that seed and the batches the trainer has taken; a new
process that ``load_state_dict``s it and iterates finishes the same epoch, with the batches an
undisturbed run would have made and every remaining seed once.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import queue
import threading
import time
import weakref
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import torch
from torch.utils.data import DataLoader
from torch_geometric.loader import LinkLoader, NodeLoader

from gnnstore.client.device_copy import DeviceCopy
from gnnstore.client.remote_graph_store import RemoteGraphStore
from gnnstore.client.remote_sampler import RemoteNeighborSampler
from gnnstore.common.errors import InvalidRequestError

logger = logging.getLogger(__name__)

T = TypeVar("T")
THREAD_NAME = "gnnstore-prefetch"
_POLL_SECONDS = 0.05


class _End:
    """Queue marker: the wrapped iterable is exhausted."""


class _Failure:
    """Queue marker: producing the next batch raised ``error``."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def _produce(source: Iterator[Any], out: queue.Queue, stop: threading.Event, copy: DeviceCopy) -> None:
    """Thread body: fill ``out`` from ``source`` until exhausted, failed or stopped."""

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                out.put(item, timeout=_POLL_SECONDS)
                return True
            except queue.Full:
                continue
        return False

    try:
        while True:
            try:
                item = copy.make(lambda: next(source))
            except StopIteration:
                put(_End())
                return
            except Exception as error:  # noqa: BLE001 - raised at its batch; the trainer may go on
                item = _Failure(error)
            except BaseException as error:  # an interrupt ends the epoch after it is raised
                if put(_Failure(error)):
                    put(_End())
                return
            if not put(item):
                return
    finally:
        close = getattr(source, "close", None)
        if callable(close):
            close()


@dataclass
class EpochTiming:
    """Where the trainer's time went in one epoch: waiting for batches vs. all of it."""

    stall_seconds: float = 0.0
    wall_seconds: float = 0.0
    batches: int = 0

    @property
    def stall_fraction(self) -> float:
        """Stall over wall time (0.0 before any batch)."""
        return self.stall_seconds / self.wall_seconds if self.wall_seconds > 0 else 0.0


class _Epoch(Generic[T]):
    """One epoch's iterator: owns the thread; closing or dropping it ends the thread."""

    def __init__(self, owner: Prefetcher[T], timing: EpochTiming) -> None:
        self._queue: queue.Queue = queue.Queue(maxsize=owner.depth)
        self._stop = threading.Event()
        self._copy = DeviceCopy(owner.device, owner.pin_memory)
        self._thread = threading.Thread(  # its arguments must not reference this object
            target=_produce,
            args=(iter(owner.iterable), self._queue, self._stop, self._copy),
            name=THREAD_NAME,
            daemon=True,
        )
        self._timing, self._start, self._done = timing, time.perf_counter(), False
        self._thread.start()

    def __iter__(self) -> _Epoch[T]:
        return self

    def __next__(self) -> T:
        if self._done:
            raise StopIteration
        waited = time.perf_counter()
        item = self._queue.get()
        now = time.perf_counter()
        self._timing.stall_seconds += now - waited
        self._timing.wall_seconds = now - self._start
        if isinstance(item, _End):
            self.close()
            _log_epoch(self._timing)
            raise StopIteration
        if isinstance(item, _Failure):
            raise item.error
        self._timing.batches += 1
        return self._copy.hand_over(*item)

    def close(self) -> None:
        """Stop the producer and wait for its thread to end."""
        self._done = True
        self._stop.set()
        while True:  # free the producer if it is blocked on a full queue
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        self._thread.join()

    def __del__(self) -> None:
        self._stop.set()  # the thread sees it within one poll and exits


@dataclass
class EpochState:
    """Where an epoch over a PyG loader stands: enough to make the rest of it again.

    Attributes:
        epoch_seed: seeds the epoch's own random stream (index order, request seeds).
        position: batches the trainer has taken, failed ones included.
        claimed: the sampler's ``claimed`` count when the epoch began (its ``seed=`` mode).
        generator_state: the loader's ``generator=`` state when the epoch began, if it has one.
        graph_version: the graph version the epoch's batches read (``None`` in a state saved
            before graph versions existed: the resumed epoch reads the newest).
    """

    epoch_seed: int
    position: int = 0
    claimed: int = 0
    generator_state: torch.Tensor | None = None
    graph_version: int | None = None

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> EpochState:
        """The state ``state_dict`` returned.

        Raises:
            InvalidRequestError: keys or values that no ``state_dict`` makes.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        if not names - {"graph_version"} <= set(state) <= names:
            raise InvalidRequestError(f"an epoch state has the keys {sorted(names)}, got {sorted(state)}")
        for name in ("epoch_seed", "position", "claimed", "graph_version"):
            value = state.get(name)
            if name == "graph_version" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidRequestError(f"an epoch state's {name} is an int >= 0, got {value!r}")
        if state["generator_state"] is not None and not isinstance(state["generator_state"], torch.Tensor):
            raise InvalidRequestError("an epoch state's generator_state is a tensor or None")
        return cls(**state)


class _EpochRandomness:
    """The epoch's random stream, swapped in as torch's default generator while it draws."""

    def __init__(self, seed: int) -> None:
        self._state = torch.Generator().manual_seed(seed).get_state()

    @contextlib.contextmanager
    def drawing(self) -> Iterator[None]:
        outside = torch.get_rng_state()
        torch.set_rng_state(self._state)
        try:
            yield
        finally:
            self._state = torch.get_rng_state()
            torch.set_rng_state(outside)


class _ConcurrentEpoch(Generic[T]):
    """One epoch over a PyG loader: ``depth`` batches in flight, handed out in order.

    Each batch is made in two stages: its sample (the RPC, up to ``depth`` at once on a thread
    pool) and its assembly (PyG's ``filter_fn``: the feature rows, from the cache and the
    reply), done one batch at a time in loader order on a thread of its own, so the next
    batch's sample never waits behind an assembly (measured here: 88 -> 98 batches/s at depth
    3 against one thread per whole batch). At depth 2, with server and trainer about equally
    busy on two shared cores, a fifth of the CPU time still goes idle (loader benchmark:
    14.7 ms of CPU a batch at 9.2 ms a batch); deeper pipelines fill it.
    Batches are submitted from the trainer's thread in loader order, each with the request
    seed its sampler claims now from the epoch's stream, so concurrent batches sample exactly
    what a plain loop drawing from that stream would. ``resume`` replays the index batches and
    seeds of the ``position`` batches already taken, sampling none of them.
    """

    def __init__(self, owner: Prefetcher[T], timing: EpochTiming, resume: EpochState | None) -> None:
        self._loader = owner.iterable
        self._sampler = _seed_claiming_sampler(self._loader)
        self._copy = DeviceCopy(owner.device, owner.pin_memory)
        generator = self._loader.generator
        if resume is None:
            self.state = EpochState(
                int(torch.randint(1 << 62, ())), 0, self._sampler.claimed,
                None if generator is None else generator.get_state(), _switch_version(self._loader, self._sampler),
            )
        else:
            self.state = dataclasses.replace(resume)
            self.state.graph_version = _switch_version(self._loader, self._sampler, resume.graph_version)
            self._sampler.claimed = resume.claimed
            if generator is not None and resume.generator_state is not None:
                generator.set_state(resume.generator_state)
        self._random = _EpochRandomness(self.state.epoch_seed)
        with self._random.drawing():
            self._indices = iter(_index_batches(self._loader))
            for _ in range(self.state.position):
                if next(self._indices, None) is not None:
                    self._sampler.claim_seed()
        self._samplers = ThreadPoolExecutor(owner.depth, thread_name_prefix=THREAD_NAME)
        self._assembler = ThreadPoolExecutor(1, thread_name_prefix=f"{THREAD_NAME}-assemble")
        self._pending: deque[Future] = deque()
        self._timing, self._start, self.done = timing, time.perf_counter(), False
        for _ in range(owner.depth):
            self._submit()

    def __iter__(self) -> _ConcurrentEpoch[T]:
        return self

    def __next__(self) -> T:
        if self.done or not self._pending:
            self._end()
            raise StopIteration
        waited = time.perf_counter()
        try:
            batch = self._copy.hand_over(*self._pending.popleft().result())
        finally:  # a failed batch is taken too: the next call gets the batch after it
            now = time.perf_counter()
            self._timing.stall_seconds += now - waited
            self._timing.wall_seconds = now - self._start
            self.state.position += 1
            self._submit()
        self._timing.batches += 1
        return batch

    def _submit(self) -> None:
        with self._random.drawing():
            index = next(self._indices, None)
            seed = None if index is None else self._sampler.claim_seed()
        if index is not None:
            sampled = self._samplers.submit(self._sample, index, seed, len(self._pending))
            self._pending.append(self._assembler.submit(self._assemble, sampled))

    def _sample(self, index: Any, seed: int, reads_ahead: int) -> Any:
        """PyG's ``collate_fn`` without its ``filter_fn``: the sampler's output for ``index``,
        ``reads_ahead`` batches of this epoch being read before it."""
        inputs = self._loader.input_data[index]
        if isinstance(self._loader, NodeLoader):
            return self._sampler.sample_nodes(inputs, seed=seed, reads_ahead=reads_ahead)
        return self._sampler.sample_edges(inputs, self._loader.neg_sampling, seed=seed, reads_ahead=reads_ahead)

    def _assemble(self, sampled: Future) -> tuple[T, torch.cuda.Event | None]:
        # On CUDA a GPU cache's gathers run on the copy stream too: the whole assembly overlaps.
        return self._copy.make(lambda: self._loader.filter_fn(sampled.result()))

    def _end(self) -> None:
        if not self.done:
            _log_epoch(self._timing)
        self.close()

    def close(self) -> None:
        """Cancel batches not started, wait for the running ones, end the threads."""
        self.done = True
        for future in self._pending:
            future.cancel()
        self._pending.clear()
        self._samplers.shutdown(wait=True, cancel_futures=True)
        self._assembler.shutdown(wait=True)

    def __del__(self) -> None:
        for name in ("_samplers", "_assembler"):
            pool = getattr(self, name, None)  # absent if __init__ failed early
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)


def _remote_sampler(loader: object) -> RemoteNeighborSampler | None:
    """The ``RemoteNeighborSampler`` of a PyG loader, else ``None``."""
    if not isinstance(loader, (NodeLoader, LinkLoader)):
        return None
    sampler = loader.node_sampler if isinstance(loader, NodeLoader) else loader.link_sampler
    return sampler if isinstance(sampler, RemoteNeighborSampler) else None


def _switch_version(loader: NodeLoader | LinkLoader, sampler: RemoteNeighborSampler, version: int | None = None) -> int:
    """Move the loader's remote sampler, and its remote graph store, to graph version ``version``
    (``None``: the newest); returns it."""
    version = sampler.switch_version(version)
    data = getattr(loader, "data", None)
    if isinstance(data, tuple) and len(data) == 2 and isinstance(data[1], RemoteGraphStore):
        data[1].switch_version(version)
    return version


def _seed_claiming_sampler(loader: object) -> RemoteNeighborSampler | None:
    """The sampler of a PyG loader that ``_ConcurrentEpoch`` can drive, else ``None``."""
    sampler = _remote_sampler(loader)
    if sampler is None or loader.num_workers or loader.batch_sampler is None:
        return None
    return sampler


def _index_batches(loader: NodeLoader | LinkLoader) -> DataLoader:
    """The loader's index batches, drawn from torch's generator exactly as iterating it draws them."""
    return DataLoader(
        loader.dataset, batch_sampler=loader.batch_sampler, collate_fn=_as_is, generator=loader.generator
    )


def _as_is(index: list[int]) -> list[int]:
    return index


def _log_epoch(timing: EpochTiming) -> None:
    logger.info(
        "prefetch epoch: %d batches, stalled %.3f s of %.3f s (%.1f%%)",
        timing.batches, timing.stall_seconds, timing.wall_seconds, 100 * timing.stall_fraction,
    )


class Prefetcher(Generic[T]):
    """Iterate ``iterable`` with ``depth`` batches made ahead on background threads.

    Args:
        iterable: batches; re-iterated once per epoch (each ``iter()`` call).
        depth: batches in flight at once (a PyG loader over a ``RemoteNeighborSampler``) or kept
            ready ahead of the trainer (any other iterable); default 2, at least 1.
        device: if set, batches are moved there on the producing thread.
        pin_memory: pin host tensors before a non-blocking copy; defaults to ``True`` when
            ``device`` is a CUDA device.

    Over a PyG loader whose sampler is a ``RemoteNeighborSampler`` (``num_workers=0``),
    ``state_dict()`` / ``load_state_dict()`` checkpoint the current epoch (see the module doc).
    Over any PyG loader with such a sampler, each epoch begins by moving it to the server's
    newest graph version (``switch_version``; the loader's ``RemoteGraphStore`` moves with it),
    so graph writes show up epoch by epoch (loader workers take the version when they start:
    persistent ones keep their first).
    """

    def __init__(
        self,
        iterable: Iterable[T],
        depth: int = 2,
        *,
        device: str | torch.device | None = None,
        pin_memory: bool | None = None,
    ) -> None:
        if not isinstance(depth, int) or depth < 1:
            raise InvalidRequestError(f"prefetch depth must be an int >= 1; got {depth!r}")
        self.iterable, self.depth = iterable, depth
        self.device = torch.device(device) if device is not None else None
        is_cuda = self.device is not None and self.device.type == "cuda"
        self.pin_memory = is_cuda if pin_memory is None else bool(pin_memory and is_cuda)
        self.timing = EpochTiming()
        # Weak: an abandoned loop ends its threads.
        self._epoch: weakref.ref[_Epoch[T] | _ConcurrentEpoch[T]] | None = None
        self._resume: EpochState | None = None

    def __iter__(self) -> Iterator[T]:
        self.close()
        self.timing = EpochTiming()
        epoch: _Epoch[T] | _ConcurrentEpoch[T]
        if self.resumable:
            epoch, self._resume = _ConcurrentEpoch(self, self.timing, self._resume), None
        else:
            sampler = _remote_sampler(self.iterable)
            if sampler is not None:  # workers made for this epoch take the version with the sampler
                _switch_version(self.iterable, sampler)
            epoch = _Epoch(self, self.timing)
        self._epoch = weakref.ref(epoch)
        return epoch

    @property
    def resumable(self) -> bool:
        """Whether epochs can be checkpointed: a PyG loader over a ``RemoteNeighborSampler``,
        ``num_workers=0`` (its batches are then made ``depth`` at a time)."""
        return _seed_claiming_sampler(self.iterable) is not None

    def state_dict(self) -> dict[str, Any]:
        """Where the current epoch stands (``EpochState``'s fields), to save with the model's
        checkpoint; ``{}`` before the first and after the last batch of an epoch (the next
        ``iter()`` begins a new one).

        Raises:
            InvalidRequestError: the wrapped iterable's epochs are not resumable.
        """
        self._require_resumable()
        epoch = self._epoch() if self._epoch is not None else None
        if not isinstance(epoch, _ConcurrentEpoch) or epoch.done:
            return {}
        return dataclasses.asdict(epoch.state)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Make the next ``iter()`` finish the epoch ``state`` describes (``{}``: a new epoch).

        Raises:
            InvalidRequestError: the epochs are not resumable, or ``state`` is not a ``state_dict()``.
        """
        self._require_resumable()
        self._resume = EpochState.from_dict(state) if state else None

    def _require_resumable(self) -> None:
        if not self.resumable:
            raise InvalidRequestError(
                "only a Prefetcher over a PyG NodeLoader/LinkLoader with num_workers=0 whose sampler "
                f"is a RemoteNeighborSampler can checkpoint its epochs; this one wraps a "
                f"{type(self.iterable).__name__}"
            )

    def __len__(self) -> int:
        return len(self.iterable)  # type: ignore[arg-type]

    @property
    def stall_seconds(self) -> float:
        """Seconds the trainer waited for a batch in the current (or last) epoch."""
        return self.timing.stall_seconds

    @property
    def stall_fraction(self) -> float:
        """``stall_seconds`` over the current (or last) epoch's wall time so far."""
        return self.timing.stall_fraction

    def close(self) -> None:
        """End the current epoch's thread, if any."""
        epoch = self._epoch() if self._epoch is not None else None
        if epoch is not None:
            epoch.close()
        self._epoch = None

    def __enter__(self) -> Prefetcher[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_epoch": None}  # a running thread never travels
