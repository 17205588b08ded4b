"""A mock clock and a timer driven by it: the cores' timers made deterministic for tests and
the core benchmarks (bench/*_core.py find this folder through bench/_core_test_doubles.py).

The runtime's timer runs operations on the partition's loop at wall-clock deadlines; this one
runs them only when a test steps the :class:`MockClock` and pops what expired, so a test
decides exactly when each timer fires (like Apache Kafka's MockCoordinatorTimer).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from groupcoord.common.steps import Steps, finish
from groupcoord.coordinator.core.contract import CoordinatorResult, Publication, PublishOutcome


@dataclass
class MockClock:
    now_ms: int = 0


@dataclass(order=True)
class _Scheduled:
    deadline_ms: int
    seq: int
    key: str = field(compare=False)
    operation: Callable[[], CoordinatorResult[Any]] = field(compare=False)


class MockTimer:
    """A :class:`~groupcoord.coordinator.core.contract.Timer` driven by a :class:`MockClock`."""

    def __init__(self, clock: MockClock) -> None:
        self.clock = clock
        self._heap: list[_Scheduled] = []
        self._live: dict[str, _Scheduled] = {}
        self._seq = itertools.count()
        # publications under way: key -> (what to write, its continuation), until a test ends one
        self.publications: dict[str, tuple[Publication, Callable[[PublishOutcome], CoordinatorResult[Any]]]] = {}

    def schedule(self, key: str, delay_ms: int, operation: Callable[[], CoordinatorResult[Any]]) -> None:
        entry = _Scheduled(self.clock.now_ms + delay_ms, next(self._seq), key, operation)
        self._live[key] = entry
        heapq.heappush(self._heap, entry)

    def offload(
        self, key: str, task: Callable[[], Steps[Any]], then: Callable[[Any], CoordinatorResult[Any]]
    ) -> None:
        """An offloaded computation finishes at the current time: the next ``pop_expired``
        runs it and its continuation, so a test decides what happens on the loop meanwhile
        (Kafka's MockCoordinatorExecutor runs tasks only when the test polls it)."""
        self.schedule(key, 0, lambda: then(finish(task())))

    def publish(
        self, key: str, publication: Publication, then: Callable[[PublishOutcome], CoordinatorResult[Any]]
    ) -> None:
        """A publication waits until the test ends it (:meth:`publication_ended`), as a write to
        another topic takes the time the cluster takes."""
        self.cancel(key)
        self.publications[key] = (publication, then)

    def publication_ended(self, key: str, outcome: PublishOutcome) -> None:
        """The publication of ``key`` ended with ``outcome``: its continuation runs at the next
        ``pop_expired``."""
        _, then = self.publications.pop(key)
        self.schedule(key, 0, lambda: then(outcome))

    def cancel(self, key: str) -> None:
        self._live.pop(key, None)
        self.publications.pop(key, None)

    def cancel_all(self) -> None:
        """What the runtime does to a partition's timers when it reverts a failed write."""
        self._live.clear()
        self.publications.clear()

    def is_scheduled(self, key: str) -> bool:
        return key in self._live or key in self.publications

    def deadline(self, key: str) -> int | None:
        entry = self._live.get(key)
        return None if entry is None else entry.deadline_ms

    def next_deadline(self) -> int | None:
        """The earliest deadline of a live timer (None if none): lets a test step the clock
        from deadline to deadline, so timers scheduled by timers run at their own time."""
        return min((e.deadline_ms for e in self._live.values()), default=None)

    def pop_expired(self) -> list[tuple[str, Callable[[], CoordinatorResult[Any]]]]:
        """Remove and return the timers whose deadline has passed, earliest first."""
        fired = []
        while self._heap and self._heap[0].deadline_ms <= self.clock.now_ms:
            entry = heapq.heappop(self._heap)
            if self._live.get(entry.key) is entry:
                del self._live[entry.key]
                fired.append((entry.key, entry.operation))
        return fired
