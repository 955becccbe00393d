"""Batches onto the trainer's device, for the ``Prefetcher``.

On CUDA a batch is made on a side stream of the epoch's own: its host-to-device copies (from
pinned memory, non-blocking) and a GPU cache's gathers overlap the kernels the trainer queues
on its stream. The batch is handed over with an event the trainer's stream waits on, never a
call that blocks the host, and its tensors are recorded on the trainer's stream so the caching
allocator does not give their memory to the next batch while the trainer still reads it.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import torch

T = TypeVar("T")


def map_tensors(batch: Any, use: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """``batch`` (a tensor, PyG data, or a dict/list/tuple of them) with each tensor replaced by
    ``use(tensor)``; PyG data is changed in place, anything else is left as it is."""
    if isinstance(batch, torch.Tensor):
        return use(batch)
    if hasattr(batch, "apply") and hasattr(batch, "to"):  # PyG Data, HeteroData, Batch
        return batch.apply(lambda value: map_tensors(value, use))
    if isinstance(batch, dict):
        return {k: map_tensors(v, use) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        mapped = [map_tensors(v, use) for v in batch]
        return type(batch)(*mapped) if hasattr(batch, "_fields") else type(batch)(mapped)
    return batch


def move_to(batch: Any, device: torch.device, pin_memory: bool) -> Any:
    """Copy tensors in ``batch`` to ``device`` (see ``map_tensors``); ``pin_memory``: pin each
    host tensor first and copy without blocking."""

    def move(tensor: torch.Tensor) -> torch.Tensor:
        if pin_memory and not tensor.is_cuda:
            tensor = tensor.pin_memory()
        return tensor.to(device, non_blocking=pin_memory)

    return map_tensors(batch, move)


class DeviceCopy:
    """One epoch's way onto ``device`` (``None``: batches stay where they are made).

    ``make`` runs on a producing thread, ``hand_over`` on the trainer's.
    """

    def __init__(self, device: torch.device | None, pin_memory: bool) -> None:
        self.device, self.pin_memory = device, pin_memory
        self.stream = torch.cuda.Stream(device) if device is not None and device.type == "cuda" else None
        if self.stream is not None:
            # What the trainer queued before the epoch (a GPU cache's warm-up writes) comes first.
            self.stream.wait_stream(torch.cuda.current_stream(device))

    def make(self, produce: Callable[[], T]) -> tuple[T, torch.cuda.Event | None]:
        """``produce()``'s batch on the device, and the event its device work ends with."""
        if self.stream is None:
            batch = produce()
            return (batch if self.device is None else move_to(batch, self.device, self.pin_memory)), None
        with torch.cuda.stream(self.stream):
            batch = move_to(produce(), self.device, self.pin_memory)
            return batch, self.stream.record_event()

    def hand_over(self, batch: T, ready: torch.cuda.Event | None) -> T:
        """``batch`` for the trainer's current stream: its kernels start after ``ready``."""
        if ready is None:
            return batch
        stream = torch.cuda.current_stream(self.device)
        stream.wait_event(ready)
        def record(tensor: torch.Tensor) -> torch.Tensor:
            if tensor.is_cuda:
                tensor.record_stream(stream)
            return tensor

        return map_tensors(batch, record)
