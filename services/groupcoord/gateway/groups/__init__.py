"""Serving the group APIs: Kafka requests translated into envelopes for the coordinator workers.

``group_apis`` (one adapter per group API, registered against its declaration in
:mod:`groupcoord.common.group_api_declarations`), ``wire_translation`` (kio ⇄ protobuf),
``worker_client`` (pipelined gRPC streams to the coordinator processes' workers),
``layout``/``leadership`` (which worker leads which state-topic partition), ``topic_catalog``
(the upstream's partition counts, for Kafka's commit validation). May import
``groupcoord.common``, ``groupcoord.rpc`` and ``security``; never ``groupcoord.coordinator``:
the workers are reached over gRPC only.
"""
