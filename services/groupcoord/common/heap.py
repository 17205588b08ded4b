"""What a long-running process does with the objects it built to start.

CPython's cyclic garbage collector rescans every tracked object it has not been told to ignore
in each full (generation 2) collection, and a serving process runs one every few seconds. A
gateway's heap after start is nearly all permanent: modules, classes (kio's schema types for
every API version it serves), its servers and listeners. Measured in ``bench/run.py
e2e-heartbeat`` (2 cores, 2026-11-28): the gateway process ran 12 full collections in a 2-minute
run, 70 ms each on average and up to 121 ms, with every heartbeat in flight waiting behind
them; after :func:`freeze_startup_objects` its full collections took 38 ms in all, the closed-loop
p99 fell from 116 to 78 ms and the throughput rose 11 %. The shard workers do the same for
the state they load (:func:`groupcoord.coordinator.runtime.loader.gc_paused`).

State that changes while it is served cannot be frozen: a shard worker's groups, members and
targets are replaced as they change, and each replacement survives into the oldest
generation, so a busy partition triggers full collections that scan all of it. Measured in
``bench/run.py assignment-offload`` (2026-11-28 evening): a group of 1,000 members reassigning
every half second made four full collections in 10 s, 20-39 ms each, the largest stalls of
the other groups' heartbeats. That load makes about four collections of the middle
generation a second, so :func:`space_out_full_collections` allows a full one every 25 s at
most; none ran in the bench's 10-second phases after it.
"""

from __future__ import annotations

import gc


def freeze_startup_objects() -> None:
    """Collect what start-up left as garbage, then move every surviving object into the
    permanent generation, which collections skip (``gc.freeze``). Call once a process is
    ready to serve; objects made later are collected as usual."""
    gc.collect()
    gc.freeze()


FULL_COLLECTION_EVERY = 100
"""Collections of the middle generation between two full ones (CPython's default is 10).
CPython also waits until a quarter of the oldest generation is new; this bounds how often a
full collection can come under a steady churn of long-lived objects. What it costs: cyclic
garbage that reached the oldest generation is freed up to ten times later."""


def space_out_full_collections() -> None:
    """Run full collections at most every :data:`FULL_COLLECTION_EVERY` collections of the
    middle generation, leaving the young generations' thresholds as they are. Process-wide:
    called by each shard worker's runtime as it starts."""
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_EVERY)
