"""kio-based codec: round trips, unknown tagged fields, and the versions we advertise."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest, TopicPartitions
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.static.primitive import i32

from groupcoord.common.kafka_wire import codec
from groupcoord.gateway.transport.api_versions import advertised_versions, api_versions_response


def heartbeat() -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(
        group_id="g",
        member_id="m",
        member_epoch=i32(3),
        subscribed_topic_names=("a", "b"),
        topic_partitions=(TopicPartitions(topic_id=uuid.UUID(int=7), partitions=(i32(1), i32(2))),),
    )


def test_request_round_trip_through_header_and_body() -> None:
    frame = codec.encode_request(9, "client-1", heartbeat())
    header, body = codec.decode_request(frame)
    assert (header.request_api_key, header.request_api_version, header.correlation_id) == (68, 1, 9)
    assert header.client_id == "client-1"
    assert body == heartbeat()


def test_unknown_tagged_fields_from_a_newer_client_are_skipped() -> None:
    plain = codec.encode(heartbeat())
    # top-level tagged section: one tag (99) of two bytes, which kio does not know
    newer = plain[:-1] + bytes([1, 99, 2, 0xAB, 0xCD])
    value, consumed = codec.decode(ConsumerGroupHeartbeatRequest, newer)
    assert value == heartbeat() and consumed == len(newer)


def test_unknown_tagged_fields_in_nested_structs_are_skipped() -> None:
    req = MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name="t"),),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    plain = codec.encode(req)
    # the nested topic's tagged section is its last byte before the top-level fields' bools
    idx = plain.index(b"t") + 1
    newer = plain[:idx] + bytes([1, 42, 1, 0xFF]) + plain[idx + 1 :]
    value, _ = codec.decode(MetadataRequest, newer)
    assert value == req


def test_garbage_is_a_decode_error() -> None:
    with pytest.raises(codec.DecodeError):
        codec.decode_request(codec.encode_request(1, None, heartbeat())[:-5])


def test_trailing_bytes_are_a_decode_error() -> None:
    with pytest.raises(codec.DecodeError, match="trailing"):
        codec.decode_request(codec.encode_request(1, None, heartbeat()) + b"\x00")


def test_advertised_versions_intersect_upstream_codec_and_handlers() -> None:
    upstream = {0: (0, 13), 1: (0, 17), 3: (0, 12), 18: (0, 4), 11: (0, 9), 999: (0, 1)}
    handled = {11: (2, 5), 68: (0, 1)}
    adv = advertised_versions(upstream, handled)
    assert adv[0] == (3, 12)  # kio starts Produce at v3; v13 names topics by id only
    assert adv[1] == (4, 15)  # Fetch v16+ names leaders past the gateway (KIP-951)
    assert adv[3] == (0, 12)
    assert adv[11] == (2, 5)  # our handler's range, not the upstream's
    assert adv[68] == (0, 1)  # served by us although the upstream lacks it
    assert 999 not in adv  # kio cannot decode it


def test_group_apis_our_coordinator_does_not_serve_are_not_forwarded_either() -> None:
    upstream = {3: (0, 12), 69: (0, 0), 15: (0, 5)}
    assert 69 not in advertised_versions(upstream, {15: (0, 5)})
    assert advertised_versions(upstream, {})[69] == (0, 0)  # plain proxy: the upstream serves groups


def test_api_versions_above_ours_gets_unsupported_version_in_v0() -> None:
    adv = {18: (0, 3), 3: (0, 12)}
    version, body = api_versions_response(7, adv)
    assert version == 0 and body.error_code == ErrorCode.unsupported_version
    assert {(a.api_key, a.min_version, a.max_version) for a in body.api_keys} == {(18, 0, 3), (3, 0, 12)}
    version, body = api_versions_response(3, adv)
    assert version == 3 and body.error_code == ErrorCode.none
