"""Leadership-epoch fencing of the state topic: the tag on every record and the replay filter.

Why epochs and not transactions: the project fences with data in the log so that any reader
(a loading leader, a hot standby, an offline tool) decides the same way from the log alone,
and so that it works on brokers whose transactional support differs (tansu shows aborted
records to ``read_committed`` readers; aiokafka's transactional producer cannot start there).

The scheme:

* A shard taking over partition *p* with leadership epoch *E* picks a random ``nonce`` and
  appends a **marker** ``(E, nonce)`` *before* loading. It then loads up to the marker, so
  everything before the marker is judged by the old rules, and everything after it that does
  not carry ``(E, nonce)`` is dead for every replayer.
* Every data record carries a header ``gc.fence`` = ``(epoch, nonce)`` of its writer.
* Replay keeps ``current`` = the marker with the highest epoch seen so far (a later marker of
  the same epoch replaces an earlier one: a restarted shard under the same epoch fences its
  previous incarnation). A data record tagged ``(e, n)`` is applied iff no marker before it
  supersedes it: ``current is None or e > current.epoch or (e, n) == current``. The ``e >
  current.epoch`` case only arises after log compaction removed the record's own marker
  (markers are keyed by epoch, so only a later marker of the same epoch can replace one) and
  keeps compacted logs replaying like uncompacted ones.

The writer-side half (never acknowledge a write that a new marker precedes) lives in
:mod:`groupcoord.coordinator.runtime.write_pipeline`, the compaction repair in
:mod:`groupcoord.coordinator.runtime.loader` and the partition loop: a fenced
writer's record that lands after a valid record of the same key would, once Kafka compacts
the log (last record per key wins), erase the valid value. A loader that finds a key whose
*last* record is stale rewrites the key's valid value (or a tombstone) under its own fence
before serving; a leader that reads such records after its own marker reloads to do the same.
The topic's ``min.compaction.lag.ms`` (1 h) gives that repair time to happen before any
compaction could.
"""

from __future__ import annotations

import secrets
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError

from groupcoord.common.records import LEADER_EPOCH_TYPE_ID, TXN_MARKER_TYPE_ID
from groupcoord.coordinator.core.contract import CoordinatorRecord, serialize_record
from groupcoord.coordinator.runtime.skipped_records import IMPOSSIBLE_FENCE
from groupcoord.records.v1 import runtime_pb2

FENCE_HEADER = "gc.fence"
_MARKER_PREFIX = LEADER_EPOCH_TYPE_ID.to_bytes(2, "big")
TXN_MARKER_PREFIX = TXN_MARKER_TYPE_ID.to_bytes(2, "big")
_TAG = struct.Struct(">iQ")


@dataclass(frozen=True, slots=True)
class Fence:
    """A writer's identity on a partition: leadership epoch plus a per-load nonce."""

    epoch: int
    nonce: int

    @classmethod
    def new(cls, epoch: int) -> Fence:
        return cls(epoch, secrets.randbits(64))

    def tag(self) -> bytes:
        return _TAG.pack(self.epoch, self.nonce)

    @classmethod
    def from_tag(cls, tag: bytes) -> Fence:
        epoch, nonce = _TAG.unpack(tag)
        return cls(epoch, nonce)

    def marker(self, shard_id: str) -> tuple[bytes, bytes]:
        """The serialized marker record that announces this writer."""
        return serialize_record(
            CoordinatorRecord(
                runtime_pb2.LeaderEpochKey(epoch=self.epoch),
                runtime_pb2.LeaderEpochValue(epoch=self.epoch, nonce=self.nonce, shard_id=shard_id),
            )
        )


def _ignore(reason: str, detail: str) -> None:
    """The default of :attr:`ReplayFilter.on_skip`: skip without counting."""


def parse_marker(value: bytes) -> Fence:
    v = runtime_pb2.LeaderEpochValue.FromString(value)
    return Fence(v.epoch, v.nonce)


def fence_tag(headers: Sequence[tuple[str, bytes]]) -> bytes | None:
    """The writer's fence tag of a record (None if it carries none)."""
    for key, value in headers:
        if key == FENCE_HEADER:
            return value
    return None


class ReplayFilter:
    """Decides, record by record in log order, which records count (see module docstring)."""

    __slots__ = ("current", "current_tag", "on_skip")

    def __init__(self, on_skip: Callable[[str, str], None] | None = None) -> None:
        self.current: Fence | None = None
        self.current_tag: bytes | None = None
        #: told ``(reason, detail)`` of a record no leader can have written (see
        #: :mod:`.skipped_records`); it is neither admitted nor rejected, only skipped
        self.on_skip = on_skip or _ignore

    def see_marker(self, fence: Fence) -> bool:
        """Account for a marker; True if it became the current writer."""
        if self.current is None or fence.epoch >= self.current.epoch:
            self.current = fence
            self.current_tag = fence.tag()
            return True
        return False

    def admits(self, tag: bytes | None) -> bool:
        """Whether a data record with this fence tag is applied."""
        if self.current_tag is None or tag == self.current_tag:
            return True
        if tag is None:  # untagged records are not ours: never written by a fenced writer
            return False
        return Fence.from_tag(tag).epoch > self.current.epoch  # type: ignore[union-attr]

    def supersedes(self, fence: Fence) -> bool:
        """Whether the current marker fences a writer holding ``fence``."""
        return self.current is not None and self.current != fence and self.current.epoch >= fence.epoch

    def scan(
        self,
        chunk: Sequence[Any],
        admit: Callable[[bytes, bytes | None], None],
        reject: Callable[[bytes], None],
        *,
        strict: bool = False,
    ) -> None:
        """Walk log records in order: markers move ``current``; each data record goes to
        ``admit(key, value)`` or, if a marker before it fences its writer, ``reject(key)``.

        The one fence scan of the runtime: the loader, the standby tail and the writer's gap
        check differ only in what they do with admitted and rejected records. Loading runs it
        over millions of records, hence the fast path for the common case of a record of the
        current writer whose fence header comes first.

        ``strict``: the log read is the writer's own, after its marker (the gap check), where
        compaction cannot have removed a marker yet (``min.compaction.lag.ms``): a record of a
        newer epoch without its marker is no leader's, and is skipped rather than admitted.
        """
        prefix = _MARKER_PREFIX
        for e in chunk:
            key = e.key
            if key is None:
                continue
            if key[:2] == prefix:
                if e.value is not None:
                    try:
                        fence = parse_marker(e.value)
                    except DecodeError as exc:
                        self.on_skip(IMPOSSIBLE_FENCE, f"a leadership marker that does not parse ({exc})")
                        continue
                    if fence.epoch < 0:
                        self.on_skip(IMPOSSIBLE_FENCE, f"a leadership marker of epoch {fence.epoch}")
                        continue
                    self.see_marker(fence)
                continue
            if key[:2] == TXN_MARKER_PREFIX:  # the upstream's transaction marker: never fenced
                admit(key, e.value)
                continue
            headers = e.headers
            tag = headers[0][1] if headers and headers[0][0] == FENCE_HEADER else fence_tag(headers)
            if tag == self.current_tag:
                admit(key, e.value)
            elif tag is not None and (len(tag) != _TAG.size or tag[0] & 0x80):
                self.on_skip(IMPOSSIBLE_FENCE, f"a {FENCE_HEADER} tag of {len(tag)} bytes {tag[:12].hex()}")
            elif not self.admits(tag):
                reject(key)
            elif strict and tag is not None:
                self.on_skip(
                    IMPOSSIBLE_FENCE, f"a record of epoch {Fence.from_tag(tag).epoch} without its marker"
                )  # type: ignore[arg-type]
            else:
                admit(key, e.value)
