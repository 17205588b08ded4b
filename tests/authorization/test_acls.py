"""Kafka's ACL decision (AclAuthorizer semantics), case by case."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from acl_scan_model import naive
from hypothesis import given
from hypothesis import strategies as st

from groupcoord.authorization import acl_file
from groupcoord.authorization.acls import (
    GRANTED_BY,
    AclBinding,
    AclError,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

G, T, C = ResourceType.GROUP, ResourceType.TOPIC, ResourceType.CLUSTER
ALLOW, DENY = Permission.ALLOW, Permission.DENY
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED


def acl(principal: str, op: Operation, perm: Permission, rtype: ResourceType, name: str, pattern=LIT, host="*") -> AclBinding:
    return AclBinding(principal, op, perm, rtype, name, pattern, host)


def test_literal_prefixed_and_wildcard_patterns() -> None:
    auth = Authorizer.of(
        [
            acl("User:alice", Operation.READ, ALLOW, G, "app-", PRE),
            acl("User:bob", Operation.READ, ALLOW, G, "exact"),
            acl("User:carol", Operation.READ, ALLOW, G, "*"),
        ]
    )
    assert auth.authorize("User:alice", "h", Operation.READ, G, "app-1")
    assert not auth.authorize("User:alice", "h", Operation.READ, G, "other")
    assert not auth.authorize("User:alice", "h", Operation.READ, T, "app-1")  # another resource type
    assert auth.authorize("User:bob", "h", Operation.READ, G, "exact")
    assert not auth.authorize("User:bob", "h", Operation.READ, G, "exact-not")
    assert auth.authorize("User:carol", "h", Operation.READ, G, "anything")
    assert not auth.authorize("User:dave", "h", Operation.READ, G, "app-1")


def test_deny_wins_over_allow_whatever_the_pattern() -> None:
    auth = Authorizer.of(
        [
            acl("User:*", Operation.ALL, ALLOW, G, "*"),
            acl("User:alice", Operation.READ, DENY, G, "app-secret", PRE),
        ]
    )
    assert auth.authorize("User:alice", "h", Operation.READ, G, "app-1")
    assert not auth.authorize("User:alice", "h", Operation.READ, G, "app-secret-1")
    assert auth.authorize("User:alice", "h", Operation.DESCRIBE, G, "app-secret-1")  # DENY READ denies READ only
    assert auth.authorize("User:bob", "h", Operation.READ, G, "app-secret-1")
    everything_denied = Authorizer.of([acl("User:*", Operation.READ, ALLOW, G, "*"), acl("User:eve", Operation.ALL, DENY, G, "*")])
    assert not everything_denied.authorize("User:eve", "h", Operation.READ, G, "x")


def test_implied_operations_are_kafkas() -> None:
    for op in (Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER, Operation.ALL):
        auth = Authorizer.of([acl("User:a", op, ALLOW, G, "g")])
        assert auth.authorize("User:a", "h", Operation.DESCRIBE, G, "g"), op
    assert Authorizer.of([acl("User:a", Operation.ALTER_CONFIGS, ALLOW, G, "g")]).authorize(
        "User:a", "h", Operation.DESCRIBE_CONFIGS, G, "g"
    )
    describe_only = Authorizer.of([acl("User:a", Operation.DESCRIBE, ALLOW, G, "g")])
    assert not describe_only.authorize("User:a", "h", Operation.READ, G, "g")
    assert not describe_only.authorize("User:a", "h", Operation.DELETE, G, "g")
    assert not Authorizer.of([acl("User:a", Operation.READ, ALLOW, G, "g")]).authorize("User:a", "h", Operation.DELETE, G, "g")
    assert GRANTED_BY[Operation.READ] == {Operation.READ, Operation.ALL}


def test_hosts_super_users_and_no_acl_found() -> None:
    auth = Authorizer.of([acl("User:a", Operation.READ, ALLOW, G, "g", host="10.0.0.1")], super_users=["User:root"])
    assert auth.authorize("User:a", "10.0.0.1", Operation.READ, G, "g")
    assert not auth.authorize("User:a", "10.0.0.2", Operation.READ, G, "g")
    assert auth.authorize("User:root", "anywhere", Operation.DELETE, G, "whatever")
    assert not auth.authorize("User:a", "10.0.0.1", Operation.READ, G, "no-acls")
    lenient = Authorizer.of([acl("User:a", Operation.READ, ALLOW, G, "g")], allow_everyone_if_no_acl_found=True)
    assert lenient.authorize("User:x", "h", Operation.READ, G, "no-acls")
    assert not lenient.authorize("User:x", "h", Operation.READ, G, "g")  # g has ACLs, none for x


def test_bad_bindings_are_refused() -> None:
    with pytest.raises(AclError, match="TYPE:NAME"):
        AclBinding("alice", Operation.READ, ALLOW, G, "g")
    with pytest.raises(AclError, match="PREFIXED"):
        AclBinding("User:a", Operation.READ, ALLOW, G, "*", PRE)
    with pytest.raises(AclError, match="lacks"):
        AclBinding.from_mapping({"principal": "User:a", "operation": "READ"})
    with pytest.raises(AclError):
        AclBinding.from_mapping({"principal": "User:a", "operation": "FLY", "resourceType": "GROUP", "resourceName": "g"})


def test_the_acl_file_is_reloaded_and_a_bad_edit_keeps_the_policy(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "acls.json"
    binding = {"principal": "User:a", "operation": "READ", "resourceType": "GROUP", "resourceName": "g"}
    path.write_text(json.dumps({"acls": [binding], "superUsers": ["User:root"]}))
    policy = acl_file.AclFile(path, ["User:admin"])
    assert policy().authorize("User:a", "h", Operation.READ, G, "g")
    assert policy().authorize("User:admin", "h", Operation.DELETE, G, "g")
    monkeypatch.setattr(acl_file, "CHECK_INTERVAL_S", 0.0)
    path.write_text(json.dumps({"acls": []}))
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert not policy().authorize("User:a", "h", Operation.READ, G, "g")
    path.write_text("{not json")
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 2 * 10**9))
    assert not policy().authorize("User:a", "h", Operation.READ, G, "g")  # the previous policy holds
    with pytest.raises(AclError):
        acl_file.AclFile(path)


NAMES = st.sampled_from(["app-", "app-1", "app-12", "other", "*", "a"])
def _bindings(pattern: PatternType, names: list[str]) -> st.SearchStrategy[AclBinding]:
    return st.builds(
        AclBinding,
        principal=st.sampled_from(["User:alice", "User:bob", "User:*"]),
        operation=st.sampled_from(list(Operation)),
        permission=st.sampled_from(list(Permission)),
        resource_type=st.sampled_from([G, T]),
        resource_name=st.sampled_from(names),
        pattern_type=st.just(pattern),
        host=st.sampled_from(["*", "10.0.0.1"]),
    )


BINDINGS = st.one_of(_bindings(LIT, ["app-", "app-1", "other", "*"]), _bindings(PRE, ["app-", "app-1", "o"]))


@given(
    st.lists(BINDINGS, max_size=12),
    st.sampled_from(["User:alice", "User:bob"]),
    st.sampled_from(["10.0.0.1", "10.0.0.2"]),
    st.sampled_from(list(Operation)),
    st.sampled_from([G, T]),
    NAMES,
    st.booleans(),
)
def test_the_indexed_decision_is_the_scanning_one(bindings, principal, host, op, rtype, name, lenient) -> None:
    auth = Authorizer.of(bindings, allow_everyone_if_no_acl_found=lenient)
    assert auth.authorize(principal, host, op, rtype, name) == naive(auth, principal, host, op, rtype, name)


def test_a_prefixed_lookup_costs_the_prefix_not_the_square_of_the_name() -> None:
    """A group id may be as long as a request frame; slicing each of its prefixes would take
    hours for a 1 MiB id (10^12 bytes copied), walking the prefixes that exist takes microseconds."""
    auth = Authorizer.of(
        [acl("User:alice", Operation.READ, ALLOW, G, "app-", PRE), acl("User:alice", Operation.READ, DENY, G, "ap" + "p" * 50, PRE)]
    )
    huge = "app-" + "x" * (1 << 20)
    start = time.perf_counter()
    for _ in range(10):
        assert auth.authorize("User:alice", "h", Operation.READ, G, huge)
        assert not auth.authorize("User:alice", "h", Operation.READ, G, "a" + "p" * (1 << 20))
    assert time.perf_counter() - start < 1.0
