"""Topic metadata for the group coordinator's shards, read from the upstream Kafka cluster.

KIP-848 assignment needs each subscribed topic's id, partition count and partition racks, and
rebalances when any of them change (partitions added, topic deleted or recreated with a new
id). Each worker process polls the cluster's Metadata (v12, which carries topic ids) every few
seconds and hands every partition it leads the new image through the partition's loop
(``on_metadata_update``, a write operation), so the change is processed like any request:
records first. Only shards that need the cluster's topics get it (a
:class:`TopicMetadataShard`, the group coordinator's); the runtime itself never calls the hook.

Kafka's coordinator reads the broker's own metadata image, which has a topic the moment it is
created; a poll every few seconds would make a member that subscribes to a new topic wait for
the next one (1.6-2.6 s to its assignment where Kafka takes 0.6 s). So a request that names a
topic the image lacks can ask for a fetch at once (:meth:`TopicMetadataRefresher.lacking`) and
run after the new image reached its partition.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from groupcoord.common.kafka_wire.exchange import ExchangeFailed, exchange
from groupcoord.coordinator.core.contract import CoordinatorResult, CoordinatorShard, write_operation

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    topic_id: uuid.UUID
    partitions: int
    # partition -> racks of its replicas (empty when brokers have no rack)
    partition_racks: tuple[tuple[str, ...], ...]


async def fetch_topics(bootstrap: str, timeout_s: float = 10.0) -> list[TopicDescription]:
    """All topics of the cluster (internal ones too; the shards filter by subscription), from
    the first of the ``bootstrap`` addresses that answers: a crashed broker leaves the others."""
    from kio.schema.metadata.v12.request import MetadataRequest  # noqa: PLC0415

    request = MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    addresses = [entry.strip().rpartition(":") for entry in bootstrap.split(",") if entry.strip()]
    for i, (host, _, port) in enumerate(addresses):
        try:
            body = await exchange((host, int(port)), request, "groupcoord-shard", timeout_s)
            break
        except ExchangeFailed:
            if i == len(addresses) - 1:
                raise
    racks = {int(b.node_id): b.rack for b in body.brokers}
    out = []
    for t in body.topics:
        if t.topic_id is None or int(t.error_code.value) != 0 or t.name is None:
            continue
        by_partition = {int(p.partition_index): p for p in t.partitions}
        count = max(by_partition, default=-1) + 1
        partition_racks = tuple(
            tuple(sorted({racks[int(r)] for r in by_partition[i].replica_nodes if racks.get(int(r))}))
            if i in by_partition
            else ()
            for i in range(count)
        )
        out.append(TopicDescription(t.name, t.topic_id, count, partition_racks))
    return sorted(out, key=lambda d: d.name)


class TopicMetadataRefresher:
    """Keeps every active partition of a worker on the latest topic image.

    ``build_image`` turns the descriptions into the shards' image type; ``active`` lists the
    partitions to feed, each with the id of its load (a partition that loads again, at a new
    epoch or at the same one after a failure, is a fresh shard without an image); and
    ``deliver(partition, image)`` submits the update to a partition's loop, returning its
    future. A partition that starts leading (or loads again) gets the current image on the
    next tick, and one whose delivery failed gets it again.
    """

    def __init__(
        self,
        bootstrap: str,
        build_image: Callable[[list[TopicDescription]], Any],
        active: Callable[[], list[tuple[int, int]]],
        deliver: Callable[[int, Any], asyncio.Future[Any] | None],
        interval_s: float = 3.0,
        tick_s: float = 0.2,
        early_gap_s: float = 0.5,
    ) -> None:
        self.bootstrap = bootstrap
        self.build_image = build_image
        self.active = active
        self.deliver = deliver
        self.interval_s = interval_s
        self.tick_s = tick_s
        # A name an early fetch did not find is not looked for early again for this long (a
        # subscription to a topic that does not exist yet waits for the poll); and one early
        # fetch at a time, shared by every request that waits: what requests naming missing
        # topics cost the upstream is one Metadata request in flight per worker at most.
        self.early_gap_s = early_gap_s
        self.image: Any = None
        self._descriptions: list[TopicDescription] | None = None
        self._names: frozenset[str] = frozenset()
        self._ids: frozenset[bytes] = frozenset()
        self._fetching: asyncio.Future[None] | None = None  # the early fetch under way, shared
        # name or id -> loop time an early fetch did not find it
        self._missing: dict[str | bytes, float] = {}
        self._version = 0
        self._sent: dict[int, tuple[int, int]] = {}  # partition -> (its load, image version)

    async def refresh(self) -> bool:
        """Fetch once; True when the topics changed."""
        descriptions = await fetch_topics(self.bootstrap)
        if descriptions == self._descriptions:
            return False
        self._descriptions = descriptions
        self._names = frozenset(d.name for d in descriptions)
        self._ids = frozenset(d.topic_id.bytes for d in descriptions)
        self.image = self.build_image(descriptions)
        self._version += 1
        return True

    def lacking(self, names: Collection[str], ids: Collection[bytes] = ()) -> Awaitable[None] | None:
        """None when the image has every topic of ``names`` and of ``ids`` (16-byte topic ids);
        otherwise a fetch now (or the one under way), whose new image is pushed to the
        partitions before the awaitable ends: a request submitted after it sees the topics.
        None, too, when every missing one was not found by an early fetch less than
        ``early_gap_s`` ago (it does not exist yet: the poll will find it)."""
        if self.image is None:
            return None
        absent = [n for n in names if n not in self._names] + [i for i in ids if i not in self._ids]
        if not absent:
            return None
        loop = asyncio.get_running_loop()
        now = loop.time()
        if all(now - self._missing.get(key, -self.early_gap_s) < self.early_gap_s for key in absent):
            return None
        if self._fetching is None:
            self._fetching = loop.create_task(self._fetch_and_push(set(absent)))
        return asyncio.shield(self._fetching)

    async def _fetch_and_push(self, absent: set[str | bytes]) -> None:
        try:
            await self.refresh()
        finally:
            self._fetching = None
            now = asyncio.get_running_loop().time()
            self._missing = {key: t for key, t in self._missing.items() if now - t < self.early_gap_s}
            self._missing.update((key, now) for key in absent - self._names - self._ids)
        self.push()

    def push(self) -> None:
        """Give the current image to every active partition that has not had it yet."""
        if self.image is None:
            return
        for partition, load in self.active():
            sent = (load, self._version)
            if self._sent.get(partition) != sent:
                self._sent[partition] = sent
                delivered = self.deliver(partition, self.image)
                if delivered is not None:
                    delivered.add_done_callback(lambda f, p=partition, s=sent: self._delivered(p, s, f))

    def _delivered(self, partition: int, sent: tuple[int, int], future: asyncio.Future[Any]) -> None:
        """A delivery the partition refused (it was failing or reloading) is sent again. Its
        load keeps its place: that load had its fetch, and the next push resends the image
        without another (a refusing partition would otherwise fetch metadata every tick)."""
        if (future.cancelled() or future.exception() is not None) and self._sent.get(partition) == sent:
            self._sent[partition] = (sent[0], -1)

    def _loads_waiting(self) -> bool:
        """Whether a partition started leading (or loaded again) since its last image."""
        return any(self._sent.get(partition, (None, 0))[0] != load for partition, load in self.active())

    async def run(self) -> None:
        """Poll and push until cancelled (a worker-lifetime task). A partition that just loaded
        gets an image fetched after its load, not the last poll's: the state it loaded may name
        topics created since (a share group's dead letters name their source topic by the
        image, and a predecessor's copies are told apart by that name)."""
        loop = asyncio.get_running_loop()
        next_fetch = 0.0
        while True:
            if loop.time() >= next_fetch or self._loads_waiting():
                try:
                    await self.refresh()
                except Exception as exc:  # noqa: BLE001 - keep the last image; retry next tick
                    log.warning("topic metadata refresh failed: %s", exc)
                next_fetch = loop.time() + self.interval_s
            self.push()
            await asyncio.sleep(self.tick_s)


ImageT = TypeVar("ImageT")


class TopicMetadataShard(CoordinatorShard, Protocol[ImageT]):
    """A coordinator shard that follows the cluster's topics (the group coordinator's, for
    KIP-848 assignment): what :func:`follow_topics` feeds. Not part of the runtime's contract,
    which hosts shards that know nothing of topics."""

    def on_metadata_update(self, image: ImageT, now_ms: int) -> CoordinatorResult[None]:
        """The cluster's topics changed (Kafka's ``onNewMetadataImage``): the image is input,
        not state, so it reaches both replicas (see ``PartitionRuntime.submit``)."""


def follow_topics(
    runtime: Any, build_image: Callable[[list[TopicDescription]], ImageT]
) -> TopicMetadataRefresher:
    """A refresher feeding ``on_metadata_update`` to every partition ``runtime`` leads (a
    :class:`~groupcoord.coordinator.runtime.worker_runtime.WorkerRuntime` whose shards are
    :class:`TopicMetadataShard` of ``build_image``'s type); run its ``run()`` as a task."""

    def update_of(image: ImageT) -> Callable[[TopicMetadataShard[ImageT], int, Any], CoordinatorResult[None]]:
        return lambda shard, now_ms, _: shard.on_metadata_update(image, now_ms)

    def deliver(partition: int, image: ImageT) -> asyncio.Future[Any]:
        update = write_operation("on_metadata_update", update_of(image))
        return runtime.submit(partition, update, every_replica=True)  # type: ignore[no-any-return]  # reads use the image too

    return TopicMetadataRefresher(runtime.bootstrap, build_image, runtime.loaded_partitions, deliver)
