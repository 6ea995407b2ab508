"""The timing hook of a search: where its time goes, measured from inside without patching.

eval/bench.py passes a Phases to Searcher and reads the seconds per phase after each search;
everyone else gets NO_PHASES, whose context manager does nothing (about 0.2 µs a phase).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Protocol


class Phases(Protocol):
    def __call__(self, name: str) -> AbstractContextManager[None]: ...


class Stopwatch:
    """Seconds per phase name, summed over the phases timed since the last reset()."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def reset(self) -> None:
        self.seconds = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t


_NULL: AbstractContextManager[None] = nullcontext()


def NO_PHASES(name: str) -> AbstractContextManager[None]:  # noqa: N802 - used like a constant
    """Times nothing."""
    return _NULL
