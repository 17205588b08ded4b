"""The decision case by case as Apache Kafka's StandardAuthorizerTest states it
(metadata/src/test/java/org/apache/kafka/metadata/authorizer), and a matching DENY winning
over any ALLOW (ALL, wildcards, implied operations, allow.everyone.if.no.acl.found) as a
property."""

from __future__ import annotations

import pytest
from acl_scan_model import matches_resource
from hypothesis import given
from hypothesis import strategies as st

from groupcoord.authorization.acls import (
    AclBinding,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

Op, R = Operation, ResourceType
ALLOW, DENY = Permission.ALLOW, Permission.DENY
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED


def acl(
    rtype: ResourceType,
    name: str,
    pattern: PatternType,
    principal: str,
    op: Operation,
    permission: Permission,
) -> AclBinding:
    return AclBinding(principal, op, permission, rtype, name, pattern)


def foo(op: Operation, permission: Permission) -> AclBinding:
    """newFooAcl: TOPIC foo_ PREFIXED for User:bob from any host."""
    return acl(R.TOPIC, "foo_", PREFIXED, "User:bob", op, permission)


def decide(bindings: list[AclBinding], who: str, op: Operation, rtype: ResourceType, name: str) -> bool:
    return Authorizer.of(bindings).authorize(f"User:{who}", "127.0.0.1", op, rtype, name)


# testFindResultImplication, as decisions: (ACL, requested operation, allowed?)
IMPLICATION = [
    *[(foo(op, ALLOW), Op.DESCRIBE, True) for op in (Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER)],
    (foo(Op.CREATE, ALLOW), Op.DESCRIBE, False),  # CREATE does not imply DESCRIBE
    *[(foo(op, ALLOW), Op.DESCRIBE_CONFIGS, True) for op in (Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS)],
    (foo(Op.ALL, ALLOW), Op.ALTER_CONFIGS, True),
]


@pytest.mark.parametrize(("binding", "operation", "allowed"), IMPLICATION)
def test_find_result_implication(binding: AclBinding, operation: Operation, allowed: bool) -> None:
    assert decide([binding], "bob", operation, R.TOPIC, "foo_bar") is allowed


@pytest.mark.parametrize("op", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER])
def test_deny_acls_do_no_implication(op: Operation) -> None:
    """A DENY of READ (WRITE, ...) does not deny DESCRIBE; a DENY of DESCRIBE does."""
    assert decide([foo(op, DENY), foo(Op.DESCRIBE, ALLOW)], "bob", Op.DESCRIBE, R.TOPIC, "foo_bar")
    assert not decide([foo(Op.DESCRIBE, DENY), foo(op, ALLOW)], "bob", Op.DESCRIBE, R.TOPIC, "foo_bar")
    assert decide(
        [foo(Op.ALTER_CONFIGS, DENY), foo(Op.DESCRIBE_CONFIGS, ALLOW)],
        "bob",
        Op.DESCRIBE_CONFIGS,
        R.TOPIC,
        "foo_x",
    )


def test_principal_matching() -> None:
    """testFindResultPrincipalMatching: the ACL's principal or User:*."""
    assert decide([foo(Op.READ, ALLOW)], "bob", Op.READ, R.TOPIC, "foo_bar")
    assert not decide([foo(Op.READ, ALLOW)], "alice", Op.READ, R.TOPIC, "foo_bar")
    bar = acl(R.GROUP, "bar", LITERAL, "User:*", Op.READ, DENY)
    assert not decide(
        [bar, acl(R.GROUP, "bar", LITERAL, "User:alice", Op.READ, ALLOW)], "alice", Op.READ, R.GROUP, "bar"
    )


def test_simple_authorizations() -> None:
    bindings = [
        foo(Op.READ, ALLOW),
        foo(Op.WRITE, ALLOW),
        acl(R.GROUP, "bar", LITERAL, "User:*", Op.DESCRIBE_CONFIGS, ALLOW),
        acl(R.GROUP, "bar", LITERAL, "User:*", Op.ALTER_CONFIGS, ALLOW),
    ]
    assert decide(bindings, "bob", Op.READ, R.TOPIC, "foo_")
    assert decide(bindings, "fred", Op.ALTER_CONFIGS, R.GROUP, "bar")


@pytest.mark.parametrize(
    ("who", "actions", "expected"),
    [
        (
            "alice",
            [(Op.WRITE, "foo"), (Op.DESCRIBE_CONFIGS, "bar"), (Op.DESCRIBE, "baz")],
            [True, True, False],
        ),
        ("bob", [(Op.WRITE, "foo"), (Op.READ, "bar"), (Op.DESCRIBE, "baz")], [True, False, True]),
        ("malory", [(Op.DESCRIBE, "foo"), (Op.WRITE, "bar"), (Op.READ, "baz")], [True, False, False]),
    ],
)
def test_topic_acl_with_operation_all(who: str, actions: list, expected: list) -> None:
    bindings = [
        acl(R.TOPIC, "foo", LITERAL, "User:*", Op.ALL, ALLOW),
        acl(R.TOPIC, "bar", PREFIXED, "User:alice", Op.ALL, ALLOW),
        acl(R.TOPIC, "baz", LITERAL, "User:bob", Op.ALL, ALLOW),
    ]
    assert [decide(bindings, who, op, R.TOPIC, name) for op, name in actions] == expected


MANY = [
    acl(R.TOPIC, "green2", LITERAL, "User:*", Op.READ, ALLOW),
    acl(R.TOPIC, "green", PREFIXED, "User:bob", Op.READ, ALLOW),
    acl(R.TOPIC, "betamax4", LITERAL, "User:bob", Op.READ, ALLOW),
    acl(R.TOPIC, "betamax", LITERAL, "User:bob", Op.READ, ALLOW),
    acl(R.TOPIC, "beta", PREFIXED, "User:*", Op.READ, ALLOW),
    acl(R.TOPIC, "alpha", PREFIXED, "User:*", Op.READ, ALLOW),
    acl(R.TOPIC, "alp", PREFIXED, "User:bob", Op.READ, DENY),
    acl(R.GROUP, "*", LITERAL, "User:bob", Op.WRITE, ALLOW),
    acl(R.GROUP, "wheel", LITERAL, "User:*", Op.WRITE, DENY),
]


@pytest.mark.parametrize(
    ("who", "op", "rtype", "name", "expected"),
    [
        # testAuthorizationWithManyAcls
        ("bob", Op.READ, R.TOPIC, "green1", True),
        ("bob", Op.WRITE, R.GROUP, "wheel", False),
        ("bob", Op.READ, R.TOPIC, "alpha", False),
        ("bob", Op.WRITE, R.GROUP, "arbitrary", True),
        ("bob", Op.READ, R.TOPIC, "ala", False),
        # the same ACLs for others, and the edges of the patterns
        ("alice", Op.READ, R.TOPIC, "alpha", True),
        ("alice", Op.READ, R.TOPIC, "betamax", True),
        ("alice", Op.READ, R.TOPIC, "green1", False),
        ("alice", Op.WRITE, R.GROUP, "arbitrary", False),
        ("bob", Op.DESCRIBE, R.TOPIC, "alpha", True),  # DENY READ does not deny DESCRIBE
        ("bob", Op.READ, R.TOPIC, "green", True),  # a prefix matches the name itself
        ("bob", Op.READ, R.TOPIC, "zzz", False),  # no ACL on the resource: denied by default
    ],
)
def test_authorization_with_many_acls(
    who: str, op: Operation, rtype: ResourceType, name: str, expected: bool
) -> None:
    assert decide(MANY, who, op, rtype, name) is expected


def test_a_literal_prefix_of_the_name_does_not_match() -> None:
    bindings = [acl(R.GROUP, "app", LITERAL, "User:*", Op.READ, ALLOW)]
    assert decide(bindings, "x", Op.READ, R.GROUP, "app")
    assert not decide(bindings, "x", Op.READ, R.GROUP, "app-1")


def test_super_users_skip_acls_even_deny() -> None:
    deny_all = [acl(R.GROUP, "*", LITERAL, "User:*", Op.ALL, DENY)]
    authorizer = Authorizer.of(deny_all, super_users=["User:alice"])
    assert authorizer.authorize("User:alice", "h", Op.DELETE, R.GROUP, "g")
    assert not authorizer.authorize("User:bob", "h", Op.DELETE, R.GROUP, "g")


OPERATIONS = list(Operation)


@st.composite
def bindings(draw: st.DrawFn, permission: Permission | None = None) -> AclBinding:
    pattern = draw(st.sampled_from([LITERAL, PREFIXED]))
    names = ["app", "app-", "app-1", "other", "a"] + (["*"] if pattern is LITERAL else [])
    return AclBinding(
        draw(st.sampled_from(["User:alice", "User:bob", "User:*"])),
        draw(st.sampled_from(OPERATIONS)),
        permission or draw(st.sampled_from([ALLOW, DENY])),
        draw(st.sampled_from([R.GROUP, R.TOPIC])),
        draw(st.sampled_from(names)),
        pattern,
        draw(st.sampled_from(["*", "10.0.0.1", "10.0.0.2"])),
    )


@given(
    acls=st.lists(bindings(), max_size=8),
    deny=bindings(DENY),
    who=st.sampled_from(["User:alice", "User:bob"]),
    host=st.sampled_from(["10.0.0.1", "10.0.0.2"]),
    op=st.sampled_from(OPERATIONS),
    rtype=st.sampled_from([R.GROUP, R.TOPIC]),
    name=st.sampled_from(["app", "app-1", "other", "a"]),
    everyone=st.booleans(),
)
def test_a_matching_deny_wins_over_any_allow(acls, deny, who, host, op, rtype, name, everyone) -> None:  # noqa: ANN001
    """Whatever ALLOWs exist — ALL on every name for the caller included — a DENY that matches
    the request (its operation or ALL, principal or User:*, host or *, resource pattern) denies
    it; and the order of the bindings never matters."""
    authorizer = Authorizer.of([*acls, deny], allow_everyone_if_no_acl_found=everyone)
    answer = authorizer.authorize(who, host, op, rtype, name)
    assert answer == Authorizer.of(
        [deny, *reversed(acls)], allow_everyone_if_no_acl_found=everyone
    ).authorize(who, host, op, rtype, name)
    if (
        matches_resource(deny, rtype, name)
        and deny.matches_identity(who, host)
        and deny.operation in (op, Op.ALL)
    ):
        assert answer is False
        everything = AclBinding(who, Op.ALL, ALLOW, rtype, "*", LITERAL, "*")
        assert not Authorizer.of([*acls, deny, everything], allow_everyone_if_no_acl_found=True).authorize(
            who, host, op, rtype, name
        )
