"""Produce answers naming the new leader (KIP-951's ``node_endpoints``, Produce v10+): rewritten
to gateway listeners, so a client never connects past the gateway; and found without decoding
the answers that cannot name one (they carry no NOT_LEADER_OR_FOLLOWER)."""

from __future__ import annotations

import datetime

import kio.schema.produce.v12.response as produce
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32, i32Timedelta, i64

from groupcoord.common.kafka_wire import codec
from groupcoord.common.kafka_wire.api_keys import ApiKey
from groupcoord.gateway.proxy import broker_addresses


def produce_answer(error: ErrorCode, endpoints: tuple[tuple[int, str, int], ...] = ()) -> produce.ProduceResponse:
    partition = produce.PartitionProduceResponse(
        index=i32(0),
        error_code=error,
        base_offset=i64(1_000_000 if error == ErrorCode.none else -1),
        log_append_time=None,
        log_start_offset=i64(0),
        record_errors=(),
        error_message=None,
        current_leader=produce.LeaderIdAndEpoch(leader_id=BrokerId(endpoints[0][0] if endpoints else -1), leader_epoch=i32(3)),
    )
    return produce.ProduceResponse(
        responses=(produce.TopicProduceResponse(name=TopicName("orders"), partition_responses=(partition,)),),
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        node_endpoints=tuple(
            produce.NodeEndpoint(node_id=BrokerId(n), host=h, port=i32(p), rack=None) for n, h, p in endpoints
        ),
    )


def test_a_not_leader_answer_names_the_new_leader_at_its_gateway_listener() -> None:
    body = produce_answer(ErrorCode.not_leader_or_follower, ((2, "kafka-2.internal", 9092),))
    payload = codec.encode_response(7, body)
    assert broker_addresses.names_endpoints(ApiKey.PRODUCE, 12, payload)
    assert broker_addresses.upstream_brokers(ApiKey.PRODUCE, body) == [(2, "kafka-2.internal", 9092)]
    moved = broker_addresses.rewrite(ApiKey.PRODUCE, body, lambda node, _h, _p: ("gateway", 19092 + node))
    assert [(int(e.node_id), e.host, int(e.port)) for e in moved.node_endpoints] == [(2, "gateway", 19094)]
    assert moved.responses == body.responses
    codec.encode_response(7, moved)  # still a valid answer of its version


def test_an_accepted_produce_is_relayed_undecoded() -> None:
    payload = codec.encode_response(7, produce_answer(ErrorCode.none))
    assert not broker_addresses.names_endpoints(ApiKey.PRODUCE, 12, payload)
    # below v10 no answer names endpoints, whatever it says
    assert not broker_addresses.names_endpoints(ApiKey.PRODUCE, 9, b"\x00\x06")
    assert broker_addresses.names_endpoints(ApiKey.METADATA, 12, b"")
