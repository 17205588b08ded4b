"""Moving committed offsets between the upstream cluster's own coordinator and groupcoord:
``groupcoord groups import`` (upstream → gateway) and ``groupcoord groups export`` (gateway →
upstream), for adopting a cluster's groups in bulk and for leaving again.

Both are ordinary Kafka clients of both sides, with the operator's own rights on each
(``--command-config`` for the gateway, ``--upstream-command-config`` for the brokers): they read
a group's committed offsets on one side (OffsetFetch) and write them on the other as an admin
commit (no member, generation -1, as ``AdminClient.alterConsumerGroupOffsets``), which Kafka
accepts for a group without members. A group is moved only while it has no live members on
either side, the rule of ``reset-offsets``: its members would commit over the copy, or be
refused. Offsets pending in an open transaction are not read (OffsetFetch answers the stable
ones): the upstream's transaction coordinator decides them first, and the next run copies
them. Metadata strings are not copied (the admin commit writes ""). Dry run by default.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aiokafka.structs import TopicPartition

from groupcoord.admin.consumer_groups import ConsumerGroupsAdmin
from groupcoord.common.kafka_wire.exchange import exchange
from groupcoord.common.upstream_groups import Address, UpstreamGroup, api_versions, read_group, serves_kip848


class Side:
    """One cluster, as the transfer reads it: its groups through kio (the reader the gateway's
    adoption uses, ``common/upstream_groups.py``: require_stable, every partition's offset),
    its commits through the admin client."""

    def __init__(self, admin: ConsumerGroupsAdmin, name: str) -> None:
        self.admin = admin
        self.name = name
        host, _, port = admin.bootstrap.split(",")[0].strip().rpartition(":")
        self.bootstrap: Address = (host or "127.0.0.1", int(port))
        self._kip848: bool | None = None

    async def ask(self, address: Address | None, body: Any) -> Any:
        admin = self.admin
        return await exchange(address or self.bootstrap, body, admin.client_id, admin.timeout_s, admin.security)

    async def group(self, group_id: str) -> UpstreamGroup:
        if self._kip848 is None:
            self._kip848 = serves_kip848(await api_versions(self.ask))
        return await read_group(self.ask, group_id, kip848=self._kip848)


@dataclass
class Transfer:
    """One group's move: the offsets read on the source (and written, with ``--execute``), or
    why it was not moved."""

    group: str
    offsets: dict[TopicPartition, int] = field(default_factory=dict)
    error: str | None = None


async def transfer(source: Side, target: Side, group_ids: list[str], *, execute: bool) -> list[Transfer]:
    """Each group of ``group_ids`` moved from ``source`` to ``target`` (or only planned)."""
    moves: list[Transfer] = []
    for group_id in group_ids:
        move = Transfer(group_id)
        moves.append(move)
        there, here = await source.group(group_id), await target.group(group_id)
        if there.live:
            move.error = (
                f"group '{group_id}' is {there.state} on {source.name}: its members still "
                "commit there; stop them (or move them) first"
            )
            continue
        if here.live:
            move.error = (
                f"Assignments can only be reset if the group '{group_id}' is inactive, "
                f"but the current state is {here.state} on {target.name}."
            )
            continue
        if there.unstable:
            move.error = (
                f"group '{group_id}' has offsets pending in an open transaction on {source.name}: "
                "run again once it is decided"
            )
        move.offsets = dict(sorted((TopicPartition(o.topic, o.partition), o.offset) for o in there.offsets))
        if execute and move.offsets:
            await target.admin.commit(group_id, move.offsets)
    return moves
