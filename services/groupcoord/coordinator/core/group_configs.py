"""Dynamic group configs: DescribeConfigs / IncrementalAlterConfigs for resource type GROUP (32).

Kafka's ``GroupConfig``: per-group overrides of consumer-group settings, validated against the
coordinator's broker-level bounds (``group.consumer.min/max.*``), with the session timeout
required to exceed the heartbeat interval. Configs exist independently of the group (they may
be set before it has members) and are kept as one record per group (type 26).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from groupcoord.common.errors import ErrorCode
from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.contract import CoordinatorRecord, CoordinatorResult
from groupcoord.coordinator.core.state import ActsOnState, GroupCoordinatorState
from groupcoord.records.v1 import offsets_pb2 as rpb
from groupcoord.rpc.v1 import group_admin_pb2 as pb

CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"
CONSUMER_ASSIGNMENT_INTERVAL_MS = "consumer.assignment.interval.ms"

_OP_SET, _OP_DELETE = 0, 1
_SOURCE_GROUP_CONFIG, _SOURCE_DEFAULT_CONFIG = 8, 5
_TYPE_INT = 3


@dataclass(frozen=True, slots=True)
class _Key:
    name: str
    default: Callable[[GroupConfig], int]
    bounds: Callable[[GroupConfig], tuple[int, int]]
    doc: str


_KEYS: dict[str, _Key] = {
    k.name: k
    for k in (
        _Key(
            CONSUMER_SESSION_TIMEOUT_MS,
            lambda c: c.consumer_group_session_timeout_ms,
            lambda c: (c.consumer_group_min_session_timeout_ms, c.consumer_group_max_session_timeout_ms),
            "The timeout to detect client failures when using the consumer group protocol.",
        ),
        _Key(
            CONSUMER_HEARTBEAT_INTERVAL_MS,
            lambda c: c.consumer_group_heartbeat_interval_ms,
            lambda c: (
                c.consumer_group_min_heartbeat_interval_ms,
                c.consumer_group_max_heartbeat_interval_ms,
            ),
            "The heartbeat interval given to the members of a consumer group.",
        ),
        _Key(
            CONSUMER_ASSIGNMENT_INTERVAL_MS,
            lambda c: c.consumer_group_assignment_interval_ms,
            lambda c: (
                c.consumer_group_min_assignment_interval_ms,
                c.consumer_group_max_assignment_interval_ms,
            ),
            "How long a consumer group collects changes before computing a new target assignment.",
        ),
    )
}


def replay_group_config(
    data: GroupCoordinatorState, key: rpb.GroupConfigKey, value: rpb.GroupConfigValue | None
) -> None:
    if value is None:
        data.group_configs.pop(key.group_id, None)
    else:
        data.group_configs[key.group_id] = {k: int(v) for k, v in value.configs.items()}


class GroupConfigManager(ActsOnState):
    """The dynamic configs of the partition's groups: their data is the partition state's
    ``group_configs`` (group id -> name -> value)."""

    def __init__(self, data: GroupCoordinatorState, config: GroupConfig) -> None:
        self.data = data
        self.config = config

    def value(self, group_id: str, name: str) -> int:
        """The effective value of a config for a group (its override, else the default)."""
        return self.data.group_configs.get(group_id, {}).get(name, _KEYS[name].default(self.config))

    def session_timeout_ms(self, group_id: str) -> int:
        return self.value(group_id, CONSUMER_SESSION_TIMEOUT_MS)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self.value(group_id, CONSUMER_HEARTBEAT_INTERVAL_MS)

    def assignment_interval_ms(self, group_id: str) -> int:
        return self.value(group_id, CONSUMER_ASSIGNMENT_INTERVAL_MS)

    def describe_group_configs(
        self, request: pb.DescribeGroupConfigsRequest, now_ms: int
    ) -> CoordinatorResult[pb.DescribeGroupConfigsResponse]:
        response = pb.DescribeGroupConfigsResponse(group_id=request.group_id)
        if not request.group_id:
            response.error_code = ErrorCode.invalid_group_id.value
            return CoordinatorResult(response=response)
        names = list(request.configuration_keys) or list(_KEYS)
        overrides = self.data.group_configs.get(request.group_id, {})
        for name in names:
            key = _KEYS.get(name)
            if key is None:
                continue  # Kafka leaves unknown names out of the answer
            entry = response.configs.add(
                name=name,
                value=str(overrides.get(name, key.default(self.config))),
                read_only=False,
                config_source=_SOURCE_GROUP_CONFIG if name in overrides else _SOURCE_DEFAULT_CONFIG,
                is_sensitive=False,
                config_type=_TYPE_INT,
            )
            if request.include_documentation:
                entry.documentation = key.doc
        return CoordinatorResult(response=response)

    def alter_group_configs(
        self, request: pb.AlterGroupConfigsRequest, now_ms: int
    ) -> CoordinatorResult[pb.AlterGroupConfigsResponse]:
        """IncrementalAlterConfigs: SET / DELETE per name, validated as a whole, atomically."""
        response = pb.AlterGroupConfigsResponse(group_id=request.group_id)
        if not request.group_id:
            response.error_code = ErrorCode.invalid_group_id.value
            return CoordinatorResult(response=response)
        new = dict(self.data.group_configs.get(request.group_id, {}))
        error = None
        for change in request.configs:
            key = _KEYS.get(change.name)
            if key is None:
                error = f"Unknown group config name: {change.name}"
                break
            if change.config_operation == _OP_DELETE:
                new.pop(change.name, None)
            elif change.config_operation == _OP_SET:
                try:
                    value = int(change.value)
                except ValueError:
                    error = f"Invalid value {change.value!r} for {change.name}: not an integer"
                    break
                low, high = key.bounds(self.config)
                if not low <= value <= high:
                    error = f"{change.name} must be in the range {low} to {high} inclusive."
                    break
                new[change.name] = value
            else:
                error = f"{change.name}: only SET and DELETE apply to integer configs"
                break
        if error is None:
            session = new.get(CONSUMER_SESSION_TIMEOUT_MS, self.config.consumer_group_session_timeout_ms)
            heartbeat = new.get(
                CONSUMER_HEARTBEAT_INTERVAL_MS, self.config.consumer_group_heartbeat_interval_ms
            )
            if session <= heartbeat:
                error = f"{CONSUMER_SESSION_TIMEOUT_MS} must be greater than {CONSUMER_HEARTBEAT_INTERVAL_MS}"
        if error is not None:
            response.error_code = ErrorCode.invalid_config.value
            response.error_message = error
            return CoordinatorResult(response=response)
        if request.validate_only or new == self.data.group_configs.get(request.group_id, {}):
            return CoordinatorResult(response=response)
        key_msg = rpb.GroupConfigKey(group_id=request.group_id)
        value = rpb.GroupConfigValue(configs={k: str(v) for k, v in new.items()}) if new else None
        return CoordinatorResult(records=[CoordinatorRecord(key_msg, value)], response=response)
