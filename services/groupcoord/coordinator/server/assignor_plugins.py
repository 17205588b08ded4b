"""Server-side assignors by name, built in or installed as plugins (Kafka's
``group.consumer.assignors``, which takes class names on the brokers' classpath).

``GROUPCOORD_GROUP_CONSUMER_GROUP_ASSIGNORS`` (the group config ``consumer_group_assignors``)
names the assignors a coordinator process offers, the first being the default; a member picks
one with ``group.remote.assignor``. A name is one of ours (``uniform``, ``range``) or a plugin:
an entry point of the group ``groupcoord.consumer_assignors`` in the shard's environment, so
``pip install`` of a package declaring

    [project.entry-points."groupcoord.consumer_assignors"]
    sticky-by-rack = "mypackage.assignors:StickyByRack"

makes ``sticky-by-rack`` usable. The entry point is a callable (a class) returning an object
with the interface of ``core/assignors/api.py``'s ``PartitionAssignor``: ``name`` and
``assign(group, topics)``. Each shard builds its own assignors (one may run on the offload
thread while another partition's runs on the loop, so none is shared); a name that is neither
ours nor installed stops ``groupcoord shard`` (and ``groupcoord up``) before any worker
starts, with one line naming it and what is installed
(``coordinator_service.check_consumer_assignors``), rather than a traceback at the first
heartbeat.

What a plugin's failure does: an ``assign`` that raises fails that group's assignment, as
Kafka's does (UNKNOWN_SERVER_ERROR, "Failed to compute a new target assignment for epoch
N: ..."), and only that group's (``core/consumer/assignment.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from importlib.metadata import entry_points

from groupcoord.coordinator.core.assignors.api import PartitionAssignor
from groupcoord.coordinator.core.consumer.consumer_context import BUILTIN_ASSIGNORS

ENTRY_POINT_GROUP = "groupcoord.consumer_assignors"


class UnknownAssignor(ValueError):
    """A configured assignor name that is neither built in nor installed."""


@functools.cache
def installed_plugins() -> Mapping[str, Callable[[], Callable[[], PartitionAssignor]]]:
    """Name -> loader of every installed ``groupcoord.consumer_assignors`` entry point (read
    once per process; a plugin's module is imported only when a configured name needs it)."""
    return {ep.name: ep.load for ep in entry_points(group=ENTRY_POINT_GROUP)}


def consumer_assignors(
    names: tuple[str, ...], plugins: Mapping[str, Callable[[], Callable[[], PartitionAssignor]]] | None = None
) -> dict[str, PartitionAssignor]:
    """New assignors ``names`` call for, in their order (the first is the default); a built-in
    name is ours even if a plugin claims it too. ``plugins``: name -> loader of the plugin's
    factory (the installed entry points' by default)."""
    found = installed_plugins() if plugins is None else plugins
    out: dict[str, PartitionAssignor] = {}
    for name in names:
        if name in BUILTIN_ASSIGNORS:
            out[name] = BUILTIN_ASSIGNORS[name]()
        elif name in found:
            assignor = found[name]()()
            if not callable(getattr(assignor, "assign", None)):
                raise UnknownAssignor(f"assignor plugin {name!r} has no assign(group, topics) method")
            out[name] = assignor
        else:
            installed = ", ".join(sorted([*BUILTIN_ASSIGNORS, *found]))
            raise UnknownAssignor(
                f"consumer group assignor {name!r} is neither built in nor installed as a "
                f"{ENTRY_POINT_GROUP!r} entry point (available: {installed})"
            )
    return out
