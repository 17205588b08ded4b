"""The coordinator: Kafka's group coordinator as a process of its own.

Three layers, each importing only the ones below it:

* :mod:`.core` — the sans-IO state machines. One *shard* (Kafka's word: the state machine of
  one state-topic partition, :class:`~.core.group_coordinator_shard.GroupCoordinatorShard`)
  answers each group API with a response and the records to write, and changes state only by
  replaying records. No I/O, no clock, no threads.
* :mod:`.runtime` — hosts shards: one single-writer loop per partition, the state-topic writer
  and loader, epoch fencing, timers. Knows the shard only through its contract
  (:mod:`.core.contract`), so it could host any shard; client transactions only through
  :mod:`.runtime.transactions`, for a shard that declares them (``transactions()``).
* :mod:`.server` — the processes: ``groupcoord shard`` (a supervisor and its worker
  processes; "shard" in the command and the custom resource's ``shards`` name a coordinator
  *process*, kept for compatibility) and the gRPC services the gateway and control planes call.

The gateway never imports this package: it reaches the coordinator only through the gRPC
contract in ``proto/groupcoord/rpc``.
"""
