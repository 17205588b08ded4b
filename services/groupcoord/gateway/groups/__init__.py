"""Serving the group APIs: Kafka requests translated into envelopes for the coordinator workers.

``serving`` (the core, naming no group type: a request's context and authorization, routing to
the worker leading the group's partition, held through a failover), one module of adapters per
group type, each registering its ``ADAPTERS`` against the declarations in
:mod:`groupcoord.common.group_api_declarations` (``classic_apis``: JoinGroup, SyncGroup,
Heartbeat, LeaveGroup; ``consumer_apis``: KIP-848; ``share_apis``: KIP-932, with the ShareFetch
path and the share sessions' connection state in ``share_fetch`` and the session table in
``share_sessions``; ``offsets_apis``: committed and transactional offsets; ``admin_apis``:
listing, describing and deleting groups, FindCoordinator, group configs), ``group_apis`` (the one
table of them all, and the handler), ``worker_client`` (pipelined gRPC streams to the
coordinator processes' workers), ``layout``/``leadership`` (which worker leads which state-topic
partition), ``topic_catalog`` (the upstream's partition counts, for Kafka's commit validation).

May import ``groupcoord.common``, ``groupcoord.rpc``, ``security`` and ``messages``; never
``transport`` (it is handed this package's handler, and declares what it needs of it) nor
``proxy`` (the upstream is reached through what the handler is handed), and never
``groupcoord.coordinator``: the workers are reached over gRPC only.
"""
