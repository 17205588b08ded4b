"""The timers of one partition: armed on the partition's loop, owned by its live replica.

A coordinator shard's timers (session and rebalance timeouts, offset expiry) are effects of the
*live* replica (see :mod:`.replicas`): the runtime arms them from the intents its results carry,
and their operations close over it. Both replicas see the timers only as a read-only view
(``is_scheduled``); the committed replica's results are never applied.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from groupcoord.common.steps import Steps
from groupcoord.coordinator.core.contract import CoordinatorResult

log = logging.getLogger(__name__)

TimerOperation = Callable[[], CoordinatorResult[Any]]


# The longest an offloaded computation holds the loop at once: its steps run until this much
# time has passed, then the loop's other ready callbacks (requests of other groups, I/O) run
# before its next slice. A request whose answer takes k loop turns waits at most k slices.
OFFLOAD_SLICE_S = 0.0002


@dataclass(slots=True)
class TimerEvent:
    """A fired timer, queued on the partition's loop like a request."""

    key: str
    token: object


@dataclass(slots=True)
class _Armed:
    token: object  # of the latest schedule: an event of an earlier one is a no-op
    deadline: float  # loop time
    operation: TimerOperation
    handle: asyncio.TimerHandle | None  # wakes at or before ``deadline``; None once fired


# A loop handle may run this much before its time (asyncio's clock resolution and more): a
# wake-up this close to the deadline is the deadline.
_EARLY_S = 0.001


class LoopTimer:
    """The :class:`~groupcoord.coordinator.core.contract.Timer` of one partition.

    Expiry only enqueues a :class:`TimerEvent`; the operation runs on the partition's loop like
    a request, so it never races a handler. A token per schedule makes a replaced or cancelled
    timer whose event was already queued a no-op.

    Moving a timer later keeps its loop handle: the handle wakes at the old time and sleeps
    again until the new one. Every steady heartbeat moves its member's session timer later, and
    a cancel and a new handle each time were the shard's largest cost per heartbeat after the
    heartbeat itself (asyncio's timer heap grows with cancelled handles until it is rebuilt).
    """

    def __init__(self, enqueue: Callable[[TimerEvent], None]) -> None:
        self._enqueue = enqueue
        self._timers: dict[str, _Armed] = {}

    def schedule(self, key: str, delay_ms: int, operation: TimerOperation) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(delay_ms, 0) / 1000
        armed = self._timers.get(key)
        if armed is not None and armed.handle is not None:
            if armed.handle.when() <= deadline:  # it wakes first, and sleeps on till the deadline
                armed.token, armed.deadline, armed.operation = object(), deadline, operation
                return
            armed.handle.cancel()
        handle = loop.call_at(deadline, self._expired, key)
        self._timers[key] = _Armed(object(), deadline, operation, handle)

    def offload(
        self, key: str, task: Callable[[], Steps[Any]], then: Callable[[Any], CoordinatorResult[Any]]
    ) -> None:
        """Run ``task``'s steps a slice (:data:`OFFLOAD_SLICE_S`) at a time between the loop's
        other callbacks; once it returns, ``then(result)`` is queued on the partition's loop as
        this key's fired timer. A cancel, or a schedule of the key meanwhile, stops it (the
        steps are closed at their next slice, and nothing is queued)."""
        self.cancel(key)
        token = object()
        self._timers[key] = _Armed(token, math.inf, _never, None)
        asyncio.get_running_loop().call_soon(self._slice, key, token, task(), then)

    def _slice(
        self, key: str, token: object, steps: Steps[Any], then: Callable[[Any], CoordinatorResult[Any]]
    ) -> None:
        armed = self._timers.get(key)
        if armed is None or armed.token is not token:
            steps.close()  # cancelled or replaced meanwhile: nobody wants this result
            return
        end = time.perf_counter() + OFFLOAD_SLICE_S
        try:
            while time.perf_counter() < end:
                next(steps)
        except StopIteration as done:
            armed.operation = functools.partial(then, done.value)
            self._enqueue(TimerEvent(key, token))
            return
        except Exception as error:  # noqa: BLE001 - a failed assignment is logged and dropped
            log.error("offloaded %s failed: %r", key, error, exc_info=error)
            del self._timers[key]
            return
        asyncio.get_running_loop().call_soon(self._slice, key, token, steps, then)

    def cancel(self, key: str) -> None:
        armed = self._timers.pop(key, None)
        if armed is not None and armed.handle is not None:
            armed.handle.cancel()

    def is_scheduled(self, key: str) -> bool:
        return key in self._timers

    def cancel_all(self) -> None:
        for armed in self._timers.values():
            if armed.handle is not None:
                armed.handle.cancel()
        self._timers.clear()

    def __len__(self) -> int:
        return len(self._timers)

    def _expired(self, key: str) -> None:
        armed = self._timers.get(key)
        if armed is None:
            return
        loop = asyncio.get_running_loop()
        if armed.deadline - loop.time() > _EARLY_S:  # moved later since: sleep on
            armed.handle = loop.call_at(armed.deadline, self._expired, key)
            return
        armed.handle = None
        self._enqueue(TimerEvent(key, armed.token))

    def take(self, event: TimerEvent) -> TimerOperation | None:
        """The operation of a fired timer if it is still the armed one (and forget it)."""
        armed = self._timers.get(event.key)
        if armed is None or armed.token is not event.token:
            return None
        del self._timers[event.key]
        return armed.operation


def _never() -> CoordinatorResult[Any]:
    raise AssertionError("an offloaded computation's operation ran before the computation returned")
