"""A GroupCoordinatorShard driven through KIP-848 heartbeats, like Kafka's GroupMetadataManagerTestContext.

Builds on :class:`ShardContext` (records replayed into the live shard, timers on a mock clock,
``assert_replay_equals_live``) and adds: a topics image with readable names (topic ids are
derived from name and incarnation, so a recreated topic gets a new id), heartbeats by keyword,
and views of a member's assignment by topic name.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from shard_test_context import ShardContext

from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.consumer.consumer_group import ConsumerGroup, ConsumerGroupMember
from groupcoord.coordinator.core.topics_image import TopicImage, TopicsImage
from groupcoord.rpc.v1 import consumer_group_pb2 as pb

G = "group"
REBALANCE_MS = 300_000


class ConsumerGroupContext(ShardContext):
    def __init__(self, config: GroupConfig | None = None, assignors: Mapping[str, Any] | None = None) -> None:
        super().__init__(config or GroupConfig(), assignors)
        self._incarnation: dict[str, int] = {}
        self._topics: dict[str, TopicImage] = {}
        self._push()  # a cluster without topics (the runtime delivers an image before serving)

    # --- topics ------------------------------------------------------------------------------
    def topic_id(self, name: str) -> bytes:
        return self._topics[name].topic_id

    def set_topics(self, racks: dict[str, list[list[str]]] | None = None, **partitions: int) -> Any:
        """Create or resize topics (name=partition count), push the image, apply the records."""
        for name, count in partitions.items():
            inc = self._incarnation.setdefault(name, 0)
            topic_racks = tuple(frozenset(r) for r in (racks or {}).get(name, []))
            tid = uuid.uuid5(uuid.NAMESPACE_OID, f"{name}/{inc}").bytes
            self._topics[name] = TopicImage(tid, name, count, topic_racks)
        return self._push()

    def delete_topic(self, name: str) -> Any:
        del self._topics[name]
        self._incarnation[name] = self._incarnation.get(name, 0) + 1
        return self._push()

    def recreate_topic(self, name: str, partitions: int) -> Any:
        """Delete and create again in one image change: same name, new topic id."""
        self._incarnation[name] = self._incarnation.get(name, 0) + 1
        del self._topics[name]
        return self.set_topics(**{name: partitions})

    def _push(self) -> Any:
        image = TopicsImage.of(self._topics.values())
        return self.apply(self.shard.on_metadata_update(image, self.clock.now_ms))

    # --- heartbeats --------------------------------------------------------------------------
    def heartbeat(  # type: ignore[override]
        self,
        member_id: str,
        epoch: int,
        *,
        group: str = G,
        names: list[str] | None = None,
        regex: str | None = None,
        owned: dict[str, list[int]] | None = None,
        assignor: str | None = None,
        instance_id: str | None = None,
        rack: str | None = None,
        rebalance_ms: int = -1,
        version: int = 1,
        undescribable: list[str] | None = None,
    ) -> pb.ConsumerGroupHeartbeatResponse:
        r = pb.ConsumerGroupHeartbeatRequest(
            api_version=version,
            group_id=group,
            member_id=member_id,
            member_epoch=epoch,
            rebalance_timeout_ms=rebalance_ms,
            client_id="client",
            client_host="/127.0.0.1",
        )
        if names is not None:
            r.subscribed_topic_names.SetInParent()
            r.subscribed_topic_names.names.extend(names)
        if regex is not None:
            r.subscribed_topic_regex = regex
        if undescribable is not None:  # what the gateway names when ACLs deny DESCRIBE
            r.undescribable_topics.extend(undescribable)
        if owned is not None:
            r.topic_partitions.SetInParent()
            for name, parts in owned.items():
                r.topic_partitions.topic_partitions.add(topic_id=self.topic_id(name), partitions=parts)
        if assignor is not None:
            r.server_assignor = assignor
        if instance_id is not None:
            r.instance_id = instance_id
        if rack is not None:
            r.rack_id = rack
        return self.answer(self.call("consumer_group_heartbeat", r)[0])  # type: ignore[no-any-return]

    def join(
        self, member_id: str, names: list[str] | None = None, **kw: Any
    ) -> pb.ConsumerGroupHeartbeatResponse:
        kw.setdefault("rebalance_ms", REBALANCE_MS)
        if names is None and "regex" not in kw:
            names = ["foo"]
        return self.heartbeat(member_id, 0, names=names, owned={}, **kw)

    def ack(self, member_id: str, **kw: Any) -> pb.ConsumerGroupHeartbeatResponse:
        """A heartbeat at the member's current epoch reporting what it currently has (as a
        client does once it has applied the last assignment it got)."""
        m = self.member(member_id, kw.get("group", G))
        return self.heartbeat(
            member_id, m.member_epoch, owned=self.owned(member_id, kw.get("group", G)), **kw
        )

    def describe(self, *group_ids: str, version: int = 1) -> pb.ConsumerGroupDescribeResponse:
        req = pb.ConsumerGroupDescribeRequest(api_version=version, group_ids=list(group_ids))
        return self.answer(self.call("consumer_group_describe", req)[0])  # type: ignore[no-any-return]

    # --- views -------------------------------------------------------------------------------
    def group(self, group_id: str = G) -> ConsumerGroup:
        group = self.shard.groups[group_id]
        assert isinstance(group, ConsumerGroup)
        return group

    def member(self, member_id: str, group_id: str = G) -> ConsumerGroupMember:
        return self.group(group_id).members[member_id]

    def _name(self, topic_id: bytes) -> str:
        return next(n for n, t in self._topics.items() if t.topic_id == topic_id)

    def owned(self, member_id: str, group_id: str = G) -> dict[str, list[int]]:
        """The member's assigned partitions (what its client holds after applying them)."""
        m = self.member(member_id, group_id)
        return {self._name(tid): sorted(parts) for tid, parts in m.assigned.items() if parts}

    def pending(self, member_id: str, group_id: str = G) -> dict[str, list[int]]:
        m = self.member(member_id, group_id)
        return {self._name(tid): sorted(p) for tid, p in m.pending_revocation.items() if p}

    def target(self, member_id: str, group_id: str = G) -> dict[str, list[int]]:
        t = self.group(group_id).target.get(member_id, {})
        return {self._name(tid): sorted(parts) for tid, parts in t.items() if parts}

    def assignment(self, response: pb.ConsumerGroupHeartbeatResponse) -> dict[str, list[int]] | None:
        if not response.HasField("assignment"):
            return None
        return {self._name(tp.topic_id): sorted(tp.partitions) for tp in response.assignment.topic_partitions}

    def partitions(self, member_id: str, group_id: str = G) -> list[str]:
        """The member's partitions as foo-0 strings, sorted (the KIP's notation)."""
        return sorted(f"{t}-{p}" for t, ps in self.owned(member_id, group_id).items() for p in ps)
