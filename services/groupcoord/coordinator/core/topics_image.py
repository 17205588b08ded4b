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

from groupcoord.common.partitioning import DEFAULT_METRICS_TOPIC, DEFAULT_STATE_TOPIC

# Topics no regular expression subscription ever matches: Kafka's internal topics, and the
# coordinator's own under their default names (the gateway marks them internal too; a regex
# like ``.*`` must not make a consumer read and commit the coordinator's state).
INTERNAL_TOPICS = frozenset(
    {
        "__consumer_offsets",
        "__transaction_state",
        "__share_group_state",
        DEFAULT_STATE_TOPIC,
        DEFAULT_METRICS_TOPIC,
    }
)


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


@dataclass(frozen=True, slots=True)
class TopicsImage:
    """Topics by id and by name. Build with :meth:`of`; treat as immutable."""

    by_id: Mapping[bytes, TopicImage] = field(default_factory=lambda: MappingProxyType({}))
    by_name: Mapping[str, TopicImage] = field(default_factory=lambda: MappingProxyType({}))

    def __copy__(self) -> TopicsImage:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> TopicsImage:
        """Immutable: every copy is this image (a ``MappingProxyType`` cannot be deep-copied,
        so no path to an image may make a copy of the state raise)."""
        return self

    @classmethod
    def of(cls, topics: Iterable[TopicImage]) -> TopicsImage:
        by_id: dict[bytes, TopicImage] = {}
        by_name: dict[str, TopicImage] = {}
        for t in topics:
            if len(t.topic_id) != 16:
                raise ValueError(f"topic id of {t.name} must be 16 bytes")
            by_id[t.topic_id] = t
            by_name[t.name] = t
        return cls(MappingProxyType(by_id), MappingProxyType(by_name))

    @classmethod
    def from_descriptions(cls, descriptions: Iterable[object]) -> TopicsImage:
        """From the shard's ``TopicDescription`` objects (name, topic_id UUID, partitions,
        partition_racks), the runtime's metadata refresher output."""
        out = []
        for d in descriptions:
            topic_id = d.topic_id  # type: ignore[attr-defined]
            raw = topic_id.bytes if isinstance(topic_id, uuid.UUID) else bytes(topic_id)
            racks = tuple(frozenset(r) for r in d.partition_racks)  # type: ignore[attr-defined]
            out.append(TopicImage(raw, d.name, int(d.partitions), racks))  # type: ignore[attr-defined]
        return cls.of(out)

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
        h = hashlib.blake2b(digest_size=8)
        for name in sorted(set(topic_names)):
            t = self.by_name.get(name)
            if t is None:
                continue
            h.update(name.encode())
            h.update(b"\0")
            h.update(t.topic_id)
            h.update(t.num_partitions.to_bytes(4, "big"))
            for racks in t.partition_racks:
                h.update(",".join(sorted(racks)).encode())
                h.update(b";")
        return int.from_bytes(h.digest(), "big") >> 1


UNKNOWN_IMAGE = TopicsImage()
"""What a shard has before the runtime delivered its first image (e.g. right after a takeover).
Not the same as an empty cluster: assigning against it would revoke every partition, so the
consumer group core answers COORDINATOR_LOAD_IN_PROGRESS (retriable) until a real image comes."""
