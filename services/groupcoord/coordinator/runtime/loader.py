"""Loading a partition from the state topic: the cold load up to a marker, and the standby tail.

Both read the log with one :class:`~.statelog.PartitionReader`, judge each record with the one
fence scan (:meth:`~.fencing.ReplayFilter.scan`), decode it with one :class:`RecordDecoder` and
replay it into both replicas of the coordinator shard (:mod:`.replicas`): everything in the
log up to where a loader reads is committed. They also track the keys whose *last* record so
far is a fenced writer's, which the new leader must rewrite (see :mod:`.fencing`).
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Iterator, Sequence
from typing import Any

from groupcoord.common.records import RECORD_TYPES
from groupcoord.coordinator.core.contract import CoordinatorRecord
from groupcoord.coordinator.runtime.fencing import ReplayFilter
from groupcoord.coordinator.runtime.replicas import ShardReplicas
from groupcoord.coordinator.runtime.statelog import PartitionReader


class RecordDecoder:
    """State-topic bytes → :class:`CoordinatorRecord`, about twice as fast as
    ``deserialize_record``: the one decoder of the loader, the standby tail and the repair.

    A reload replays up to millions of records, and building a frozen dataclass through its
    ``__init__`` (``object.__setattr__`` per field) costs as much as parsing a protobuf. This
    caches each type id's parsers and fills the slots of :class:`CoordinatorRecord` through its
    slot descriptors; the result is the same immutable record.
    """

    def __init__(self) -> None:
        self._parsers: dict[bytes, tuple[Any, Any]] = {}
        self._new = object.__new__
        self._set_key = CoordinatorRecord.key.__set__  # type: ignore[attr-defined]
        self._set_value = CoordinatorRecord.value.__set__  # type: ignore[attr-defined]

    def __call__(self, key: bytes, value: bytes | None) -> CoordinatorRecord:
        prefix = key[:2]
        parsers = self._parsers.get(prefix)
        if parsers is None:
            rt = RECORD_TYPES.by_id(int.from_bytes(prefix, "big"))
            parsers = self._parsers[prefix] = (rt.key_type.FromString, rt.value_type.FromString)
        record = self._new(CoordinatorRecord)
        self._set_key(record, parsers[0](key[2:]))
        self._set_value(record, None if value is None else parsers[1](value))
        return record  # type: ignore[no-any-return]


class PartitionLoader:
    """Reads one partition's log into its replicas; see the module docstring."""

    def __init__(self, reader: PartitionReader, replicas: ShardReplicas) -> None:
        self.reader = reader
        self.replicas = replicas
        self.filter = ReplayFilter()
        self.decode = RecordDecoder()
        self.records_read = 0
        self.records_loaded = 0
        self._stale: set[bytes] = set()

    async def load_to(self, end: int) -> tuple[list[CoordinatorRecord], float]:
        """Load everything before offset ``end``. Returns the records that rewrite keys whose
        last record is a fenced writer's (their valid value, or a tombstone), and the seconds
        spent replaying (the loop's busy time, for metrics).

        The state topic is compacted, so the shards' records are compaction-safe by design:
        replaying only each key's last valid record, in the order of those last occurrences,
        gives the state a fully compacted log gives. A log that was never compacted (tansu
        never compacts) then costs a dict update per superseded record instead of a protobuf
        parse and two replays. Stale (fenced) records are dropped before they can shadow a key.
        """
        latest: dict[bytes, bytes | None] = {}
        stale = self._stale
        pop = latest.pop

        def admit(key: bytes, value: bytes | None) -> None:
            pop(key, None)  # move the key to its last occurrence
            latest[key] = value
            if stale:
                stale.discard(key)  # only a stale *last* record needs a repair

        busy = 0.0
        with gc_paused():
            async for chunk in self.reader.chunks_until(end):
                t0 = time.perf_counter()
                self.records_read += len(chunk)
                self.filter.scan(chunk, admit, stale.add)
                busy += time.perf_counter() - t0
            t0 = time.perf_counter()
            decode = self.decode
            live, committed = self.replicas.live.replay, self.replicas.committed.replay
            for key, value in latest.items():
                record = decode(key, value)
                live(record)
                committed(record)
            self.records_loaded += len(latest)
            busy += time.perf_counter() - t0
        repair = [self.decode(k, latest.get(k)) for k in stale]
        self._stale = set()
        return repair, busy

    def replay(self, chunk: Sequence[Any]) -> None:
        """Replay a chunk of the log in order (the standby tail)."""
        decode = self.decode
        live, committed = self.replicas.live.replay, self.replicas.committed.replay
        stale = self._stale
        loaded = 0

        def admit(key: bytes, value: bytes | None) -> None:
            nonlocal loaded
            record = decode(key, value)
            live(record)
            committed(record)
            loaded += 1
            if stale:
                stale.discard(key)

        self.records_read += len(chunk)
        self.filter.scan(chunk, admit, stale.add)
        self.records_loaded += loaded

    async def tail(self) -> None:
        """Follow the log for ever (a hot standby); raises on a read or replay error."""
        while True:
            chunk = await self.reader.read(timeout_ms=500)
            if len(chunk) > 10_000:  # catching up: same GC reasoning as a load
                with gc_paused():
                    self.replay(chunk)
            else:
                self.replay(chunk)


_loads_in_progress = 0


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while loading (per process, across concurrent loads).

    A load creates millions of objects that all survive; each generation-2 collection would
    rescan all of them, which measured here made loading 1M records ~3x slower. The state
    topic's objects are acyclic, so reference counting still frees superseded ones. When the
    last load finishes, the survivors are frozen into the permanent generation so later
    collections on the serving loop do not rescan them either (``gc.freeze``).
    """
    global _loads_in_progress
    if _loads_in_progress == 0:
        gc.disable()
    _loads_in_progress += 1
    try:
        yield
    finally:
        _loads_in_progress -= 1
        if _loads_in_progress == 0:
            gc.freeze()
            gc.enable()
