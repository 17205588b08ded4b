"""The classic group protocol, one concept per module: the group (classic_group.py), JoinGroup
(join.py), SyncGroup (sync.py), Heartbeat and LeaveGroup (classic_membership.py), the rebalance — join
phase, completion of a generation, timers (rebalance.py, keys in classic_timers.py) — the parked
requests answered later (waiters.py), the answers (responses.py), replay (classic_replay.py), and the
embedded consumer protocol its members speak (consumer_protocol.py). Handlers are functions
over the partition's :class:`~groupcoord.coordinator.core.classic.classic_context.ClassicContext`."""
