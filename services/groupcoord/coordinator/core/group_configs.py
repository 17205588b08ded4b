"""Dynamic group configs: DescribeConfigs / IncrementalAlterConfigs for resource type GROUP (32).

Kafka's ``GroupConfig``: per-group overrides of consumer-group and share-group settings (INT,
STRING and BOOLEAN values), validated as Kafka validates them — ConfigDef's own checks, then the
coordinator's broker-level bounds (``group.consumer.min/max.*``, ``group.share.min/max.*``),
each session timeout required to exceed its heartbeat interval — with Kafka's messages. The
share-group delivery settings (lock duration, delivery count limit, in-flight records, offset
reset, isolation level) are read by share-partition delivery (core/share/delivery.py). Configs exist independently of the group (they may
be set before it has members) and are kept as one record per group (type 26).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from groupcoord.common.durations import non_negative_duration
from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.contract import CoordinatorRecord, CoordinatorResult
from groupcoord.coordinator.core.state import ActsOnState, GroupCoordinatorState
from groupcoord.records.v1 import offsets_pb2 as rpb
from groupcoord.rpc.v1 import group_admin_pb2 as pb

CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"
CONSUMER_ASSIGNMENT_INTERVAL_MS = "consumer.assignment.interval.ms"
SHARE_SESSION_TIMEOUT_MS = "share.session.timeout.ms"
SHARE_HEARTBEAT_INTERVAL_MS = "share.heartbeat.interval.ms"
SHARE_RECORD_LOCK_DURATION_MS = "share.record.lock.duration.ms"
SHARE_DELIVERY_COUNT_LIMIT = "share.delivery.count.limit"
SHARE_PARTITION_MAX_RECORD_LOCKS = "share.partition.max.record.locks"
SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_ISOLATION_LEVEL = "share.isolation.level"
SHARE_RENEW_ACKNOWLEDGE_ENABLE = "share.renew.acknowledge.enable"
STREAMS_SESSION_TIMEOUT_MS = "streams.session.timeout.ms"
STREAMS_HEARTBEAT_INTERVAL_MS = "streams.heartbeat.interval.ms"
STREAMS_NUM_STANDBY_REPLICAS = "streams.num.standby.replicas"
STREAMS_INITIAL_REBALANCE_DELAY_MS = "streams.initial.rebalance.delay.ms"
DLQ_TOPIC_NAME = "errors.deadletterqueue.topic.name"
DLQ_COPY_RECORD_ENABLE = "errors.deadletterqueue.copy.record.enable"

ConfigValue = int | str | bool
"""A group config's value: INT, STRING or BOOLEAN, as Kafka's ConfigDef types them."""

_OP_SET, _OP_DELETE = 0, 1
_SOURCE_GROUP_CONFIG, _SOURCE_DEFAULT_CONFIG = 8, 5
_TYPE_BOOLEAN, _TYPE_STRING, _TYPE_INT = 1, 2, 3
BY_DURATION = "by_duration:"


def _by_duration(raw: str) -> bool:
    """share.auto.offset.reset's third form: by_duration:<non-negative ISO-8601 duration>."""
    return raw.startswith(BY_DURATION) and non_negative_duration(raw.removeprefix(BY_DURATION)) is not None


class InvalidConfig(ValueError):
    """A value Kafka's GroupConfig refuses (INVALID_CONFIG), with Kafka's message."""


@dataclass(frozen=True, slots=True)
class _Key:
    """One group config as Kafka's ``GroupConfig`` defines it: its type (ConfigDef's INT,
    STRING or BOOLEAN), its default (the broker-level setting), and its validation: ConfigDef's
    own (``at_least``, ``choices``, ``pattern``) first, then the broker-level range."""

    name: str
    config_type: int
    default: Callable[[GroupConfig], ConfigValue]
    doc: str
    bounds: Callable[[GroupConfig], tuple[int, int]] | None = None
    at_least: int | None = None
    choices: tuple[str, ...] = ()
    pattern: Callable[[str], bool] | None = None  # a STRING's other valid forms
    pattern_message: str = ""
    refuse: Callable[[ConfigValue], str | None] | None = None  # a further check: Kafka's message
    at_most: Callable[[GroupConfig], int] | None = None  # a broker-level maximum alone

    def check(self, value: ConfigValue, config: GroupConfig) -> None:
        """The checks after parsing: the broker-level range, then the key's own."""
        self.check_bounds(value, config)
        if self.refuse is not None and (message := self.refuse(value)) is not None:
            raise InvalidConfig(message)

    def parse(self, raw: str) -> ConfigValue:
        """The value of ``raw``, or :class:`InvalidConfig` with Kafka's message."""
        invalid = f"Invalid value {raw} for configuration {self.name}: "
        if self.config_type == _TYPE_BOOLEAN:
            if raw.strip().lower() not in ("true", "false"):
                raise InvalidConfig(invalid + "Expected value to be either true or false")
            return raw.strip().lower() == "true"
        if self.config_type == _TYPE_STRING:
            if raw in self.choices or (self.pattern is not None and self.pattern(raw)):
                return raw
            if self.pattern is not None:
                raise InvalidConfig(invalid + self.pattern_message.replace("{value}", raw))
            if self.choices:
                raise InvalidConfig(invalid + f"String must be one of: {', '.join(self.choices)}")
            return raw
        try:
            value = int(raw.strip())
        except ValueError:
            raise InvalidConfig(invalid + "Not a number of type INT") from None
        if self.at_least is not None and value < self.at_least:
            raise InvalidConfig(invalid + f"Value must be at least {self.at_least}")
        return value

    def check_bounds(self, value: ConfigValue, config: GroupConfig) -> None:
        if self.bounds is not None and isinstance(value, int):
            low, high = self.bounds(config)
            if not low <= value <= high:
                raise InvalidConfig(f"{self.name} must be in the range {low} to {high} inclusive.")
        if self.at_most is not None and isinstance(value, int) and value > (top := self.at_most(config)):
            raise InvalidConfig(f"{self.name} must be less than or equal to {top}")


def _text(value: ConfigValue) -> str:
    """A value as DescribeConfigs and the record carry it (booleans as Java prints them)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


_KEYS: dict[str, _Key] = {
    k.name: k
    for k in (
        _Key(
            CONSUMER_SESSION_TIMEOUT_MS,
            _TYPE_INT,
            lambda c: c.consumer_group_session_timeout_ms,
            "The timeout to detect client failures when using the consumer group protocol.",
            lambda c: (c.consumer_group_min_session_timeout_ms, c.consumer_group_max_session_timeout_ms),
        ),
        _Key(
            CONSUMER_HEARTBEAT_INTERVAL_MS,
            _TYPE_INT,
            lambda c: c.consumer_group_heartbeat_interval_ms,
            "The heartbeat interval given to the members of a consumer group.",
            lambda c: (c.consumer_group_min_heartbeat_interval_ms, c.consumer_group_max_heartbeat_interval_ms),
        ),
        _Key(
            CONSUMER_ASSIGNMENT_INTERVAL_MS,
            _TYPE_INT,
            lambda c: c.consumer_group_assignment_interval_ms,
            "How long a consumer group collects changes before computing a new target assignment.",
            lambda c: (c.consumer_group_min_assignment_interval_ms, c.consumer_group_max_assignment_interval_ms),
            at_least=0,
        ),
        _Key(
            SHARE_SESSION_TIMEOUT_MS,
            _TYPE_INT,
            lambda c: c.share_group_session_timeout_ms,
            "The timeout to detect client failures when using the share group protocol.",
            lambda c: (c.share_group_min_session_timeout_ms, c.share_group_max_session_timeout_ms),
        ),
        _Key(
            SHARE_HEARTBEAT_INTERVAL_MS,
            _TYPE_INT,
            lambda c: c.share_group_heartbeat_interval_ms,
            "The heartbeat interval given to the members of a share group.",
            lambda c: (c.share_group_min_heartbeat_interval_ms, c.share_group_max_heartbeat_interval_ms),
        ),
        _Key(
            SHARE_RECORD_LOCK_DURATION_MS,
            _TYPE_INT,
            lambda c: c.share_group_record_lock_duration_ms,
            "How long a share group member holds a record it acquired before it is delivered again.",
            lambda c: (c.share_group_min_record_lock_duration_ms, c.share_group_max_record_lock_duration_ms),
        ),
        _Key(
            SHARE_DELIVERY_COUNT_LIMIT,
            _TYPE_INT,
            lambda c: c.share_group_delivery_count_limit,
            "How many times a record is delivered to a share group before it is archived.",
            lambda c: (c.share_group_min_delivery_count_limit, c.share_group_max_delivery_count_limit),
            at_least=2,
        ),
        _Key(
            SHARE_PARTITION_MAX_RECORD_LOCKS,
            _TYPE_INT,
            lambda c: c.share_group_partition_max_record_locks,
            "How many records of one share-partition may be in flight at once.",
            lambda c: (
                c.share_group_min_partition_max_record_locks,
                c.share_group_max_partition_max_record_locks,
            ),
            at_least=100,
        ),
        _Key(
            SHARE_AUTO_OFFSET_RESET,
            _TYPE_STRING,
            lambda c: "latest",
            "Where a share-partition starts: earliest, latest, or by_duration:<ISO-8601 duration> "
            "before now.",
            choices=("earliest", "latest"),
            pattern=_by_duration,
            pattern_message=(
                "Invalid value `{value}` for configuration share.auto.offset.reset. The value must be "
                "either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."
            ),
        ),
        _Key(
            SHARE_ISOLATION_LEVEL,
            _TYPE_STRING,
            lambda c: "read_uncommitted",
            "Whether a share group delivers only committed transactional records (read_committed).",
            choices=("read_committed", "read_uncommitted"),
        ),
        _Key(
            SHARE_RENEW_ACKNOWLEDGE_ENABLE,
            _TYPE_BOOLEAN,
            lambda c: True,
            "Whether share group members may renew the lock of a record they hold (KIP-1222).",
        ),
        _Key(
            DLQ_TOPIC_NAME,
            _TYPE_STRING,
            lambda c: "",
            "The name of the topic to be used as the dead-letter queue (DLQ) topic for this share "
            "group. If blank (the default), the group does not have a DLQ topic.",
            refuse=lambda v: (
                f"{DLQ_TOPIC_NAME}: DLQ topic name must not start with '__'" if str(v).startswith("__") else None
            ),
        ),
        _Key(
            DLQ_COPY_RECORD_ENABLE,
            _TYPE_BOOLEAN,
            lambda c: False,
            "When writing onto the dead-letter queue topic, whether to copy the original record onto "
            "the DLQ topic, or just write a record containing the context information headers.",
        ),
        _Key(
            STREAMS_SESSION_TIMEOUT_MS,
            _TYPE_INT,
            lambda c: c.streams_group_session_timeout_ms,
            "The timeout to detect client failures when using the streams group protocol.",
            lambda c: (c.streams_group_min_session_timeout_ms, c.streams_group_max_session_timeout_ms),
        ),
        _Key(
            STREAMS_HEARTBEAT_INTERVAL_MS,
            _TYPE_INT,
            lambda c: c.streams_group_heartbeat_interval_ms,
            "The heartbeat interval given to the members of a streams group.",
            lambda c: (c.streams_group_min_heartbeat_interval_ms, c.streams_group_max_heartbeat_interval_ms),
        ),
        _Key(
            STREAMS_NUM_STANDBY_REPLICAS,
            _TYPE_INT,
            lambda c: c.streams_group_num_standby_replicas,
            "The number of standby replicas for each task.",
            at_least=0,
            at_most=lambda c: c.streams_group_max_standby_replicas,
        ),
        _Key(
            STREAMS_INITIAL_REBALANCE_DELAY_MS,
            _TYPE_INT,
            lambda c: c.streams_group_initial_rebalance_delay_ms,
            "The amount of time the group coordinator will wait for more streams clients to join a new "
            "group before performing the first rebalance. A longer delay means potentially fewer rebalances.",
            at_least=0,
        ),
    )
}
# Each pair's session timeout must exceed its heartbeat interval (Kafka's GroupConfig).
_SESSION_OVER_HEARTBEAT = (
    (CONSUMER_SESSION_TIMEOUT_MS, CONSUMER_HEARTBEAT_INTERVAL_MS),
    (SHARE_SESSION_TIMEOUT_MS, SHARE_HEARTBEAT_INTERVAL_MS),
    (STREAMS_SESSION_TIMEOUT_MS, STREAMS_HEARTBEAT_INTERVAL_MS),
)


def replay_group_config(
    data: GroupCoordinatorState, key: rpb.GroupConfigKey, value: rpb.GroupConfigValue | None
) -> None:
    if value is None:
        data.group_configs.pop(key.group_id, None)
    else:
        data.group_configs[key.group_id] = {
            k: _KEYS[k].parse(v) if k in _KEYS else v for k, v in value.configs.items()
        }


class GroupConfigManager(ActsOnState):
    """The dynamic configs of the partition's groups: their data is the partition state's
    ``group_configs`` (group id -> name -> value)."""

    def __init__(self, data: GroupCoordinatorState, config: GroupConfig) -> None:
        self.data = data
        self.config = config
        # The config is frozen, so each default is computed once: every heartbeat reads two.
        self._defaults = {name: key.default(config) for name, key in _KEYS.items()}

    def value(self, group_id: str, name: str) -> ConfigValue:
        """The effective value of a config for a group (its override, else the default)."""
        overrides = self.data.group_configs.get(group_id)
        if overrides is None or name not in overrides:
            return self._defaults[name]
        return overrides[name]

    def int_value(self, group_id: str, name: str) -> int:
        value = self.value(group_id, name)
        assert isinstance(value, int), name
        return value

    def session_timeout_ms(self, group_id: str) -> int:
        return self.int_value(group_id, CONSUMER_SESSION_TIMEOUT_MS)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self.int_value(group_id, CONSUMER_HEARTBEAT_INTERVAL_MS)

    def assignment_interval_ms(self, group_id: str) -> int:
        return self.int_value(group_id, CONSUMER_ASSIGNMENT_INTERVAL_MS)

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
                value=_text(overrides.get(name, self._defaults[name])),
                read_only=False,
                config_source=_SOURCE_GROUP_CONFIG if name in overrides else _SOURCE_DEFAULT_CONFIG,
                is_sensitive=False,
                config_type=key.config_type,
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
        try:
            for change in request.configs:
                key = _KEYS.get(change.name)
                if key is None:
                    raise InvalidConfig(f"Unknown group config name: {change.name}")
                if change.config_operation == _OP_DELETE:
                    new.pop(change.name, None)
                elif change.config_operation == _OP_SET:
                    value = key.parse(change.value)
                    key.check(value, self.config)
                    new[change.name] = value
                else:
                    raise InvalidConfig(f"{change.name}: only SET and DELETE apply to group configs")
            for session_name, heartbeat_name in _SESSION_OVER_HEARTBEAT:
                session = new.get(session_name, self._defaults[session_name])
                heartbeat = new.get(heartbeat_name, self._defaults[heartbeat_name])
                if session <= heartbeat:  # type: ignore[operator]
                    raise InvalidConfig(f"{session_name} must be greater than {heartbeat_name}")
        except InvalidConfig as e:
            error = str(e)
        if error is not None:
            response.error_code = ErrorCode.invalid_config.value
            response.error_message = error
            return CoordinatorResult(response=response)
        if request.validate_only or new == self.data.group_configs.get(request.group_id, {}):
            return CoordinatorResult(response=response)
        key_msg = rpb.GroupConfigKey(group_id=request.group_id)
        value = rpb.GroupConfigValue(configs={k: _text(v) for k, v in new.items()}) if new else None
        return CoordinatorResult(records=[CoordinatorRecord(key_msg, value)], response=response)
