"""Reads at the committed offset: a partition's coordinator shard kept as two replicas.

Kafka's CoordinatorRuntime lets a write's records change the state at once (the next request
sees them) while reads see the state as of the last committed offset, and a failed write
reverts to that offset; the shards' timeline collections and ``SnapshotRegistry`` make both
possible. The cores here are plain Python objects with no snapshots, and the runtime hosts any
core (the group cores, a test shard), so the runtime keeps two replicas of the coordinator shard
instead:

* ``live`` — every record is replayed into it as soon as a handler returns it. Writes, timers
  and the load hook run against it; its timers are the partition's timers.
* ``committed`` — only acknowledged (written and confirmed) records are replayed into it, in
  log order. Read-only operations run against it, so a read never sees a record whose write is
  still in flight, and never waits.

A failed write reverts without a reload from Kafka: the live replica takes a copy of the
committed replica's *data* (``live.restore(committed.data)``; the callers of every
unacknowledged write learn NOT_COORDINATOR; the timers are re-armed by the core's ``on_loaded``
as after a load). A shard is its state as plain data (``data``) plus wiring — handlers, managers,
callbacks — built once by its constructor; only the data is copied, so the wiring may hold any
callable and the live replica stays the same object.

Why this design and not an undo log per write: an undo log built on the compaction invariant
(state = f(last record per key)) would have to keep the previous record of every key a write
touches, i.e. the last record of *every* key of the partition, and replay the old values out
of log order, which the cores do not promise to accept (a member record replayed after its
group's tombstone). Two replicas need nothing from the cores beyond ``replay``. Costs: a
second ``replay`` per record (the decoded records are shared: records are values, and replay
must not mutate them) and twice the memory of the state; a load decodes each record once and
replays it into both. A revert costs a deep copy of the state's data, once per failed write;
replay pays nothing for it (an undo log would cost every replay).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from groupcoord.coordinator.core.contract import ArmedTimers, CoordinatorRecord, CoordinatorShard
from groupcoord.coordinator.runtime.timers import LoopTimer

ShardFactory = Callable[[int, ArmedTimers], CoordinatorShard]
"""Builds the coordinator shard of a partition: ``factory(partition, armed)``, where ``armed``
is the read-only view of the partition's timers (cores return timer intents, see contract.py)."""


class ShardReplicas:
    """The live and the committed replica of one partition's coordinator shard."""

    def __init__(self, factory: ShardFactory, partition: int, timer: LoopTimer) -> None:
        # Both replicas may ask which timers are armed; only the live one's results arm them.
        self.live: CoordinatorShard = factory(partition, timer)
        self.committed: CoordinatorShard = factory(partition, timer)

    def replay_live(self, records: Iterable[CoordinatorRecord]) -> None:
        replay = self.live.replay
        for record in records:
            replay(record)

    def commit(self, records: Iterable[CoordinatorRecord]) -> None:
        """Records acknowledged in the log: reads see them from now on."""
        replay = self.committed.replay
        for record in records:
            replay(record)

    def revert(self) -> None:
        """Make the live replica the committed state again (a write failed).

        Raises if the state cannot be copied; the caller then reloads the partition instead.
        """
        self.live.restore(self.committed.data)
