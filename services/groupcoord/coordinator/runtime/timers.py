"""The timers of one partition: armed on the partition's loop, owned by its live replica.

A coordinator shard's timers (session and rebalance timeouts, offset expiry) are effects of the
*live* replica (see :mod:`.replicas`): the runtime arms them from the intents its results carry,
and their operations close over it. Both replicas see the timers only as a read-only view
(``is_scheduled``); the committed replica's results are never applied.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from groupcoord.coordinator.core.contract import CoordinatorResult

TimerOperation = Callable[[], CoordinatorResult[Any]]


@dataclass(slots=True)
class TimerEvent:
    """A fired timer, queued on the partition's loop like a request."""

    key: str
    token: object


class LoopTimer:
    """The :class:`~groupcoord.coordinator.core.contract.Timer` of one partition.

    Expiry only enqueues a :class:`TimerEvent`; the operation runs on the partition's loop like
    a request, so it never races a handler. A token per schedule makes a replaced or cancelled
    timer whose event was already queued a no-op.
    """

    def __init__(self, enqueue: Callable[[TimerEvent], None]) -> None:
        self._enqueue = enqueue
        self._timers: dict[str, tuple[object, asyncio.TimerHandle, TimerOperation]] = {}

    def schedule(self, key: str, delay_ms: int, operation: TimerOperation) -> None:
        self.cancel(key)
        token = object()
        handle = asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, self._expired, key, token)
        self._timers[key] = (token, handle, operation)

    def cancel(self, key: str) -> None:
        entry = self._timers.pop(key, None)
        if entry is not None:
            entry[1].cancel()

    def is_scheduled(self, key: str) -> bool:
        return key in self._timers

    def cancel_all(self) -> None:
        for _, handle, _ in self._timers.values():
            handle.cancel()
        self._timers.clear()

    def __len__(self) -> int:
        return len(self._timers)

    def _expired(self, key: str, token: object) -> None:
        self._enqueue(TimerEvent(key, token))

    def take(self, event: TimerEvent) -> TimerOperation | None:
        """The operation of a fired timer if it is still the armed one (and forget it)."""
        entry = self._timers.get(event.key)
        if entry is None or entry[0] is not event.token:
            return None
        del self._timers[event.key]
        return entry[2]
