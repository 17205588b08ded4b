"""KIP-848 consumer groups' authorization: ConsumerGroupHeartbeat (READ on the group, DESCRIBE
on every subscribed topic name) and ConsumerGroupDescribe (DESCRIBE on each group and on every
topic its members are assigned), built from the hooks share groups use too."""

from __future__ import annotations

from collections.abc import Mapping

from groupcoord.common.kafka_wire.api_keys import ApiKey
from groupcoord.gateway.security.group_acls import (
    AUTHORIZED_OPERATIONS_OMITTED,
    GROUP_DENIED,
    Hook,
    modern_describe,
    modern_heartbeat,
)
from groupcoord.rpc.v1 import consumer_group_pb2 as cgh

AUTHORIZATION_HOOKS: Mapping[ApiKey, Hook] = {
    ApiKey.CONSUMER_GROUP_HEARTBEAT: modern_heartbeat(cgh.ConsumerGroupHeartbeatResponse),
    ApiKey.CONSUMER_GROUP_DESCRIBE: modern_describe(
        lambda g: cgh.ConsumerGroupDescribeGroup(
            group_id=g, error_code=GROUP_DENIED.value, authorized_operations=AUTHORIZED_OPERATIONS_OMITTED
        )
    ),
}
"""The consumer groups' hooks, registered against their declarations by :mod:`.group_authorization`."""
