"""The gateway: the Kafka-protocol server clients bootstrap to (``groupcoord gateway``).

One subpackage per job: :mod:`.transport` (the sans-IO framing, sessions, the server,
ApiVersions), :mod:`.security` (listener TLS and SASL, the group APIs' ACL checks, a module per
group type), :mod:`.groups` (the group APIs: a serving core and a module of adapters per group
type, registered against their declarations; the leadership table, the client of the
coordinator workers), :mod:`.proxy` (the upstream link, one listener per upstream broker, broker
addresses rewritten to the gateway's), and below them all :mod:`.messages` (framed requests,
kio entity helpers, kio ⇄ protobuf translation). Layered: ``transport`` and ``groups`` are
handed each other (neither imports the other); both may import ``security`` and ``proxy``
(``groups`` only ``security``); ``security`` and ``proxy`` import neither each other nor
anything above; ``messages`` imports no other subpackage.
:mod:`.assembly` builds them once, in dependency order (``build_gateway``), for
``groupcoord gateway`` (:mod:`.command`), ``groupcoord up`` and the tests.

May import :mod:`groupcoord.common`, :mod:`groupcoord.authorization`,
:mod:`groupcoord.observability`, the placement types of :mod:`groupcoord.controlplane` and the
generated gRPC messages. Never :mod:`groupcoord.coordinator`: the coordinator is reached only
over gRPC, so the two deploy, scale and fail independently.
"""
