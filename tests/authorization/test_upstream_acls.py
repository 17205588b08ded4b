"""The upstream cluster's ACLs as the policy (DescribeAcls with the coordinator's credentials)."""

from __future__ import annotations

import pytest
from kio.schema.describe_acls.v3.response import AclDescription, DescribeAclsResource, DescribeAclsResponse
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from groupcoord.authorization.acls import Operation, ResourceType
from groupcoord.authorization.upstream_acls import UpstreamAcls, UpstreamAclsUnavailable, bindings_from
from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.gateway.proxy.upstream import ask_upstream


def response(error: ErrorCode = ErrorCode.none, *resources: DescribeAclsResource) -> DescribeAclsResponse:
    import datetime  # noqa: PLC0415

    from kio.static.primitive import i32Timedelta  # noqa: PLC0415

    return DescribeAclsResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)), error_code=error, error_message=None, resources=resources
    )


def resource(rtype: int, name: str, pattern: int, *acls: tuple[str, int, int]) -> DescribeAclsResource:
    return DescribeAclsResource(
        resource_type=i8(rtype),
        resource_name=name,
        pattern_type=i8(pattern),
        acls=tuple(AclDescription(principal=p, host="*", operation=i8(op), permission_type=i8(perm)) for p, op, perm in acls),
    )


def test_describe_acls_bindings_become_the_policy() -> None:
    # GROUP app- PREFIXED: alice READ ALLOW; GROUP app-secret LITERAL: alice READ DENY; a USER resource is skipped
    bindings = bindings_from(
        response(
            ErrorCode.none,
            resource(3, "app-", 4, ("User:alice", 3, 3)),
            resource(3, "app-secret", 3, ("User:alice", 3, 2)),
            resource(7, "alice", 3, ("User:alice", 8, 3)),
        )
    )
    assert len(bindings) == 2
    from groupcoord.authorization.acls import Authorizer  # noqa: PLC0415

    policy = Authorizer.of(bindings)
    assert policy.authorize("User:alice", "h", Operation.READ, ResourceType.GROUP, "app-1")
    assert policy.authorize("User:alice", "h", Operation.DESCRIBE, ResourceType.GROUP, "app-1")
    assert not policy.authorize("User:alice", "h", Operation.READ, ResourceType.GROUP, "app-secret")
    with pytest.raises(UpstreamAclsUnavailable, match="SECURITY_DISABLED"):
        bindings_from(response(ErrorCode.security_disabled))


@pytest.mark.broker
async def test_the_upstream_is_asked_with_describe_acls(broker: EmbeddedBroker) -> None:
    """tansu 0.6.0 answers DescribeAcls (with no bindings): only super users are allowed."""
    policy = UpstreamAcls(lambda body: ask_upstream((broker.host, broker.port), body), super_users=["User:admin"])
    assert not policy().authorize("User:alice", "h", Operation.READ, ResourceType.GROUP, "g")
    await policy.refresh()
    assert policy().bindings == ()
    assert policy().authorize("User:admin", "h", Operation.DELETE, ResourceType.GROUP, "g")
    assert not policy().authorize("User:alice", "h", Operation.READ, ResourceType.GROUP, "g")
