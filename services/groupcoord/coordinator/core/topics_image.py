"""The cluster's topics as the consumer group core sees them: an immutable input, never state.

KIP-848 assignment needs, per subscribed topic, its id, partition count and partition racks,
and a rebalance when any of them change. The runtime reads them from the upstream cluster and
hands the shard a new :class:`TopicsImage` (``GroupCoordinatorShard.on_metadata_update``);
the core only compares images and hashes the subscribed part of one, so the image itself is
not written to the state topic (Kafka 4.x does the same with its metadata hash).

Topic ids are 16-byte ``bytes``: a topic deleted and recreated under the same name has a new
id and is a new topic (its partitions are new partitions).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from groupcoord.common.partitioning import DEFAULT_METRICS_TOPIC, DEFAULT_STATE_TOPIC

# The coordinator's own topics under their default names: what an image hides from regular
# expressions unless it is told the names in use (``TopicsImage.of(..., hidden=...)``). Kafka's
# internal topics (``__consumer_offsets``, ...) are not among them: Kafka 4.4 matches those like
# any topic, and so do we. Ours stay hidden, as the gateway marks them internal: a regex like
# ``.*`` must not make a consumer read and commit the coordinator's state.
COORDINATOR_TOPICS = frozenset({DEFAULT_STATE_TOPIC, DEFAULT_METRICS_TOPIC})


@dataclass(frozen=True, slots=True)
class TopicImage:
    topic_id: bytes
    name: str
    num_partitions: int
    # partition -> racks of its replicas; empty when the brokers have no racks.
    partition_racks: tuple[frozenset[str], ...] = ()

    def racks(self, partition: int) -> frozenset[str]:
        if partition < len(self.partition_racks):
            return self.partition_racks[partition]
        return frozenset()

    @property
    def has_racks(self) -> bool:
        return any(self.partition_racks)


MEMO_ENTRIES = 65_536
"""Answers an image remembers at most (:meth:`TopicsImage.subscription_ids` per distinct
subscription, :meth:`TopicsImage.metadata_hash`'s bytes per topic); past it the memo starts
again, so a stream of ever new subscriptions costs recomputation, never unbounded memory."""

HASH_MEMO_MIN_TOPICS = 64
"""Subscriptions of this many topics or more have their whole metadata hash remembered (a
join or leave of a group subscribed to 1,000 topics spent 1.2 ms of the loop hashing them);
a smaller one is hashed from its topics' remembered bytes each time."""

HASH_MEMO_ENTRIES = 32
"""Such whole hashes an image remembers at most: each holds its topic names, so they are few."""


@dataclass(frozen=True, slots=True)
class TopicsImage:
    """Topics by id and by name. Build with :meth:`of`; treat as immutable.

    An image remembers what it computed about subscriptions (``_memo``): the answers depend on
    the image alone, and the image lives until the topics change, so a group's heartbeats stop
    recomputing them. Measured with ``bench/run.py assignment-offload`` (1,000 members each
    subscribed to 20 of 1,000 topics of 50 partitions): the topic ids of every member's
    subscription were 64 % of the partition loop's time for a membership change, before any
    assignor ran, and the metadata hash walked all 50,000 partitions' racks on every join."""

    by_id: Mapping[bytes, TopicImage] = field(default_factory=lambda: MappingProxyType({}))
    by_name: Mapping[str, TopicImage] = field(default_factory=lambda: MappingProxyType({}))
    # names no regular expression matches: the coordinator's own topics (see COORDINATOR_TOPICS)
    hidden: frozenset[str] = COORDINATOR_TOPICS
    # Memoized answers, see the class docstring: not part of the image's value. A race
    # between the loop and an offload thread at worst computes one answer twice.
    _memo: dict[Any, Any] = field(default_factory=dict, init=False, compare=False, repr=False)
    _hashes: dict[frozenset[str], int] = field(default_factory=dict, init=False, compare=False, repr=False)

    def __copy__(self) -> TopicsImage:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> TopicsImage:
        """Immutable: every copy is this image (a ``MappingProxyType`` cannot be deep-copied,
        so no path to an image may make a copy of the state raise)."""
        return self

    @classmethod
    def of(cls, topics: Iterable[TopicImage], hidden: frozenset[str] = COORDINATOR_TOPICS) -> TopicsImage:
        by_id: dict[bytes, TopicImage] = {}
        by_name: dict[str, TopicImage] = {}
        for t in topics:
            if len(t.topic_id) != 16:
                raise ValueError(f"topic id of {t.name} must be 16 bytes")
            by_id[t.topic_id] = t
            by_name[t.name] = t
        return cls(MappingProxyType(by_id), MappingProxyType(by_name), hidden)

    @classmethod
    def from_descriptions(
        cls, descriptions: Iterable[object], hidden: frozenset[str] = COORDINATOR_TOPICS
    ) -> TopicsImage:
        """From the shard's ``TopicDescription`` objects (name, topic_id UUID, partitions,
        partition_racks), the runtime's metadata refresher output; ``hidden``: the names of
        the coordinator's own topics."""
        out = []
        for d in descriptions:
            topic_id = d.topic_id  # type: ignore[attr-defined]
            raw = topic_id.bytes if isinstance(topic_id, uuid.UUID) else bytes(topic_id)
            racks = tuple(frozenset(r) for r in d.partition_racks)  # type: ignore[attr-defined]
            out.append(TopicImage(raw, d.name, int(d.partitions), racks))  # type: ignore[attr-defined]
        return cls.of(out, hidden)

    def topic(self, topic_id: bytes) -> TopicImage | None:
        return self.by_id.get(topic_id)

    def topic_id(self, name: str) -> bytes | None:
        t = self.by_name.get(name)
        return None if t is None else t.topic_id

    def topic_name(self, topic_id: bytes) -> str | None:
        t = self.by_id.get(topic_id)
        return None if t is None else t.name

    def partitions_by_name(self, partitions: Mapping[bytes, Iterable[int]]) -> dict[str, list[int]]:
        """Partitions by topic id → by topic name, sorted (the classic consumer protocol's
        form); topics the image does not know, and empty ones, are left out."""
        out: dict[str, list[int]] = {}
        for topic_id in sorted(partitions):
            name = self.topic_name(topic_id)
            parts = sorted(partitions[topic_id])
            if name is not None and parts:
                out[name] = parts
        return out

    def subscription_ids(
        self, names: tuple[str, ...], resolved: frozenset[str] | None = None
    ) -> frozenset[bytes]:
        """The ids of the topics a member subscribes to (``names``, and the topics its regex
        resolved to) that this image has. The same subscription gets the same object, which
        makes an assignor's homogeneity check an identity comparison."""
        key = (names, resolved)
        ids = self._memo.get(key)
        if ids is None:
            wanted = set(names) if resolved is None else set(names) | resolved
            by_name = self.by_name
            ids = frozenset(by_name[n].topic_id for n in wanted if n in by_name)
            self._remember(key, ids)
        return ids

    def _remember(self, key: object, value: object) -> None:
        if len(self._memo) >= MEMO_ENTRIES:
            self._memo.clear()
        self._memo[key] = value

    def num_partitions(self, topic_id: bytes) -> int:
        t = self.by_id.get(topic_id)
        return -1 if t is None else t.num_partitions

    def names(self) -> Iterable[str]:
        return self.by_name.keys()

    def deleted_in(self, newer: TopicsImage) -> frozenset[str]:
        """Names of this image's topics whose id ``newer`` no longer has: deleted, or deleted
        and recreated under the same name (a new topic, whose partitions are new partitions)."""
        return frozenset(t.name for topic_id, t in self.by_id.items() if topic_id not in newer.by_id)

    def metadata_hash(self, topic_names: Iterable[str]) -> int:
        """A stable 63-bit hash of the named topics' ids, partition counts and racks (topics
        that do not exist contribute nothing): equal hashes = nothing an assignor sees changed.
        """
        names = frozenset(topic_names)
        if len(names) < HASH_MEMO_MIN_TOPICS:
            return self._metadata_hash(names)
        hashed = self._hashes.get(names)
        if hashed is None:
            hashed = self._metadata_hash(names)
            if len(self._hashes) >= HASH_MEMO_ENTRIES:
                self._hashes.clear()
            self._hashes[names] = hashed
        return hashed

    def _metadata_hash(self, names: frozenset[str]) -> int:
        h = hashlib.blake2b(digest_size=8)
        for name in sorted(names):
            hashed = self._hashed(name)
            if hashed:
                h.update(hashed)
        return int.from_bytes(h.digest(), "big") >> 1

    def _hashed(self, name: str) -> bytes:
        """What :meth:`metadata_hash` feeds its digest for one topic (nothing for a topic the
        image lacks), remembered: a topic's racks are walked once per image, not per join."""
        key = ("hashed", name)
        hashed = self._memo.get(key)
        if hashed is None:
            t = self.by_name.get(name)
            if t is None:
                hashed = b""
            else:
                parts = [name.encode(), b"\0", t.topic_id, t.num_partitions.to_bytes(4, "big")]
                for racks in t.partition_racks:
                    parts += (",".join(sorted(racks)).encode(), b";")
                hashed = b"".join(parts)
            self._remember(key, hashed)
        return hashed


UNKNOWN_IMAGE = TopicsImage()
"""What a shard has before the runtime delivered its first image (e.g. right after a takeover).
Not the same as an empty cluster: assigning against it would revoke every partition, so the
consumer group core answers COORDINATOR_LOAD_IN_PROGRESS (retriable) until a real image comes."""
