"""Kafka's ACL model and decision, as ``AclAuthorizer`` / ``StandardAuthorizer`` make it (pure).

An ACL binding grants or denies a principal (``User:alice``, or ``User:*``) from a host (or
``*``) one operation on the resources its pattern matches: LITERAL (the exact name, or ``*``
for every resource of the type) or PREFIXED (every name starting with it). A request is
allowed when the principal is a super user; otherwise any matching DENY refuses it, and only
then a matching ALLOW (of the operation, of an operation implying it, or of ALL) grants it.
No matching binding refuses, unless ``allow_everyone_if_no_acl_found`` (Kafka's
``allow.everyone.if.no.acl.found``) and the resource has no binding at all.

Implied operations are Kafka's: an ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE;
an ALLOW of ALTER_CONFIGS also allows DESCRIBE_CONFIGS; ALL allows everything. A DENY denies
its own operation only (and DENY ALL denies everything).
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


class ResourceType(enum.Enum):
    TOPIC = "TOPIC"
    GROUP = "GROUP"
    CLUSTER = "CLUSTER"
    TRANSACTIONAL_ID = "TRANSACTIONAL_ID"


class Operation(enum.Enum):
    ALL = "ALL"
    READ = "READ"
    WRITE = "WRITE"
    CREATE = "CREATE"
    DELETE = "DELETE"
    ALTER = "ALTER"
    DESCRIBE = "DESCRIBE"
    CLUSTER_ACTION = "CLUSTER_ACTION"
    DESCRIBE_CONFIGS = "DESCRIBE_CONFIGS"
    ALTER_CONFIGS = "ALTER_CONFIGS"
    IDEMPOTENT_WRITE = "IDEMPOTENT_WRITE"


class PatternType(enum.Enum):
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


class Permission(enum.Enum):
    ALLOW = "ALLOW"
    DENY = "DENY"


WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"

#: operation -> the ALLOWed operations that grant it (Kafka's implied operations)
GRANTED_BY: dict[Operation, frozenset[Operation]] = {
    op: frozenset({op, Operation.ALL}) for op in Operation
} | {
    Operation.DESCRIBE: frozenset(
        {
            Operation.DESCRIBE,
            Operation.READ,
            Operation.WRITE,
            Operation.DELETE,
            Operation.ALTER,
            Operation.ALL,
        }
    ),
    Operation.DESCRIBE_CONFIGS: frozenset(
        {Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS, Operation.ALL}
    ),
}


class AclError(ValueError):
    """An ACL binding that is not one Kafka would accept."""


@dataclass(frozen=True, slots=True)
class AclBinding:
    principal: str
    operation: Operation
    permission: Permission
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType = PatternType.LITERAL
    host: str = WILDCARD

    def __post_init__(self) -> None:
        if ":" not in self.principal:
            raise AclError(f"principal {self.principal!r} is not TYPE:NAME (e.g. User:alice)")
        if not self.resource_name:
            raise AclError("an ACL needs a resource name (or * for all)")
        if self.pattern_type is PatternType.PREFIXED and self.resource_name == WILDCARD:
            raise AclError("a PREFIXED pattern cannot be *; use LITERAL *")

    def matches_identity(self, principal: str, host: str) -> bool:
        return self.principal in (principal, WILDCARD_PRINCIPAL) and self.host in (host, WILDCARD)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> AclBinding:
        """A binding from Kafka's names (``principal``, ``host``, ``operation``,
        ``permissionType``, ``resourceType``, ``resourceName``, ``patternType``)."""
        try:
            return cls(
                principal=str(raw["principal"]),
                host=str(raw.get("host", WILDCARD)),
                operation=Operation(str(raw["operation"]).upper()),
                permission=Permission(str(raw.get("permissionType", "ALLOW")).upper()),
                resource_type=ResourceType(str(raw["resourceType"]).upper()),
                resource_name=str(raw["resourceName"]),
                pattern_type=PatternType(str(raw.get("patternType", "LITERAL")).upper()),
            )
        except KeyError as exc:
            raise AclError(f"ACL {dict(raw)} lacks {exc.args[0]}") from None
        except ValueError as exc:
            raise AclError(f"ACL {dict(raw)}: {exc}") from None


@dataclass(slots=True)
class _PrefixTrie:
    """PREFIXED bindings by prefix, one character per level: the bindings whose prefix a name
    starts with are found by walking the name's characters, which stops at the first one no
    prefix continues with, so a lookup costs at most the length of the longest prefix (slicing
    every prefix of the name made a long group id cost its length squared)."""

    bindings: list[AclBinding] = field(default_factory=list)
    children: dict[str, _PrefixTrie] = field(default_factory=dict)

    def add(self, prefix: str, binding: AclBinding) -> None:
        node = self
        for char in prefix:
            node = node.children.setdefault(char, _PrefixTrie())
        node.bindings.append(binding)

    def matching(self, name: str) -> list[AclBinding]:
        """The bindings of every prefix ``name`` starts with."""
        found: list[AclBinding] = []
        node = self
        for char in name:
            next_node = node.children.get(char)
            if next_node is None:
                break
            node = next_node
            found.extend(node.bindings)
        return found


@dataclass(frozen=True)
class Authorizer:
    """Decisions over a fixed set of bindings (a new policy is a new Authorizer)."""

    bindings: tuple[AclBinding, ...] = ()
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False

    @classmethod
    def of(
        cls,
        bindings: Iterable[AclBinding],
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> Authorizer:
        return cls(tuple(bindings), frozenset(super_users), allow_everyone_if_no_acl_found)

    @functools.cached_property
    def _index(self) -> dict[ResourceType, tuple[dict[str, list[AclBinding]], _PrefixTrie]]:
        """Per resource type: LITERAL bindings by name (``*`` included) and PREFIXED ones in a
        trie, so a decision on the heartbeat path looks up its name, the wildcard and the
        prefixes its name starts with (as StandardAuthorizerData walks its sorted ACLs), never
        scanning the bindings of other resources."""
        index: dict[ResourceType, tuple[dict[str, list[AclBinding]], _PrefixTrie]] = {}
        for b in self.bindings:
            literal, prefixed = index.setdefault(b.resource_type, ({}, _PrefixTrie()))
            if b.pattern_type is PatternType.PREFIXED:
                prefixed.add(b.resource_name, b)
            else:
                literal.setdefault(b.resource_name, []).append(b)
        return index

    def _on_resource(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        entry = self._index.get(resource_type)
        if entry is None:
            return []
        literal, prefixed = entry
        found = [*literal.get(name, ()), *(literal.get(WILDCARD, ()) if name != WILDCARD else ())]
        found.extend(prefixed.matching(name))
        return found

    def authorize(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType, name: str
    ) -> bool:
        if principal in self.super_users:
            return True
        on_resource = self._on_resource(resource_type, name)
        if not on_resource:
            return self.allow_everyone_if_no_acl_found
        mine = [b for b in on_resource if b.matches_identity(principal, host)]
        if any(b.permission is Permission.DENY and b.operation in (operation, Operation.ALL) for b in mine):
            return False
        granted_by = GRANTED_BY[operation]
        return any(b.permission is Permission.ALLOW and b.operation in granted_by for b in mine)
