"""What the gateway advertises in ApiVersions, and how it answers that request.

The gateway may only advertise what it can really serve: for a forwarded API the intersection
of the upstream broker's range and kio's; for an API our own handlers serve (the group APIs),
the handler's range intersected with kio's, whatever the upstream says. A client asking for an
ApiVersions version above ours gets UNSUPPORTED_VERSION in a v0 response carrying our list, as
Kafka does, so it can retry with a version we know.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i64

from groupcoord.common.group_api_declarations import DECLARATIONS, NOT_SERVED
from groupcoord.common.kafka_wire import codec
from groupcoord.common.kafka_wire.api_keys import ApiKey
from groupcoord.common.upstream_groups import NO_FEATURES, Features
from groupcoord.gateway.messages.kio_entities import NO_THROTTLE, element_type, has_field

VersionRanges = Mapping[int, tuple[int, int]]


class ServedApi(Protocol):
    """An API the gateway answers itself, as the transport needs it: the versions it serves.

    The group handler's table of these (api key -> its entry, which also carries the adapter:
    :class:`~groupcoord.gateway.groups.serving.AdaptedApi`), derived from the group APIs'
    declarations (:mod:`groupcoord.common.group_api_declarations`), is what the gateway routes
    by and ApiVersions advertises from. Declared here, implemented there: the transport never
    imports group serving.
    """

    @property
    def versions(self) -> tuple[int, int]: ...


# Every API that names only groups, served or not. When our coordinator serves groups, the ones
# it does not handle must not reach the upstream cluster either: its coordinator knows nothing
# of our groups and would answer (e.g. ConsumerGroupDescribe: "empty") as if it did.
GROUP_API_KEYS: frozenset[ApiKey] = frozenset(api.key for api in DECLARATIONS if api.only_groups) | NOT_SERVED


# Produce v10+ and Fetch v16+ (KIP-951) name the new partition leader's host and port in their
# answers (``node_endpoints``) when a leader moved, and clients then connect to it directly:
# past the gateway, to an address that may not even be reachable from them. Librdkafka did so
# against Kafka 4.4 right after a topic was created (its first Produce met
# NOT_LEADER_OR_FOLLOWER), dropped that connection at the next Metadata, and resent the batch:
# duplicates. The gateway forwards Fetch byte for byte (rewriting every answer would decode the
# data path), so it advertises Fetch below KIP-951; clients then find the new leader through
# Metadata, which names gateway listeners. Produce goes to v12, which transaction version 2
# needs (the broker adds a partition to the transaction itself only from v12, KIP-890 part 2):
# its answers name endpoints only beside NOT_LEADER_OR_FOLLOWER, and those few are rewritten
# (``gateway/proxy/broker_addresses.py``). v13 names topics by id only: not advertised.
FORWARDED_CEILINGS: Mapping[int, int] = {ApiKey.PRODUCE: 12, ApiKey.FETCH: 15}


def _intersect(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int] | None:
    lo, hi = max(a[0], b[0]), min(a[1], b[1])
    return (lo, hi) if lo <= hi else None


def advertised_versions(upstream: VersionRanges, handled: VersionRanges) -> dict[int, tuple[int, int]]:
    out: dict[int, tuple[int, int]] = {}
    for key in sorted(set(upstream) | set(handled)):
        if handled and key in GROUP_API_KEYS and key not in handled:
            continue
        theirs = handled.get(key, upstream.get(key))
        codec_range = codec.CODEC_VERSIONS.get(key)
        if theirs is None or codec_range is None:
            continue
        both = _intersect(theirs, codec_range)
        if both is not None and key in FORWARDED_CEILINGS:
            both = _intersect(both, (0, FORWARDED_CEILINGS[key]))
        if both is not None:
            out[key] = both
    return out


# The features whose levels the gateway passes on from the upstream, with the highest level
# it serves: transaction.version, because the transactions are the upstream's (its transaction
# coordinator bumps epochs and writes the markers) and the group coordinator's share of level 2
# (TxnOffsetCommit v5 adding its partition itself) is served. A client then runs its
# transactions at the level the upstream finalized, as it would against the upstream alone.
PASSED_ON_FEATURES: Mapping[str, int] = {"transaction.version": 2}

# The features the gateway finalizes itself, whatever the upstream, at the level it serves:
# share.version, since share groups are ours on every upstream, at 2 (KIP-1191's dead-letter
# queues, which our coordinator writes), and streams.version 1, since streams groups are ours
# too (KIP-1071). group.version is not named: it is Kafka's controller level for its own
# coordinator (the APIs say what we serve).
OWN_FEATURES: Mapping[str, int] = {"share.version": 2, "streams.version": 1}


def advertised_features(upstream: Features) -> Features:
    """What ApiVersions names of features: the ``PASSED_ON_FEATURES`` the upstream has, capped,
    and ``OWN_FEATURES`` (finalized at the upstream's epoch, or 0 if it finalizes none: a
    client reads no finalized feature of an epoch below 0)."""
    supported = {
        name: (lo, min(hi, top))
        for name, top in PASSED_ON_FEATURES.items()
        if name in upstream.supported
        for lo, hi in [upstream.supported[name]]
        if lo <= min(hi, top)
    }
    finalized = {
        name: (min(lo, top), min(hi, top))
        for name, top in PASSED_ON_FEATURES.items()
        if name in upstream.finalized
        for lo, hi in [upstream.finalized[name]]
    }
    supported.update({name: (0, top) for name, top in OWN_FEATURES.items()})
    finalized.update({name: (top, top) for name, top in OWN_FEATURES.items()})
    return Features(supported, finalized, max(upstream.finalized_epoch, 0))


def api_versions_response(
    version: int, advertised: VersionRanges, features: Features = NO_FEATURES
) -> tuple[int, Any]:
    """(response version, body) answering an ApiVersions request at ``version``; v3 and later
    name ``features`` (those of :func:`advertised_features`)."""
    top = advertised.get(ApiKey.API_VERSIONS, (0, 0))[1]
    error = ErrorCode.none
    if version > top:
        version, error = 0, ErrorCode.unsupported_version
    body_type = codec.response_type(ApiKey.API_VERSIONS, version)
    entry_type = element_type(body_type, "api_keys")
    entries = tuple(
        entry_type(api_key=i16(k), min_version=i16(lo), max_version=i16(hi))
        for k, (lo, hi) in advertised.items()
    )
    kwargs: dict[str, Any] = {"error_code": error, "api_keys": entries}
    if has_field(body_type, "throttle_time"):
        kwargs["throttle_time"] = NO_THROTTLE
    if has_field(body_type, "finalized_features"):
        supported = element_type(body_type, "supported_features")
        finalized = element_type(body_type, "finalized_features")
        kwargs["supported_features"] = tuple(
            supported(name=n, min_version=i16(lo), max_version=i16(hi))
            for n, (lo, hi) in features.supported.items()
            if lo > 0 or version >= 4  # KIP-1022: a range from level 0 is not named before v4
        )
        kwargs["finalized_features_epoch"] = i64(features.finalized_epoch)
        kwargs["finalized_features"] = tuple(
            finalized(name=n, min_version_level=i16(lo), max_version_level=i16(hi))
            for n, (lo, hi) in features.finalized.items()
        )
    return version, body_type(**kwargs)
