"""What a worker process hosts: the coordinator shards of its partitions and how they are served.

The worker (:mod:`.worker`) is the same for any kind of coordinator shard: a runtime, a gRPC
server, health, metrics. What differs is bundled here, so that the product binds the group
coordinator (``coordinator_service.GROUP_COORDINATOR``) in code, and tests bind a state machine
of their own through the same entry (``supervisor.main(args, hosted)``) without the product
naming any test module.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any

import grpc

from groupcoord.coordinator.runtime.replicas import ShardFactory
from groupcoord.coordinator.runtime.worker_runtime import WorkerRuntime


@dataclass(frozen=True)
class HostedShards:
    """How to build a partition's coordinator shard, and how to serve it over gRPC.

    Sent to each spawned worker process, so every field must pickle (module-level functions
    and classes do)."""

    factory: ShardFactory
    # Adds the services to the server; returns the worker-lifetime tasks they need (e.g. the
    # topic-metadata follower feeding partitions through ``runtime.submit``, which the group
    # coordinator's service also asks), each started after the runtime and cancelled at exit.
    add_services: Callable[[grpc.aio.Server, WorkerRuntime], Iterable[Coroutine[Any, Any, None]] | None]
    # Checks the configuration before the shard process starts its workers; raises SystemExit
    # with one line for what would fail every partition's load (an unknown assignor).
    check: Callable[[], None] | None = None
