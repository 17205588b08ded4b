"""Broker-level group settings from the operator's environment."""

from __future__ import annotations

import pytest

from groupcoord.coordinator.core.config import GroupConfig, MigrationPolicy


def test_operator_environment_overrides_defaults() -> None:
    config = GroupConfig.from_env(
        {
            "GROUPCOORD_GROUP_SESSION_TIMEOUT_MS": "50000",
            "GROUPCOORD_GROUP_MAX_SIZE": "5",
            "GROUPCOORD_GROUP_MIGRATION_POLICY": "Upgrade",
            "GROUPCOORD_GROUP_OFFSETS_RETENTION_MS": "1000",
            "GROUPCOORD_GROUP_ASSIGNORS": "range, uniform",
            "GROUPCOORD_GROUP_SHARE_DLQ_TOPIC_NAME_PREFIX": "",
            "GROUPCOORD_GROUP_SHARE_DLQ_AUTO_CREATE_TOPICS": "True",
            "UNRELATED": "x",
        }
    )
    assert config.consumer_group_session_timeout_ms == 50_000
    assert config.classic_group_max_size == 5
    assert config.consumer_group_max_size == 5  # the resource's maxGroupSize bounds KIP-848 groups too
    assert config.offsets_retention_ms == 1_000
    assert config.consumer_group_assignors == ("range", "uniform")
    assert config.consumer_group_migration_policy is MigrationPolicy.UPGRADE
    assert config.consumer_group_migration_policy.upgrade_enabled
    assert not config.consumer_group_migration_policy.downgrade_enabled
    assert config.share_group_dlq_topic_name_prefix == "", "KIP-1191: any DLQ topic name"
    assert config.share_group_dlq_auto_create_topics
    assert GroupConfig.from_env({}) == GroupConfig()


def test_a_bad_value_is_an_error_not_a_silent_default() -> None:
    with pytest.raises(ValueError):
        GroupConfig.from_env({"GROUPCOORD_GROUP_MIGRATION_POLICY": "sideways"})
    with pytest.raises(ValueError):
        GroupConfig.from_env({"GROUPCOORD_GROUP_MAX_SIZE": "many"})
    with pytest.raises(ValueError):
        GroupConfig.from_env({"GROUPCOORD_GROUP_SHARE_DLQ_AUTO_CREATE_TOPICS": "yes"})
