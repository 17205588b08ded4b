"""Broker-level group coordinator settings (Kafka's ``group.*`` / ``offsets.*`` configs).

One :class:`GroupConfig` per shard, given by the operator's custom resource (group-config
defaults). Names follow Apache Kafka's broker configs so operators can carry theirs over.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace


class MigrationPolicy(enum.Enum):
    """group.consumer.migration.policy: which online conversions between the classic and the
    consumer (KIP-848) protocol a group may undergo."""

    BIDIRECTIONAL = "bidirectional"
    UPGRADE = "upgrade"  # classic -> consumer only
    DOWNGRADE = "downgrade"  # consumer -> classic only
    DISABLED = "disabled"

    @property
    def upgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.UPGRADE)

    @property
    def downgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.DOWNGRADE)


@dataclass(frozen=True, slots=True)
class GroupConfig:
    # --- classic groups (group.classic.*, group.*) ---
    # group.min.session.timeout.ms / group.max.session.timeout.ms: JoinGroup outside → INVALID_SESSION_TIMEOUT.
    classic_group_min_session_timeout_ms: int = 6_000
    classic_group_max_session_timeout_ms: int = 1_800_000
    # group.initial.rebalance.delay.ms: a new (empty) group waits this long for more members.
    classic_group_initial_rebalance_delay_ms: int = 3_000
    # group.max.size (group.classic.max.size in 4.x).
    classic_group_max_size: int = 2_147_483_647
    # A new member whose JoinGroup answer got lost expires after this (Kafka's 5 minutes).
    classic_group_new_member_join_timeout_ms: int = 300_000

    # --- offsets ---
    # offset.metadata.max.bytes: longer metadata → OFFSET_METADATA_TOO_LARGE per partition.
    offset_metadata_max_bytes: int = 4_096
    # offsets.retention.minutes (7 days) and offsets.retention.check.interval.ms.
    offsets_retention_ms: int = 7 * 24 * 60 * 60 * 1000
    offsets_retention_check_interval_ms: int = 600_000

    # --- consumer groups (KIP-848), used by group configs validation ---
    consumer_group_session_timeout_ms: int = 45_000
    consumer_group_min_session_timeout_ms: int = 45_000
    consumer_group_max_session_timeout_ms: int = 60_000
    consumer_group_heartbeat_interval_ms: int = 5_000
    consumer_group_min_heartbeat_interval_ms: int = 5_000
    consumer_group_max_heartbeat_interval_ms: int = 15_000
    # How long a consumer group batches changes before computing a new target assignment.
    consumer_group_assignment_interval_ms: int = 0
    consumer_group_min_assignment_interval_ms: int = 0
    consumer_group_max_assignment_interval_ms: int = 600_000
    # Assignments at least this large (members + subscribed partitions) run off the partition's
    # loop (KIP-1263's group.consumer.assignor.offload.enable, with a size: a small assignment
    # costs less than the hop and answers the heartbeat that asked for it); -1 never offloads.
    consumer_group_assignor_offload_min_size: int = 10_000
    # group.consumer.max.size: a join beyond it is answered GROUP_MAX_SIZE_REACHED.
    consumer_group_max_size: int = 2_147_483_647
    # group.consumer.assignors: the server-side assignors; the first is the default.
    consumer_group_assignors: tuple[str, ...] = ("uniform", "range")

    # group.consumer.migration.policy: bidirectional | upgrade | downgrade | disabled.
    consumer_group_migration_policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL

    # --- share groups (KIP-932: group.share.*), Kafka 4.4's defaults and bounds ---
    share_group_session_timeout_ms: int = 45_000
    share_group_min_session_timeout_ms: int = 45_000
    share_group_max_session_timeout_ms: int = 60_000
    share_group_heartbeat_interval_ms: int = 5_000
    share_group_min_heartbeat_interval_ms: int = 5_000
    share_group_max_heartbeat_interval_ms: int = 15_000
    # group.share.max.size: a join beyond it is answered GROUP_MAX_SIZE_REACHED.
    share_group_max_size: int = 200
    # How long a member holds an acquired record before it is delivered again.
    share_group_record_lock_duration_ms: int = 30_000
    share_group_min_record_lock_duration_ms: int = 15_000
    share_group_max_record_lock_duration_ms: int = 60_000
    # Deliveries of a record before it is archived.
    share_group_delivery_count_limit: int = 5
    share_group_min_delivery_count_limit: int = 2
    share_group_max_delivery_count_limit: int = 10
    # In-flight records per share-partition.
    share_group_partition_max_record_locks: int = 2_000
    share_group_min_partition_max_record_locks: int = 100
    share_group_max_partition_max_record_locks: int = 4_000
    # Dead-letter queues (KIP-1191): the prefix every group's DLQ topic must have
    # (errors.deadletterqueue.topic.name.prefix; "" = any name), and whether a missing DLQ
    # topic is created (errors.deadletterqueue.auto.create.topics.enable). The coordinator
    # writes dead letters with its own identity, so these are the operator's bounds on where.
    share_group_dlq_topic_name_prefix: str = "dlq."
    share_group_dlq_auto_create_topics: bool = False

    # --- streams groups (KIP-1071: group.streams.*), Kafka 4.4's defaults and bounds ---
    streams_group_session_timeout_ms: int = 45_000
    streams_group_min_session_timeout_ms: int = 45_000
    streams_group_max_session_timeout_ms: int = 60_000
    streams_group_heartbeat_interval_ms: int = 5_000
    streams_group_min_heartbeat_interval_ms: int = 5_000
    streams_group_max_heartbeat_interval_ms: int = 15_000
    streams_group_num_standby_replicas: int = 0
    streams_group_max_standby_replicas: int = 2
    # group.streams.initial.rebalance.delay.ms: a new group's first assignment waits this long
    # for more members (0: none)
    streams_group_initial_rebalance_delay_ms: int = 3_000

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> GroupConfig:
        """Defaults overridden by the operator's group-config environment (``GROUPCOORD_GROUP_*``,
        see operator/groupcoord_operator/build.py), or by ``GROUPCOORD_GROUP_<FIELD NAME IN CAPITALS>`` for any field."""
        config = cls()
        # the resource's names; maxGroupSize bounds both kinds of group (Kafka has one size
        # per protocol: group.classic.max.size and group.consumer.max.size)
        aliases = {
            "GROUPCOORD_GROUP_SESSION_TIMEOUT_MS": ("consumer_group_session_timeout_ms",),
            "GROUPCOORD_GROUP_HEARTBEAT_INTERVAL_MS": ("consumer_group_heartbeat_interval_ms",),
            "GROUPCOORD_GROUP_ASSIGNORS": ("consumer_group_assignors",),
            "GROUPCOORD_GROUP_MAX_SIZE": ("classic_group_max_size", "consumer_group_max_size"),
            "GROUPCOORD_GROUP_MIGRATION_POLICY": ("consumer_group_migration_policy",),
            "GROUPCOORD_GROUP_SHARE_DLQ_TOPIC_NAME_PREFIX": ("share_group_dlq_topic_name_prefix",),
            "GROUPCOORD_GROUP_SHARE_DLQ_AUTO_CREATE_TOPICS": ("share_group_dlq_auto_create_topics",),
        }
        changes: dict[str, object] = {}
        for f in fields(cls):
            for name in (
                f"GROUPCOORD_GROUP_{f.name.upper()}",
                *(k for k, v in aliases.items() if f.name in v),
            ):
                if name in env:
                    raw = env[name]
                    if f.name.endswith("migration_policy"):
                        changes[f.name] = MigrationPolicy(raw.lower())
                    elif f.name == "consumer_group_assignors":
                        changes[f.name] = tuple(a.strip() for a in raw.split(",") if a.strip())
                    elif f.type == "str":
                        changes[f.name] = raw
                    elif f.type == "bool":
                        if raw.strip().lower() not in ("true", "false"):
                            raise ValueError(f"{name}: expected true or false, not {raw!r}")
                        changes[f.name] = raw.strip().lower() == "true"
                    else:
                        changes[f.name] = int(raw)
        return replace(config, **changes)
