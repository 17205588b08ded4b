"""Kafka's authorization of the group APIs, one hook per API (what ``KafkaApis`` checks).

Before a group API reaches a shard, its hook decides with the connection's principal and host
(:class:`Caller`) and the policy (:class:`~groupcoord.authorization.acls.Authorizer`):

=====================================  =========================  ===============================
API                                    Group                      Topics
=====================================  =========================  ===============================
JoinGroup, SyncGroup, Heartbeat,       READ                       -
LeaveGroup
ConsumerGroupHeartbeat                 READ                       DESCRIBE on subscribed names;
                                                                  a regex never resolves to a
                                                                  topic it may not DESCRIBE
ShareGroupHeartbeat                    READ                       DESCRIBE on subscribed names
ShareFetch, ShareAcknowledge           READ                       READ: the upstream's (records
                                                                  fetched as the client)
DescribeShareGroupOffsets              DESCRIBE, per group        DESCRIBE (failed per partition,
                                                                  or left out of "all topics")
AlterShareGroupOffsets                 READ                       READ, per topic
DeleteShareGroupOffsets                DELETE                     READ, per topic
OffsetCommit, TxnOffsetCommit          READ (else every           READ, per topic
(TxnOffsetCommit, AddOffsetsToTxn:     partition fails)
WRITE on the transactional id first)
OffsetFetch                            DESCRIBE                   DESCRIBE (failed per partition,
                                                                  or left out of "all topics")
DescribeGroups                         DESCRIBE, per group        -
ConsumerGroupDescribe,                 DESCRIBE, per group        DESCRIBE on every assigned
ShareGroupDescribe                                                topic, else the group is
                                                                  TOPIC_AUTHORIZATION_FAILED
ListGroups                             DESCRIBE on CLUSTER,       -
                                       else filtered per group
DeleteGroups                           DELETE, per group          -
OffsetDelete                           DELETE                     READ, per topic
FindCoordinator (group keys)           DESCRIBE, per key          -
DescribeConfigs / IncrementalAlter-    DESCRIBE_CONFIGS /         -
Configs (GROUP resources)              ALTER_CONFIGS
=====================================  =========================  ===============================

A refusal is GROUP_AUTHORIZATION_FAILED or TOPIC_AUTHORIZATION_FAILED where that API carries
errors (whole response, per group, per partition), exactly as Kafka answers. A hook returns a
:class:`Verdict`: the request to serve (narrowed to what is allowed: nothing refused is
written), or the whole refusal, and a ``finish`` that puts the refused entries back into the
served response in request order. Every decision is counted; every denial is logged with the
principal, operation and resource.

The hooks are registered by group type (``classic_authorization``, ``consumer_authorization``,
``share_authorization``, ``offsets_authorization``, ``admin_authorization``, built from
:mod:`.group_acls`); this module puts them into one table against the APIs' declarations.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from groupcoord.common.group_api_declarations import DECLARATIONS, registered_by_group_type
from groupcoord.gateway.security import (
    admin_authorization,
    classic_authorization,
    consumer_authorization,
    offsets_authorization,
    share_authorization,
    streams_authorization,
)
from groupcoord.gateway.security.group_acls import Caller, GroupAcls, Hook, Verdict

GROUP_TYPES: tuple[ModuleType, ...] = (
    classic_authorization,
    consumer_authorization,
    share_authorization,
    streams_authorization,
    offsets_authorization,
    admin_authorization,
)
"""The modules authorizing the group APIs, one per group type (and the offsets and admin APIs
every type shares), each with its ``AUTHORIZATION_HOOKS``."""


HOOKS: dict[int, Hook] = {
    int(api.key): hook
    for api, hook in registered_by_group_type("authorization hook", GROUP_TYPES, "AUTHORIZATION_HOOKS")
}
"""api key -> its authorization hook, one per declared group API (an API without one is not a
group API)."""

#: api key -> the last version naming topics by name (OffsetCommit/OffsetFetch v10 name them by
#: id only, which topic ACLs cannot be checked against here)
TOPIC_NAME_VERSIONS: dict[int, int] = {
    api.key: api.last_version_naming_topics
    for api in DECLARATIONS
    if api.last_version_naming_topics is not None
}


class GroupAuthorization(GroupAcls):
    """The hooks of :data:`HOOKS` over a policy that may change (``policy()`` is asked each time)."""

    def check(
        self, api_key: int, caller: Caller, version: int, response_type: type[Any], request: Any
    ) -> Verdict:
        hook = HOOKS.get(api_key)
        return Verdict(request) if hook is None else hook(self, caller, version, response_type, request)
