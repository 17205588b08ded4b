"""A computation in steps: a generator that yields between steps and returns its result.

Why: a large assignment (1,000 members x 50,000 partitions: tens of milliseconds of Python)
must not hold a shard's event loop, and a thread alone does not free it: the thread and the
loop share the interpreter lock, so every time the loop blocks on a system call the thread
takes the lock and the loop waits up to a switch interval for it back. Written as steps, the
same code runs to its end at once where nothing waits (:func:`finish`: an inline assignment),
or on the offload thread in short slices with pauses between them, in which the loop has the
lock at once (``runtime/timers.py``).

A step should take well under the slice (tens of microseconds): loops over members or topics
yield every :data:`STRIDE` items (:func:`stride`), so a yield costs nothing measurable.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TypeVar

T = TypeVar("T")

Steps = Generator[None, None, T]
"""A computation that yields ``None`` between steps and returns a ``T``."""

# How many items (members, topics) of unit cost a loop handles between two yields.
STRIDE = 32


def stride(cost: int = 1) -> int:
    """How many items a loop handles between two yields (``if not i % per: yield``, ``per``
    taken once before the loop: a call per item would cost more than the yields), ``cost``
    being how many times heavier than a member's an item is. A test sets ``STRIDE`` to 1: a
    yield at every item."""
    return max(1, STRIDE // cost)


def finish(steps: Steps[T]) -> T:
    """Run ``steps`` to its end and return its result."""
    while True:
        try:
            next(steps)
        except StopIteration as end:
            return end.value  # type: ignore[no-any-return]
