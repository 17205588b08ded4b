"""The group coordinator shard's operations: one per group API, from the envelope's oneof
field to the typed operation that runs on the partition's shard.

Derived from the group APIs' declarations (:mod:`groupcoord.common.group_api_declarations`):
each API's shard handler is registered here against its declaration, which names the field
and says whether the operation reads or writes; a registration without a declaration, or a
declaration without one, fails at import. The table belongs to the shard, not to the server
that dispatches envelopes (``coordinator/server/envelopes.py`` knows no API): what an API does
on the shard, and what its answer tells the metrics (``answered``), is said here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from groupcoord.common.group_api_declarations import GATEWAY_OPERATIONS, SHARD_APIS, GroupApi, registered
from groupcoord.common.kafka_wire.api_keys import ApiKey
from groupcoord.coordinator.core.contract import (
    CoordinatorOperation,
    CoordinatorResult,
    Token,
    read_operation,
    write_operation,
)
from groupcoord.coordinator.core.group_coordinator_shard import GroupCoordinatorShard
from groupcoord.coordinator.core.share.delivery import count_delivery

Operation = Callable[[Any], CoordinatorOperation[GroupCoordinatorShard, Any]]


@dataclass(frozen=True, slots=True)
class ShardHandler:
    """What a group API's operation does on the partition's coordinator shard: ``run(shard,
    request, now_ms, token)``; for a write, ``needs_markers(shard, request)`` when it must first
    see every transaction marker already in the log; ``answered(sink, response)`` when its
    answer tells the metrics what it did (see :class:`CoordinatorOperation`)."""

    run: Callable[[GroupCoordinatorShard, Any, int, Token], CoordinatorResult[Any]]
    needs_markers: Callable[[GroupCoordinatorShard, Any], bool] | None = None
    answered: Callable[[Any, Any], None] | None = None


def _operation(api: GroupApi, handler: ShardHandler) -> tuple[str, Operation]:
    """(oneof field, operation of one request) for ``api``: named and made a read or a write as
    declared (Kafka's ``scheduleReadOperation`` / ``scheduleWriteOperation``)."""
    if api.operation is None:
        raise ValueError(f"{api.key.name} is declared without a shard operation")
    name, run, needs_markers, answered = api.operation.name, handler.run, handler.needs_markers, handler.answered
    if api.operation.read_only:
        if needs_markers is not None:  # a read never waits on the log: the declaration is wrong
            raise ValueError(f"{api.key.name} is declared read-only but its handler needs markers")
        return name, lambda r: read_operation(name, lambda s, now, token: run(s, r, now, token), answered)
    if needs_markers is None:
        return name, lambda r: write_operation(name, lambda s, now, token: run(s, r, now, token), None, answered)
    return name, lambda r: write_operation(
        name, lambda s, now, token: run(s, r, now, token), lambda s: needs_markers(s, r), answered
    )


OPERATIONS: dict[str, Operation] = dict(
    _operation(api, handler)
    for api, handler in registered(
        "shard operation",
        {
            ApiKey.OFFSET_COMMIT: ShardHandler(lambda s, r, now, _: s.offset_commit(r, now)),
            ApiKey.OFFSET_FETCH: ShardHandler(lambda s, r, now, _: s.offset_fetch(r, now)),
            ApiKey.JOIN_GROUP: ShardHandler(lambda s, r, now, token: s.join_group(r, now, token)),
            ApiKey.HEARTBEAT: ShardHandler(lambda s, r, now, _: s.heartbeat(r, now)),
            ApiKey.LEAVE_GROUP: ShardHandler(lambda s, r, now, _: s.leave_group(r, now)),
            ApiKey.SYNC_GROUP: ShardHandler(lambda s, r, now, token: s.sync_group(r, now, token)),
            ApiKey.DESCRIBE_GROUPS: ShardHandler(lambda s, r, now, _: s.describe_groups(r, now)),
            ApiKey.LIST_GROUPS: ShardHandler(lambda s, r, now, _: s.list_groups(r, now)),
            ApiKey.TXN_OFFSET_COMMIT: ShardHandler(
                lambda s, r, now, _: s.txn_offset_commit(r, now),
                lambda s, r: s.has_pending_transaction(r.producer_id),
            ),
            ApiKey.DESCRIBE_CONFIGS: ShardHandler(lambda s, r, now, _: s.describe_group_configs(r, now)),
            ApiKey.DELETE_GROUPS: ShardHandler(lambda s, r, now, _: s.delete_groups(r, now)),
            ApiKey.INCREMENTAL_ALTER_CONFIGS: ShardHandler(
                lambda s, r, now, _: s.alter_group_configs(r, now)
            ),
            ApiKey.OFFSET_DELETE: ShardHandler(lambda s, r, now, _: s.offset_delete(r, now)),
            ApiKey.CONSUMER_GROUP_HEARTBEAT: ShardHandler(
                lambda s, r, now, _: s.consumer_group_heartbeat(r, now)
            ),
            ApiKey.CONSUMER_GROUP_DESCRIBE: ShardHandler(
                lambda s, r, now, _: s.consumer_group_describe(r, now)
            ),
            ApiKey.SHARE_GROUP_HEARTBEAT: ShardHandler(lambda s, r, now, _: s.share_group_heartbeat(r, now)),
            ApiKey.SHARE_GROUP_DESCRIBE: ShardHandler(lambda s, r, now, _: s.share_group_describe(r, now)),
            ApiKey.SHARE_FETCH: ShardHandler(lambda s, r, now, _: s.share_delivery(r, now), answered=count_delivery),
            ApiKey.SHARE_ACKNOWLEDGE: ShardHandler(
                lambda s, r, now, _: s.share_delivery(r, now), answered=count_delivery
            ),
            ApiKey.STREAMS_GROUP_HEARTBEAT: ShardHandler(
                lambda s, r, now, _: s.streams_group_heartbeat(r, now)
            ),
            ApiKey.STREAMS_GROUP_DESCRIBE: ShardHandler(lambda s, r, now, _: s.streams_group_describe(r, now)),
            ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: ShardHandler(
                lambda s, r, now, _: s.describe_share_group_offsets(r, now)
            ),
            ApiKey.ALTER_SHARE_GROUP_OFFSETS: ShardHandler(lambda s, r, now, _: s.alter_share_group_offsets(r, now)),
            ApiKey.DELETE_SHARE_GROUP_OFFSETS: ShardHandler(lambda s, r, now, _: s.delete_share_group_offsets(r, now)),
        },
        SHARD_APIS,
    )
)
"""The envelope's oneof field → the operation on the partition's coordinator shard, one per
group API declared with a shard operation (its name is the oneof field; declared reads never
wait on a write), and one per operation the gateway asks for on its own."""

GATEWAY_HANDLERS: dict[str, ShardHandler] = {
    "adopt_group": ShardHandler(lambda s, r, now, _: s.adopt_group(r, now)),
}
"""The operations the gateway asks for on its own (``GATEWAY_OPERATIONS``), by name."""

if set(GATEWAY_HANDLERS) != {op.name for op in GATEWAY_OPERATIONS}:
    raise ValueError("the gateway's own shard operations and their handlers differ")


def _gateway_operation(name: str, handler: ShardHandler) -> Operation:
    run = handler.run
    return lambda r: write_operation(name, lambda s, now, token: run(s, r, now, token))


OPERATIONS.update(
    {op.name: _gateway_operation(op.name, GATEWAY_HANDLERS[op.name]) for op in GATEWAY_OPERATIONS}
)
