"""How the sampler and the feature tier get the arrays of a reply: ``Allocate``.

The server passes one in to build a reply's arrays where they will travel (a shared-memory
segment, see ``proto/reply_segment.py``); without one they are ordinary arrays. Declared here so
the engine and the stores need not import the transport.
"""
from __future__ import annotations

from typing import Protocol

import numpy as np


class Allocate(Protocol):
    """Makes an uninitialised array, as ``np.empty`` does (or in a reply segment: ``ReplyWriter.empty``)."""

    def __call__(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray: ...
