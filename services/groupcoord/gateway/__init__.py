"""The gateway: the Kafka-protocol server clients bootstrap to (``groupcoord gateway``).

One subpackage per job: :mod:`.transport` (the sans-IO framing, sessions, the server,
ApiVersions), :mod:`.security` (listener TLS and SASL, the group APIs' ACL checks),
:mod:`.groups` (the group APIs: adapters registered against their declarations, wire
translation, the leadership table, the client of the coordinator workers), :mod:`.proxy` (the
upstream link, one listener per upstream broker, broker addresses rewritten to the gateway's).
:mod:`.assembly` builds them once, in dependency order (``build_gateway``), for
``groupcoord gateway`` (:mod:`.command`), ``groupcoord up`` and the tests.

May import :mod:`groupcoord.common`, :mod:`groupcoord.authorization`,
:mod:`groupcoord.observability`, the placement types of :mod:`groupcoord.controlplane` and the
generated gRPC messages. Never :mod:`groupcoord.coordinator`: the coordinator is reached only
over gRPC, so the two deploy, scale and fail independently.
"""
