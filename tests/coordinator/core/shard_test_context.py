"""A GroupCoordinatorShard driven like Kafka's GroupMetadataManagerTestContext.

Every call's records are serialized into a :class:`RecordLog` and replayed into the live shard
(as the runtime does) and the timer intents applied to a :class:`MockTimer`, which runs them on a
:class:`MockClock`; answers to waiting requests
(completions) are collected per token, so a test reads "member A's JoinGroup got ...".
``replayed()`` rebuilds a second shard from the log alone for replay == live checks.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from mock_timer import MockClock, MockTimer

from groupcoord.coordinator.core.classic.classic_group import ClassicGroup
from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.contract import (
    PENDING,
    CoordinatorRecord,
    CoordinatorResult,
    apply_timer_intents,
    deserialize_record,
    serialize_record,
)
from groupcoord.coordinator.core.group_coordinator_shard import GroupCoordinatorShard
from groupcoord.rpc.v1 import classic_group_pb2 as pb
from groupcoord.rpc.v1 import offsets_pb2 as opb

TOKEN_APIS = {"join_group", "sync_group"}


class RecordLog:
    """The records a test has written, serialized exactly as the state topic would hold them."""

    def __init__(self) -> None:
        self.entries: list[tuple[bytes, bytes | None]] = []

    def append(self, records: list[CoordinatorRecord]) -> None:
        self.entries.extend(serialize_record(r) for r in records)

    def records(self) -> list[CoordinatorRecord]:
        return [deserialize_record(k, v) for k, v in self.entries]


class ShardContext:
    def __init__(self, config: GroupConfig | None = None, assignors: Mapping[str, Any] | None = None) -> None:
        self.config = config or GroupConfig(classic_group_initial_rebalance_delay_ms=0)
        self.clock = MockClock()
        self.timer = MockTimer(self.clock)
        self.shard = GroupCoordinatorShard(self.timer, self.config, assignors=assignors)
        self.log = RecordLog()
        self.answers: dict[str, Any] = {}
        self._tokens = itertools.count()

    # --- driving -----------------------------------------------------------------------------
    def apply(self, result: CoordinatorResult[Any]) -> CoordinatorResult[Any]:
        """What the runtime does with a result: timer intents first, then the records."""
        apply_timer_intents(self.timer, result.timers)
        self.log.append(result.records)
        for record in result.records:
            self.shard.replay(record)
        for token, response in result.completions:
            assert token not in self.answers, f"{token} answered twice"
            self.answers[token] = response
        return result

    def call(self, api: str, request: Any) -> tuple[str, CoordinatorResult[Any]]:
        """Run one request; returns its token (its answer lands in ``answers``) and the result."""
        token = f"{api}-{next(self._tokens)}"
        handler = getattr(self.shard, api)
        if api in TOKEN_APIS:
            result = handler(request, self.clock.now_ms, token=token)
        else:
            result = handler(request, self.clock.now_ms)
        self.apply(result)
        if result.response is not PENDING:
            self.answers[token] = result.response
        return token, result

    def advance(self, ms: int) -> None:
        """Move the clock and run every timer that comes due, in deadline order."""
        target = self.clock.now_ms + ms
        while True:
            for _key, operation in self.timer.pop_expired():
                self.apply(operation())
            deadline = self.timer.next_deadline()
            if deadline is None or deadline > target:
                break
            self.clock.now_ms = max(self.clock.now_ms, deadline)
        self.clock.now_ms = target

    def answer(self, token: str) -> Any:
        return self.answers.get(token)

    def set_group_configs(self, group_id: str, **configs: str) -> None:
        """Set a group's dynamic configs (``share_session_timeout_ms="50000"`` for
        ``share.session.timeout.ms``), as IncrementalAlterConfigs SET does."""
        from groupcoord.rpc.v1 import group_admin_pb2 as apb  # noqa: PLC0415

        request = apb.AlterGroupConfigsRequest(api_version=1, group_id=group_id)
        for name, value in configs.items():
            request.configs.add(name=name.replace("_", "."), value=value, config_operation=0)
        assert self.answer(self.call("alter_group_configs", request)[0]).error_code == 0

    # --- replay ------------------------------------------------------------------------------
    def replayed(self) -> GroupCoordinatorShard:
        fresh = GroupCoordinatorShard(MockTimer(MockClock()), self.config)
        for record in self.log.records():
            fresh.replay(record)
        return fresh

    def assert_replay_equals_live(self) -> None:
        fresh = self.replayed()
        assert fresh.groups == self.shard.groups
        assert fresh.data.offsets == self.shard.data.offsets
        assert fresh.data.group_configs == self.shard.data.group_configs
        assert fresh.data.share_partitions == self.shard.data.share_partitions
        assert fresh.data.adoptions == self.shard.data.adoptions

    def classic(self, group_id: str) -> ClassicGroup:
        group = self.shard.groups[group_id]
        assert isinstance(group, ClassicGroup)
        return group

    # --- classic requests --------------------------------------------------------------------
    def join(
        self,
        group_id: str,
        member_id: str = "",
        *,
        protocols: list[tuple[str, bytes]] | None = None,
        protocol_type: str = "consumer",
        instance_id: str | None = None,
        version: int = 9,
        session_ms: int = 10_000,
        rebalance_ms: int = 30_000,
        client_id: str = "client",
    ) -> str:
        request = pb.JoinGroupRequest(
            api_version=version,
            group_id=group_id,
            member_id=member_id,
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms,
            protocol_type=protocol_type,
            protocols=[
                pb.JoinGroupProtocol(name=n, metadata=m)
                for n, m in (protocols if protocols is not None else [("range", b"")])
            ],
            client_id=client_id,
            client_host="/127.0.0.1",
        )
        if instance_id is not None:
            request.group_instance_id = instance_id
        return self.call("join_group", request)[0]

    def join_dynamic(self, group_id: str, **kw: Any) -> str:
        """KIP-394's two steps: get a member id (MEMBER_ID_REQUIRED), join with it."""
        first = self.answer(self.join(group_id, **kw))
        assert first.error_code == 79, first
        return self.join(group_id, first.member_id, **kw)

    def sync(
        self,
        group_id: str,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        *,
        instance_id: str | None = None,
    ) -> str:
        request = pb.SyncGroupRequest(
            api_version=5,
            group_id=group_id,
            member_id=member_id,
            generation_id=generation,
            assignments=[
                pb.SyncGroupAssignment(member_id=m, assignment=a) for m, a in (assignments or {}).items()
            ],
        )
        if instance_id is not None:
            request.group_instance_id = instance_id
        return self.call("sync_group", request)[0]

    def heartbeat(
        self, group_id: str, member_id: str, generation: int, instance_id: str | None = None
    ) -> int:
        request = pb.HeartbeatRequest(
            api_version=4, group_id=group_id, member_id=member_id, generation_id=generation
        )
        if instance_id is not None:
            request.group_instance_id = instance_id
        return self.answer(self.call("heartbeat", request)[0]).error_code

    def leave(
        self, group_id: str, *members: tuple[str, str | None], version: int = 5
    ) -> pb.LeaveGroupResponse:
        request = pb.LeaveGroupRequest(api_version=version, group_id=group_id)
        for member_id, instance_id in members:
            m = request.members.add(member_id=member_id)
            if instance_id is not None:
                m.group_instance_id = instance_id
        return self.answer(self.call("leave_group", request)[0])

    def form_group(self, group_id: str, n: int, **kw: Any) -> tuple[list[str], int]:
        """n dynamic members join and sync; returns their ids (leader first) and the generation."""
        tokens = [self.join_dynamic(group_id, **kw) for _ in range(n)]
        self.advance(0)
        responses = [self.answer(t) for t in tokens]
        assert all(r is not None and r.error_code == 0 for r in responses), responses
        generation = responses[0].generation_id
        leader = responses[0].leader
        ids = [r.member_id for r in responses]
        ids.sort(key=lambda m: m != leader)
        sync_tokens = [self.sync(group_id, m, generation) for m in ids[1:]]
        self.sync(group_id, leader, generation, {m: m.encode() for m in ids})
        assert all(self.answer(t).error_code == 0 for t in sync_tokens)
        return ids, generation

    # --- offsets -----------------------------------------------------------------------------
    def commit(
        self,
        group_id: str,
        offsets: dict[tuple[str, int], int],
        *,
        member_id: str = "",
        generation: int = -1,
        instance_id: str | None = None,
        version: int = 9,
        metadata: str = "",
        retention_ms: int = -1,
    ) -> dict[tuple[str, int], int]:
        """Commit offsets; returns the error code per (topic, partition)."""
        request = opb.OffsetCommitRequest(
            api_version=version,
            group_id=group_id,
            member_id=member_id,
            generation_id_or_member_epoch=generation,
            retention_time_ms=retention_ms,
        )
        if instance_id is not None:
            request.group_instance_id = instance_id
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append((partition, offset))
        for topic, parts in by_topic.items():
            t = request.topics.add(name=topic)
            for partition, offset in parts:
                t.partitions.add(
                    partition_index=partition,
                    committed_offset=offset,
                    committed_leader_epoch=-1,
                    committed_metadata=metadata,
                )
        response = self.answer(self.call("offset_commit", request)[0])
        return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}

    def fetch(
        self, group_id: str, partitions: list[tuple[str, int]] | None = None
    ) -> dict[tuple[str, int], int]:
        """Committed offsets of a group (all of them when ``partitions`` is None)."""
        request = opb.OffsetFetchRequest(api_version=9)
        g = request.groups.add(group_id=group_id, member_epoch=-1, all_topics=partitions is None)
        for topic, partition in partitions or []:
            match = [t for t in g.topics if t.name == topic]
            (match[0] if match else g.topics.add(name=topic)).partition_indexes.append(partition)
        response = self.answer(self.call("offset_fetch", request)[0])
        (rg,) = response.groups
        assert rg.error_code == 0, rg
        return {(t.name, p.partition_index): p.committed_offset for t in rg.topics for p in t.partitions}
