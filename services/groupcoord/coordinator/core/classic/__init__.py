"""The classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup): the group, its
handlers and timers, and the embedded consumer protocol its members speak."""
