"""TxnOffsetCommit and AddOffsetsToTxn hooks (the gateway answers them once transactional
offsets are served here): WRITE on the transactional id first, then READ on the group, then
READ per topic, each refusal with Kafka's error where the API carries it."""

from __future__ import annotations

import pytest

from groupcoord.authorization.acls import AclBinding, Authorizer, Operation, Permission, ResourceType
from groupcoord.common.kafka_wire import codec
from groupcoord.gateway.security.group_acls import Caller
from groupcoord.gateway.security.group_authorization import GroupAuthorization
from tests.authorization.test_group_api_authorization import build

ALICE = Caller("User:alice", "127.0.0.1")


def policy(*grants: tuple[ResourceType, str, Operation]) -> GroupAuthorization:
    bindings = [AclBinding(ALICE.principal, op, Permission.ALLOW, rtype, name) for rtype, name, op in grants]
    return GroupAuthorization(lambda: Authorizer.of(bindings))


def txn_offset_commit() -> object:
    return build(
        28,
        3,
        {
            "transactional_id": "tx-1",
            "group_id": "app-1",
            "producer_id": 7,
            "producer_epoch": 0,
            "generation_id": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [
                {"name": "ok", "partitions": [{"partition_index": 0, "committed_offset": 5, "committed_leader_epoch": -1, "committed_metadata": None}]},
                {"name": "secret", "partitions": [{"partition_index": 1, "committed_offset": 5, "committed_leader_epoch": -1, "committed_metadata": None}]},
            ],
        },
    )


@pytest.mark.parametrize(
    ("grants", "expected"),
    [
        ([], {"ok": 53, "secret": 53}),  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        ([(ResourceType.TRANSACTIONAL_ID, "tx-1", Operation.WRITE)], {"ok": 30, "secret": 30}),
        (
            [(ResourceType.TRANSACTIONAL_ID, "tx-1", Operation.WRITE), (ResourceType.GROUP, "app-1", Operation.READ)],
            {"ok": 29, "secret": 29},
        ),
    ],
)
def test_txn_offset_commit_refusals_in_kafkas_order(grants: list, expected: dict) -> None:
    response_type = codec.response_type(28, 3)
    verdict = policy(*grants).check(28, ALICE, 3, response_type, txn_offset_commit())
    assert verdict.request is None and callable(verdict.denied)
    body = verdict.denied(response_type)
    assert {t.name: int(p.error_code) for t in body.topics for p in t.partitions} == expected
    codec.encode_response(1, body)  # a valid response of that version


def test_txn_offset_commit_serves_the_allowed_topics_and_merges_the_refused_back() -> None:
    response_type = codec.response_type(28, 3)
    auth = policy(
        (ResourceType.TRANSACTIONAL_ID, "tx-1", Operation.WRITE),
        (ResourceType.GROUP, "app-1", Operation.READ),
        (ResourceType.TOPIC, "ok", Operation.READ),
    )
    verdict = auth.check(28, ALICE, 3, response_type, txn_offset_commit())
    assert [t.name for t in verdict.request.topics] == ["ok"]  # nothing refused reaches a shard
    topic_type = response_type.__dataclass_fields__["topics"].type.__args__[0]
    partition_type = topic_type.__dataclass_fields__["partitions"].type.__args__[0]
    from groupcoord.gateway.security.group_acls import make as _make  # noqa: PLC0415

    served = _make(response_type, topics=(topic_type(name="ok", partitions=(partition_type(partition_index=0, error_code=0),)),))
    merged = verdict.finish(served)
    assert [(t.name, int(t.partitions[0].error_code)) for t in merged.topics] == [("ok", 0), ("secret", 29)]


@pytest.mark.parametrize(
    ("grants", "code"),
    [
        ([], 53),
        ([(ResourceType.TRANSACTIONAL_ID, "tx-1", Operation.WRITE)], 30),
        ([(ResourceType.TRANSACTIONAL_ID, "tx-1", Operation.WRITE), (ResourceType.GROUP, "app-1", Operation.READ)], None),
    ],
)
def test_add_offsets_to_txn(grants: list, code: int | None) -> None:
    response_type = codec.response_type(25, 3)
    request = build(25, 3, {"transactional_id": "tx-1", "producer_id": 7, "producer_epoch": 0, "group_id": "app-1"})
    verdict = policy(*grants).check(25, ALICE, 3, response_type, request)
    if code is None:
        assert verdict.request is request
    else:
        assert int(verdict.denied(response_type).error_code) == code
