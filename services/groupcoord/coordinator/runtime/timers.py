"""The timers of one partition: armed on the partition's loop, owned by its live replica.

A coordinator shard's timers (session and rebalance timeouts, offset expiry) are effects of the
*live* replica (see :mod:`.replicas`): the runtime arms them from the intents its results carry,
and their operations close over it. Both replicas see the timers only as a read-only view
(``is_scheduled``); the committed replica's results are never applied.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from groupcoord.common.steps import Steps
from groupcoord.coordinator.core.contract import CoordinatorResult, Publication, PublishOutcome

log = logging.getLogger(__name__)

TimerOperation = Callable[[], CoordinatorResult[Any]]


# An offloaded computation runs on a thread of its own, its steps (common/steps.py) in slices of
# this much time, each followed by a pause in which the thread does not hold the interpreter
# lock. The thread shares the lock with the loops: without pauses, each time a loop released
# the lock for a system call the thread took it, and the loop waited up to a switch interval
# for it back, several times per turn. After a pause the loop has the lock at once; mid-slice
# it waits at most the rest of the slice (below CPython's 5 ms switch interval). Measured with
# ``bench/run.py assignment-offload`` (docs/performance.md): other groups' heartbeat p99 during
# a 1,000 x 50,000 group's reassignments 1.4-1.9x their baseline, against 2.0-2.3x on a thread
# without pauses and 2.6-3.3x in slices on the loop itself (0.02-0.2 ms slices: every turn of
# a request then paid a slice). The pauses cost the computation ~20 % more wall time.
OFFLOAD_SLICE_S = 0.0005
OFFLOAD_PAUSE_S = 0.0001


@functools.cache
def offload_executor() -> concurrent.futures.ThreadPoolExecutor:
    """The process's thread for offloaded computations (assignments, KIP-1263). One thread:
    the tasks are Python and share the interpreter lock with the loops, so a second thread
    would not compute faster."""
    return concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="groupcoord-offload")


def run_in_slices(steps: Steps[Any], wanted: Callable[[], bool]) -> Any:
    """Run ``steps`` to its end on the offload thread, pausing after every slice; stop (close
    the steps, return None) at a pause once ``wanted()`` is False: a cancelled or replaced
    computation stops spending the process's CPU."""
    while True:
        end = time.perf_counter() + OFFLOAD_SLICE_S
        try:
            while time.perf_counter() < end:
                next(steps)
        except StopIteration as done:
            return done.value
        time.sleep(OFFLOAD_PAUSE_S)
        if not wanted():
            steps.close()
            return None


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
    task: asyncio.Task[Any] | None = None  # a publication's write under way


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

    def __init__(
        self,
        enqueue: Callable[[TimerEvent], None],
        publish: Callable[[Publication], Awaitable[PublishOutcome]] | None = None,
    ) -> None:
        self._enqueue = enqueue
        # how the partition writes a publication: once its state is written, then the write
        self._publish = publish
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
        if armed is not None and armed.task is not None:
            armed.task.cancel()
        handle = loop.call_at(deadline, self._expired, key)
        self._timers[key] = _Armed(object(), deadline, operation, handle)

    def offload(
        self, key: str, task: Callable[[], Steps[Any]], then: Callable[[Any], CoordinatorResult[Any]]
    ) -> None:
        """Run ``task``'s steps on the offload thread, in slices (:func:`run_in_slices`); once
        it returns, ``then(result)`` is queued on the partition's loop as this key's fired
        timer. A cancel, or a schedule of the key meanwhile, drops the result and stops the
        steps at their next pause."""
        self.cancel(key)
        token = object()
        self._timers[key] = _Armed(token, math.inf, _never, None)
        wanted = functools.partial(self._armed_with, key, token)
        future = asyncio.get_running_loop().run_in_executor(offload_executor(), run_in_slices, task(), wanted)
        future.add_done_callback(functools.partial(self._computed, key, token, then))

    def publish(
        self, key: str, publication: Publication, then: Callable[[PublishOutcome], CoordinatorResult[Any]]
    ) -> None:
        """Write ``publication`` (the partition's ``publish``: after the state written so far),
        then queue ``then(outcome)`` as this key's fired timer. A cancel or a replacing schedule
        stops waiting for it and drops the outcome (a write already sent may still land: the
        state's next owner deduplicates)."""
        self.cancel(key)
        if self._publish is None:
            log.error("publication %s dropped: this partition writes no publications", key)
            return
        token = object()
        task = asyncio.get_running_loop().create_task(self._publish(publication), name=f"publish-{key}")
        self._timers[key] = _Armed(token, math.inf, _never, None, task)
        task.add_done_callback(functools.partial(self._published, key, token, then))

    def _published(
        self,
        key: str,
        token: object,
        then: Callable[[PublishOutcome], CoordinatorResult[Any]],
        task: asyncio.Task[PublishOutcome],
    ) -> None:
        if not self._armed_with(key, token) or task.cancelled():
            return
        if (error := task.exception()) is not None:  # its state write failed: the revert resumes it
            log.info("publication %s not written: %r", key, error)
            del self._timers[key]
            return
        self._timers[key].operation = functools.partial(then, task.result())
        self._enqueue(TimerEvent(key, token))

    def _armed_with(self, key: str, token: object) -> bool:
        """Whether ``key`` is still armed by the schedule of ``token`` (read from the offload
        thread: a dict lookup, atomic under the interpreter lock)."""
        armed = self._timers.get(key)
        return armed is not None and armed.token is token

    def _computed(
        self, key: str, token: object, then: Callable[[Any], CoordinatorResult[Any]], future: asyncio.Future[Any]
    ) -> None:
        if not self._armed_with(key, token) or future.cancelled():
            return  # cancelled or replaced meanwhile: nobody wants this result
        if (error := future.exception()) is not None:
            log.error("offloaded %s failed: %r", key, error, exc_info=error)
            del self._timers[key]
            return
        self._timers[key].operation = functools.partial(then, future.result())
        self._enqueue(TimerEvent(key, token))

    def cancel(self, key: str) -> None:
        armed = self._timers.pop(key, None)
        if armed is not None:
            if armed.handle is not None:
                armed.handle.cancel()
            if armed.task is not None:
                armed.task.cancel()

    def is_scheduled(self, key: str) -> bool:
        return key in self._timers

    def cancel_all(self) -> None:
        for armed in self._timers.values():
            if armed.handle is not None:
                armed.handle.cancel()
            if armed.task is not None:
                armed.task.cancel()
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
