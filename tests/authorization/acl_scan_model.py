"""The ACL decision by scanning every binding: the model the indexed Authorizer must agree with.

Kept beside the tests, not in the product: the Authorizer never scans (it looks a name, the
wildcard and each prefix of the name up in its index), so this is only the oracle its
property tests compare against.
"""

from __future__ import annotations

from groupcoord.authorization.acls import (
    GRANTED_BY,
    WILDCARD,
    AclBinding,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)


def matches_resource(binding: AclBinding, resource_type: ResourceType, name: str) -> bool:
    """Whether the binding's resource pattern covers ``name`` (LITERAL, ``*``, or PREFIXED)."""
    if resource_type is not binding.resource_type:
        return False
    if binding.pattern_type is PatternType.PREFIXED:
        return name.startswith(binding.resource_name)
    return binding.resource_name in (name, WILDCARD)


def naive(auth: Authorizer, principal: str, host: str, op: Operation, rtype: ResourceType, name: str) -> bool:
    """The decision by scanning every binding (the model the index must agree with)."""
    if principal in auth.super_users:
        return True
    on = [b for b in auth.bindings if matches_resource(b, rtype, name)]
    if not on:
        return auth.allow_everyone_if_no_acl_found
    mine = [b for b in on if b.matches_identity(principal, host)]
    if any(b.permission is Permission.DENY and b.operation in (op, Operation.ALL) for b in mine):
        return False
    return any(b.permission is Permission.ALLOW and b.operation in GRANTED_BY[op] for b in mine)
