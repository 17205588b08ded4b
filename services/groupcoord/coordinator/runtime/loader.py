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

from google.protobuf.message import DecodeError

from groupcoord.common.records import RECORD_TYPES
from groupcoord.coordinator.core.contract import CoordinatorRecord
from groupcoord.coordinator.runtime.fencing import ReplayFilter
from groupcoord.coordinator.runtime.replicas import ShardReplicas
from groupcoord.coordinator.runtime.skipped_records import UNDECODABLE, UNREPLAYABLE, SkippedRecords
from groupcoord.coordinator.runtime.statelog import PartitionReader

# What decoding bytes that are not one of our records raises: an unknown type id (KeyError), a
# key or value that is not its protobuf (DecodeError; ValueError for a bad UTF-8 string).
UNDECODABLE_ERRORS = (KeyError, DecodeError, ValueError)


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
        self._set_decoded = CoordinatorRecord.decoded.__set__  # type: ignore[attr-defined]

    def __call__(self, key: bytes, value: bytes | None) -> CoordinatorRecord:
        prefix = key[:2]
        parsers = self._parsers.get(prefix)
        if parsers is None:
            rt = RECORD_TYPES.by_id(int.from_bytes(prefix, "big"))
            parsers = self._parsers[prefix] = (rt.key_type.FromString, rt.value_type.FromString)
        record = self._new(CoordinatorRecord)
        self._set_key(record, parsers[0](key[2:]))
        self._set_value(record, None if value is None else parsers[1](value))
        self._set_decoded(record, None)  # read from the log: replay decodes the message
        return record  # type: ignore[no-any-return]


class PartitionLoader:
    """Reads one partition's log into its replicas; see the module docstring.

    A record it cannot decode or replay, or whose fence no leader can have written, is skipped
    and told to ``skipped`` (:mod:`.skipped_records`): the partition keeps serving whatever a
    writer that bypassed the gateway appended to its log.
    """

    def __init__(self, reader: PartitionReader, replicas: ShardReplicas, skipped: SkippedRecords) -> None:
        self.reader = reader
        self.replicas = replicas
        self.skipped = skipped
        self.filter = ReplayFilter(self.skipped)
        self.decode = RecordDecoder()
        self.records_read = 0
        self.records_loaded = 0
        self._stale: set[bytes] = set()
        self._unusable: set[bytes] = set()  # keys skipped (undecodable, unreplayable) by this load

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
            apply = self._apply
            for key, value in latest.items():
                apply(key, value)
            self.records_loaded += len(latest)
            busy += time.perf_counter() - t0
        repair = [r for r in (self._repairable(k, latest) for k in stale) if r is not None]
        self._stale = set()
        return repair, busy

    def _decoded(self, key: bytes, value: bytes | None) -> CoordinatorRecord | None:
        """The record, or None (skipped and counted) if it is not one of ours."""
        try:
            return self.decode(key, value)
        except UNDECODABLE_ERRORS as exc:
            self.skipped(UNDECODABLE, f"key {key[:16].hex()}: {exc!r}")
            return None

    def _repairable(self, key: bytes, latest: dict[bytes, bytes | None]) -> CoordinatorRecord | None:
        """The repair record of a key whose last record is fenced: its last valid record, or a
        tombstone if it has none; None if the shard cannot take it (garbage someone wrote
        around the gateway: skipped, never written back).

        A tombstone of a key never replayed is tried on both replicas first: deleting what is
        not there changes no state, and the replay the repair write makes again on the live
        path then cannot fail.
        """
        if key in latest:
            return None if key in self._unusable else self._decoded(key, latest[key])
        return self._decoded(key, None) if self._apply(key, None) else None

    def _apply(self, key: bytes, value: bytes | None) -> bool:
        """Decode and replay one record into both replicas; False if it was skipped."""
        record = self._decoded(key, value)
        if record is None:
            self._unusable.add(key)
            return False
        try:
            self.replicas.live.replay(record)
            self.replicas.committed.replay(record)
        except Exception as exc:  # noqa: BLE001 - a record nobody wrote must not fail the partition
            self.skipped(UNREPLAYABLE, f"{type(record.key).__name__}: {exc!r}")
            self._unusable.add(key)
            return False
        return True

    def replay(self, chunk: Sequence[Any]) -> None:
        """Replay a chunk of the log in order (the standby tail)."""
        apply = self._apply
        stale = self._stale
        loaded = 0

        def admit(key: bytes, value: bytes | None) -> None:
            nonlocal loaded
            loaded += apply(key, value)
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
