"""The group APIs this coordinator serves: one declaration per Kafka API, shared by both sides.

A group API is served in three places that must agree: the gateway decodes it and adapts it to
a coordinator call (its group type's module, gathered in ``gateway/groups/group_apis.py``), the
gateway authorizes it (its group type's hooks, gathered in
``gateway/security/group_authorization.py``), and a worker process runs it on the partition's
shard (``coordinator/core/group_operations.py``). The gateway never imports the
coordinator package nor the coordinator the gateway, so what both must agree on is declared here,
once per API, in :data:`DECLARATIONS`: its key, the versions served, the
``CoordinatorEnvelope`` oneof field that carries it to a shard (which is also the name of the
shard operation), and whether that operation is a read or a write. Each side registers what it
brings against these declarations with :func:`registered`, which refuses an entry without a
declaration and a declaration without an entry, so the tables cannot drift apart: the gateway's
``GROUP_APIS`` (adapters; what ApiVersions advertises), the authorization ``HOOKS`` and
``TOPIC_NAME_VERSIONS``, ``GROUP_API_KEYS`` (never forwarded upstream) and the shard's
``OPERATIONS`` are all derived from this table.

Adding a group type is then what adding share groups (KIP-932) was:

1. one :class:`GroupApi` here per API, seven of them (ShareGroupHeartbeat, ShareGroupDescribe,
   ShareFetch, ShareAcknowledge, DescribeShareGroupOffsets, AlterShareGroupOffsets,
   DeleteShareGroupOffsets), with the request and response messages added to the proto's envelope
   oneofs under the declared operation names;
2. the handlers, each registered once against its declaration: the state machines in a
   package of the core (``coordinator/core/share/``), reached from the shard facade, with one
   ``ShardHandler`` per API in the shard's ``OPERATIONS`` (``core/group_operations.py``); one
   gateway adapter per API in the group type's module (``gateway/groups/share_apis.py``, its
   ``ADAPTERS``); and one authorization hook per API in its authorization module
   (``gateway/security/share_authorization.py``, its ``AUTHORIZATION_HOOKS``).

Nothing else names the API: routing, ApiVersions, the authorizable versions, the set never
forwarded upstream and the envelope dispatch follow from the declaration, and a registration
missing on any side fails at import, naming the API.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

from groupcoord.common.kafka_wire.api_keys import ApiKey

T = TypeVar("T")

# Where a request of a group API may also name what is not a group, the part that is a group:
GROUP_KEY = 0  # FindCoordinator's key type of groups (1: transactions, the upstream's)
GROUP_RESOURCE = 32  # ConfigResource.Type.GROUP in DescribeConfigs / IncrementalAlterConfigs (16 is CLIENT_METRICS)


@dataclass(frozen=True, slots=True)
class ShardOperation:
    """How a group API reaches the coordinator shard of a partition: the ``CoordinatorEnvelope``
    oneof field carrying it (the gateway sets it, the worker dispatches on it), which is also the
    operation's name, and whether it only reads (Kafka's ``scheduleReadOperation``: never waits
    on a write, writes nothing) or writes (``scheduleWriteOperation``: answered once its records
    are written)."""

    name: str
    read_only: bool


def write(name: str) -> ShardOperation:
    return ShardOperation(name, read_only=False)


def read(name: str) -> ShardOperation:
    return ShardOperation(name, read_only=True)


@dataclass(frozen=True, slots=True)
class GroupApi:
    """One group API as served here.

    ``operation`` is None for an API the gateway answers without an operation of its own
    (FindCoordinator names the gateway; AddOffsetsToTxn is an upstream AddPartitionsToTxn).
    ``only_groups`` is False for an API whose requests also name resources of the upstream
    cluster (DescribeConfigs: topics, brokers), which must still be forwarded if this gateway did
    not serve it. ``last_version_naming_topics`` is set for an API whose later versions name
    topics by id only (OffsetCommit/OffsetFetch v10).
    """

    key: ApiKey
    versions: tuple[int, int]
    operation: ShardOperation | None
    only_groups: bool = True
    last_version_naming_topics: int | None = None


TRANSACTION_V2_TXN_OFFSET_COMMIT = 5
"""TxnOffsetCommit's first version of transaction version 2 (KIP-890 part 2), which a client
sends without AddOffsetsToTxn before it: the group coordinator adds its own partition to the
transaction, and the transaction coordinator bumps the producer's epoch as the transaction ends
(its markers carry the bumped epoch)."""

DECLARATIONS: tuple[GroupApi, ...] = (
    GroupApi(ApiKey.OFFSET_COMMIT, (2, 10), write("offset_commit"), last_version_naming_topics=9),
    GroupApi(ApiKey.OFFSET_FETCH, (1, 10), read("offset_fetch"), last_version_naming_topics=9),
    GroupApi(ApiKey.FIND_COORDINATOR, (0, 6), None),
    GroupApi(ApiKey.JOIN_GROUP, (0, 9), write("join_group")),
    GroupApi(ApiKey.HEARTBEAT, (0, 4), write("heartbeat")),
    GroupApi(ApiKey.LEAVE_GROUP, (0, 5), write("leave_group")),
    GroupApi(ApiKey.SYNC_GROUP, (0, 5), write("sync_group")),
    GroupApi(ApiKey.DESCRIBE_GROUPS, (0, 6), read("describe_groups")),
    GroupApi(ApiKey.LIST_GROUPS, (0, 5), read("list_groups")),
    # Exactly-once: transaction version 1 (AddOffsetsToTxn, then TxnOffsetCommit) and 2 (KIP-890
    # part 2: TxnOffsetCommit v5 alone, see TRANSACTION_V2_TXN_OFFSET_COMMIT).
    GroupApi(ApiKey.ADD_OFFSETS_TO_TXN, (0, 4), None),
    GroupApi(ApiKey.TXN_OFFSET_COMMIT, (0, 6), write("txn_offset_commit"), last_version_naming_topics=5),
    # GROUP resources are ours, the others go upstream
    GroupApi(ApiKey.DESCRIBE_CONFIGS, (1, 4), read("describe_group_configs"), only_groups=False),
    GroupApi(ApiKey.DELETE_GROUPS, (0, 3), write("delete_groups")),
    GroupApi(ApiKey.INCREMENTAL_ALTER_CONFIGS, (0, 1), write("alter_group_configs"), only_groups=False),
    GroupApi(ApiKey.OFFSET_DELETE, (0, 0), write("offset_delete")),
    GroupApi(ApiKey.CONSUMER_GROUP_HEARTBEAT, (0, 1), write("consumer_group_heartbeat")),  # KIP-848
    GroupApi(ApiKey.CONSUMER_GROUP_DESCRIBE, (0, 1), read("consumer_group_describe")),  # KIP-848
    # KIP-932 share groups: membership and delivery
    GroupApi(ApiKey.SHARE_GROUP_HEARTBEAT, (1, 1), write("share_group_heartbeat")),
    GroupApi(ApiKey.SHARE_GROUP_DESCRIBE, (1, 1), read("share_group_describe")),
    # v2: acquire modes (KIP-1206) and RENEW (KIP-1222)
    GroupApi(ApiKey.SHARE_FETCH, (1, 2), write("share_fetch")),
    GroupApi(ApiKey.SHARE_ACKNOWLEDGE, (1, 2), write("share_acknowledge")),
    # KIP-1071 streams groups (v1 of both, Kafka 4.4's, is not in kio yet)
    GroupApi(ApiKey.STREAMS_GROUP_HEARTBEAT, (0, 0), write("streams_group_heartbeat")),
    GroupApi(ApiKey.STREAMS_GROUP_DESCRIBE, (0, 0), read("streams_group_describe")),
    GroupApi(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, (0, 1), read("describe_share_group_offsets")),
    GroupApi(ApiKey.ALTER_SHARE_GROUP_OFFSETS, (0, 0), write("alter_share_group_offsets")),
    GroupApi(ApiKey.DELETE_SHARE_GROUP_OFFSETS, (0, 0), write("delete_share_group_offsets")),
)
"""Every group API served, in api-key order."""

NOT_SERVED: frozenset[ApiKey] = frozenset()
"""APIs naming groups that this coordinator does not serve. They are not forwarded either: the
upstream's coordinator knows nothing of our groups and would answer (e.g. "no such group") as if
it did."""

SHARD_APIS: tuple[GroupApi, ...] = tuple(api for api in DECLARATIONS if api.operation is not None)
"""The group APIs that run an operation on a coordinator shard."""

GATEWAY_OPERATIONS: tuple[ShardOperation, ...] = (write("adopt_group"),)
"""Shard operations of no Kafka API, which the gateway asks for on its own (a group's adoption
from the upstream's coordinator, ``gateway/groups/adoption.py``): no client can name them."""


def registered(
    role: str, entries: Mapping[ApiKey, T], apis: Iterable[GroupApi] = DECLARATIONS
) -> list[tuple[GroupApi, T]]:
    """(declaration, entry) for every API of ``apis``, in their order: what one side brings to
    each declared API (``role`` names it in errors, e.g. "authorization hook").

    Raises ValueError when an API of ``apis`` has no entry or an entry has no declaration, so a
    new API cannot be half registered and no table can serve an undeclared one.
    """
    declared = {api.key: api for api in apis}
    missing = sorted(declared.keys() - entries.keys())
    undeclared = sorted(entries.keys() - declared.keys())
    if missing or undeclared:
        raise ValueError(
            f"{role}s do not match the declared group APIs: missing for "
            f"{[k.name for k in missing]}, undeclared {[k.name for k in undeclared]}"
        )
    return [(api, entries[key]) for key, api in declared.items()]


def registered_by_group_type(
    role: str, modules: Iterable[ModuleType], attribute: str
) -> list[tuple[GroupApi, Any]]:
    """:func:`~groupcoord.common.group_api_declarations.registered` over the registrations of
    several group types (each module's ``attribute``: api key -> its entry): besides a missing
    or an undeclared API, an API two modules both register fails at import. The gateway's two tables
    are made so: its adapters (``gateway/groups/group_apis.py``) and its authorization hooks
    (``gateway/security/group_authorization.py``), each from one module per group type."""
    entries: dict[ApiKey, Any] = {}
    for module in modules:
        table: Mapping[ApiKey, Any] = getattr(module, attribute)
        twice = sorted(entries.keys() & table.keys())
        if twice:
            raise ValueError(
                f"{module.__name__} registers {role}s already registered: {[k.name for k in twice]}"
            )
        entries.update(table)
    return registered(role, entries)
