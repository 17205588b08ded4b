"""KIP-1071 streams groups' authorization, as Kafka's ``KafkaApis.handleStreamsGroupHeartbeat``
and ``handleStreamsGroupDescribe``: a heartbeat needs READ on the group, and a joining member's
topology DESCRIBE on every topic it names (source, repartition and changelog topics; CREATE on
the internal topics to create is checked where they are created, :mod:`..groups.streams_apis`);
a describe needs DESCRIBE on each group."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from groupcoord.authorization.acls import Operation
from groupcoord.common.kafka_wire.api_keys import ApiKey
from groupcoord.gateway.security.group_acls import (
    AUTHORIZED_OPERATIONS_OMITTED,
    GROUP_DENIED,
    TOPIC_DENIED,
    Caller,
    GroupAcls,
    Hook,
    Verdict,
    per_group_read,
)
from groupcoord.rpc.v1 import streams_group_pb2 as st


def topology_topics(topology: Any) -> list[str]:
    """Every topic a heartbeat's topology names, once each, in order."""
    names: dict[str, None] = {}
    for sub in topology.subtopologies:
        for name in (
            *sub.source_topics,
            *sub.repartition_sink_topics,
            *(t.name for t in sub.repartition_source_topics),
            *(t.name for t in sub.state_changelog_topics),
        ):
            names.setdefault(name, None)
    return list(names)


def streams_heartbeat(auth: GroupAcls, caller: Caller, version: int, rt: type[Any], req: Any) -> Verdict:
    if not auth.group(caller, Operation.READ, req.group_id):
        return Verdict(None, st.StreamsGroupHeartbeatResponse(error_code=GROUP_DENIED.value))
    if req.topology is not None:
        refused = [n for n in topology_topics(req.topology) if not auth.topic(caller, Operation.DESCRIBE, n)]
        if refused:
            return Verdict(
                None,
                st.StreamsGroupHeartbeatResponse(
                    error_code=TOPIC_DENIED.value,
                    error_message=f"The group has subscribed to topics that are not authorized: {sorted(refused)}",
                ),
            )
    return Verdict(req)


AUTHORIZATION_HOOKS: Mapping[ApiKey, Hook] = {
    ApiKey.STREAMS_GROUP_HEARTBEAT: streams_heartbeat,
    ApiKey.STREAMS_GROUP_DESCRIBE: per_group_read(
        "group_ids",
        "groups",
        lambda g: st.StreamsGroupDescribeGroup(
            group_id=g, error_code=GROUP_DENIED.value, authorized_operations=AUTHORIZED_OPERATIONS_OMITTED
        ),
    ),
}
"""The streams groups' hooks, registered against their declarations by :mod:`.group_authorization`."""
