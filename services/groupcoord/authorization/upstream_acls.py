"""The upstream cluster's own ACLs as the policy, so one policy governs the cluster and the
coordinator: DescribeAcls (every binding) with the coordinator's own credentials, cached and
refreshed every ``interval_s``.

The coordinator's principal needs DESCRIBE on the CLUSTER upstream (Kafka's requirement for
DescribeAcls). A refresh that fails keeps the last policy (logged); the first one must
succeed, and an upstream without an authorizer (SECURITY_DISABLED) is a startup error, since
the operator asked for its ACLs. Measured: tansu 0.6.0 answers DescribeAcls with no bindings
and its CreateAcls response cannot be decoded, so it holds no ACLs to use.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from groupcoord.authorization.acls import (
    AclBinding,
    AclError,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 30.0
ANY = 1  # the "match everything" filter value of every DescribeAcls enum
SECURITY_DISABLED = 54

# Kafka's wire codes (org.apache.kafka.common.resource / acl enums)
RESOURCE_TYPES = {
    2: ResourceType.TOPIC,
    3: ResourceType.GROUP,
    4: ResourceType.CLUSTER,
    5: ResourceType.TRANSACTIONAL_ID,
}
PATTERN_TYPES = {3: PatternType.LITERAL, 4: PatternType.PREFIXED}
OPERATIONS = {
    2: Operation.ALL,
    3: Operation.READ,
    4: Operation.WRITE,
    5: Operation.CREATE,
    6: Operation.DELETE,
    7: Operation.ALTER,
    8: Operation.DESCRIBE,
    9: Operation.CLUSTER_ACTION,
    10: Operation.DESCRIBE_CONFIGS,
    11: Operation.ALTER_CONFIGS,
    12: Operation.IDEMPOTENT_WRITE,
}
PERMISSIONS = {2: Permission.DENY, 3: Permission.ALLOW}


class UpstreamAclsUnavailable(RuntimeError):
    """The upstream cannot give its ACLs (no authorizer, not allowed, not reachable)."""


class UpstreamHasNoAuthorizer(UpstreamAclsUnavailable):
    """The upstream answers DescribeAcls with SECURITY_DISABLED: it enforces no ACLs."""


def describe_all_acls_request() -> Any:
    from kio.schema.describe_acls.v3.request import DescribeAclsRequest  # noqa: PLC0415
    from kio.static.primitive import i8  # noqa: PLC0415

    return DescribeAclsRequest(
        resource_type_filter=i8(ANY),
        resource_name_filter=None,
        pattern_type_filter=i8(ANY),
        principal_filter=None,
        host_filter=None,
        operation=i8(ANY),
        permission_type=i8(ANY),
    )


def bindings_from(response: Any) -> list[AclBinding]:
    """The bindings of a DescribeAcls response that concern the coordinator's resources
    (kinds we do not model, e.g. delegation tokens, are left out)."""
    if int(response.error_code) == SECURITY_DISABLED:
        raise UpstreamHasNoAuthorizer("the upstream has no authorizer (SECURITY_DISABLED)")
    if int(response.error_code) != 0:
        raise UpstreamAclsUnavailable(
            f"DescribeAcls: error {int(response.error_code)} {response.error_message or ''}"
        )
    out = []
    for resource in response.resources:
        rtype = RESOURCE_TYPES.get(int(resource.resource_type))
        pattern = PATTERN_TYPES.get(int(resource.pattern_type))
        if rtype is None or pattern is None:
            continue
        for acl in resource.acls:
            operation = OPERATIONS.get(int(acl.operation))
            permission = PERMISSIONS.get(int(acl.permission_type))
            if operation is None or permission is None:
                continue
            try:
                out.append(
                    AclBinding(
                        acl.principal, operation, permission, rtype, resource.resource_name, pattern, acl.host
                    )
                )
            except AclError as exc:
                log.warning("ignoring upstream ACL: %s", exc)
    return out


@dataclass(frozen=True, slots=True)
class UpstreamAclSource:
    """``--acl-source upstream`` as the flags give it, before any upstream connection exists:
    the gateway's assembly builds its Upstream first, then :meth:`connect` (no ``ask`` patched
    into a policy afterwards)."""

    super_users: tuple[str, ...] = ()
    allow_everyone_if_no_acl_found: bool = False

    def connect(self, ask: Callable[[Any], Awaitable[Any]]) -> UpstreamAcls:
        return UpstreamAcls(ask, self.super_users, allow_everyone_if_no_acl_found=self.allow_everyone_if_no_acl_found)


class UpstreamAcls:
    """Callable for the current :class:`Authorizer`, kept fresh by :meth:`run`."""

    def __init__(
        self,
        ask: Callable[[Any], Awaitable[Any]],
        super_users: Iterable[str] = (),
        interval_s: float = DEFAULT_INTERVAL_S,
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.ask = ask
        self.super_users = tuple(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.interval_s = interval_s
        self._policy: Authorizer | None = None

    async def refresh(self) -> Authorizer:
        try:
            response = await self.ask(describe_all_acls_request())
        except OSError as exc:
            raise UpstreamAclsUnavailable(f"DescribeAcls: {exc}") from exc
        self._policy = Authorizer.of(bindings_from(response), self.super_users, self.allow_everyone_if_no_acl_found)
        return self._policy

    async def run(self) -> None:
        """Refresh every ``interval_s`` until cancelled (failures keep the last policy)."""
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.refresh()
            except UpstreamAclsUnavailable as exc:
                log.error("keeping the previous ACL policy: %s", exc)

    def __call__(self) -> Authorizer:
        if self._policy is None:  # before the first refresh nothing is allowed but super users
            return Authorizer.of((), self.super_users)
        return self._policy
