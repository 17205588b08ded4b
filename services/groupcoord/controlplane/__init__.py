"""Who leads which state-topic partition, and how the processes learn it.

:mod:`.placement` is the one pure placement function (sticky, balanced, epochs bumped on every
move) shared by both control planes: the Kubernetes operator (``groupcoord_operator``) and the
in-process control plane of ``groupcoord up`` (:mod:`.local`, which also starts and restarts the
shard processes). :mod:`.kubernetes_leadership` is the read side for shard and gateway
processes deployed by the operator: placements read from the custom resource's status.

May import :mod:`groupcoord.common`, the generated ShardControl gRPC messages and, for the local
control plane, the embedded broker and observability defaults; never the gateway or the
coordinator's code (it talks to shard processes over ShardControl). :mod:`.placement` imports
nothing with I/O.
"""
