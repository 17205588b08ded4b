"""The sans-IO group coordinator: the state machine of one state-topic partition (a *shard*,
in Kafka's meaning) and the group types it holds.

A handler takes ``(request, now_ms)`` and returns a :class:`~.contract.CoordinatorResult` (the
response and the records to write) without mutating the state; state changes only in
``replay(record)``, the path live writes and the loader after a takeover share. The one thing a
handler changes is outside the state: a classic JoinGroup/SyncGroup handler parks its request
(``waiters``, answered by a later handler or timer), which a revert or a takeover drops. Timers are
intents returned as values, not callbacks. :mod:`.contract` is what the runtime may rely on.

Layout: :mod:`.group_coordinator_shard` (one partition's groups and offsets, one method per
API), :mod:`.group_operations` (the operation of each group API on it, from the APIs'
declarations), :mod:`.group_metrics` (its gauges and counters, which the runtime exports),
:mod:`.classic` (JoinGroup/SyncGroup groups), :mod:`.consumer` (KIP-848 groups),
:mod:`.migration` (between the two), :mod:`.share` (KIP-932 share groups and the delivery
state of their share-partitions), :mod:`.assignors` (server-side assignors), :mod:`.offsets`
and :mod:`.txn_offsets` (committed and transactional offsets), group admin and configs, and
the topics image the consumer and share groups assign from.

May import: itself, :mod:`groupcoord.common` (errors, record types) and the generated protobuf
messages (``groupcoord.records``, ``groupcoord.rpc``). Never asyncio, sockets, clocks, Kafka
clients or the runtime: the same code must run identically live and on replay.
"""
