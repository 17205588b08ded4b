"""Reads at the committed offset: a partition's coordinator shard kept as two replicas.

Kafka's CoordinatorRuntime lets a write's records change the state at once (the next request
sees them) while reads see the state as of the last committed offset, and a failed write
reverts to that offset; the shards' timeline collections and ``SnapshotRegistry`` make both
possible. The shards here are plain Python objects with no snapshots, and the runtime hosts any
shard (the group coordinator shard, the register test shard), so the runtime keeps two replicas
of the coordinator shard instead:

* ``live`` — every record is replayed into it as soon as a handler returns it. Writes, timers
  and the load hook run against it; its timers are the partition's timers.
* ``committed`` — only acknowledged (written and confirmed) records are replayed into it, in
  log order. Read-only operations run against it, so a read never sees a record whose write is
  still in flight, and never waits.

A failed write reverts without a reload from Kafka: the live replica takes a copy of the
committed replica's *data* (``live.restore(committed.data)``; the callers of every
unacknowledged write learn NOT_COORDINATOR; the timers are re-armed by the shard's
``on_loaded`` as after a load). A shard is its state as plain data (``data``) plus wiring —
handlers, managers, callbacks — built once by its constructor; only the data is copied, so the
wiring may hold any callable and the live replica stays the same object.

Why this design and not an undo log per write: an undo log built on the compaction invariant
(state = f(last record per key)) would have to keep the previous record of every key a write
touches, i.e. the last record of *every* key of the partition, and replay the old values out
of log order, which the shards do not promise to accept (a member record replayed after its
group's tombstone). Two replicas need from a shard only ``replay``, ``data`` and an
all-or-nothing ``restore`` (contract.py). Costs: a second ``replay`` per record (the decoded
records are shared: records are values, and replay must not mutate them) and twice the memory
of the state; a load decodes each record once and replays it into both. Replay pays nothing
for reverts (an undo log would cost every replay); a revert costs one copy of the state, once
per failed write, made cheap by copying containers and sharing the immutable values in them
(``GroupCoordinatorState.copy``). Measured by ``bench/revert.py`` (one run, load average
1.35 → 1.7 on a shared 2-core machine): 10,000 groups × 100 committed offsets, 98 ms against
10.9 s for the deep copy it replaced (×112); one KIP-848 group of 1,000 members, 0.8 ms
against 21.6 ms (×26).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from groupcoord.coordinator.core.contract import ArmedTimers, CoordinatorRecord, CoordinatorShard
from groupcoord.coordinator.runtime.timers import LoopTimer

ShardFactory = Callable[[int, ArmedTimers], CoordinatorShard]
"""Builds the coordinator shard of a partition: ``factory(partition, armed)``, where ``armed``
is the read-only view of the partition's timers (shards return timer intents, see contract.py)."""


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
