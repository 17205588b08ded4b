"""The gateway: the Kafka-protocol server clients bootstrap to (``groupcoord gateway``).

What lives here: the sans-IO connection state (:mod:`.protocol`) and its asyncio transport
(:mod:`.client_session`, :mod:`.server`, :mod:`.listeners`: one listener per upstream broker);
listener security (TLS, SASL, re-authentication); the group APIs (:mod:`.group_apis`), which
translate wire requests into coordinator calls (:mod:`.wire_translation`), authorize them
(:mod:`.group_authorization`) and route each to the worker leading the group's state partition
(:mod:`.leadership`, :mod:`.layout`, :mod:`.shard_client`); every other API forwarded byte for
byte to the upstream cluster (:mod:`.upstream`) with broker addresses rewritten to the gateway's
(:mod:`.broker_addresses`); ApiVersions (:mod:`.api_versions`).

May import :mod:`groupcoord.common`, :mod:`groupcoord.authorization`,
:mod:`groupcoord.observability`, the placement types of :mod:`groupcoord.controlplane` and the
generated gRPC messages. Never :mod:`groupcoord.coordinator`: the coordinator is reached only
over gRPC, so the two deploy, scale and fail independently.
"""
