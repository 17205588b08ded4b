"""The group APIs at the gateway: every group type's adapters in one table, and the handler
serving them.

Each group type brings its adapters in a module of its own (``ADAPTERS``: api key -> adapter);
the table registers them, once each, against the APIs' declarations
(:mod:`groupcoord.common.group_api_declarations`), so an adapter without a declaration, a
declaration without an adapter, or an API two group types both claim fails at import. Adding a
group type is its module and one entry in :data:`GROUP_TYPES`; the serving core
(:mod:`.serving`) does not change.
"""

from __future__ import annotations

from types import ModuleType

from groupcoord.common.group_api_declarations import registered_by_group_type
from groupcoord.gateway.groups import (
    admin_apis,
    classic_apis,
    consumer_apis,
    offsets_apis,
    share_apis,
    streams_apis,
)
from groupcoord.gateway.groups.serving import AdaptedApi, GroupServing

GROUP_TYPES: tuple[ModuleType, ...] = (
    classic_apis,
    consumer_apis,
    share_apis,
    streams_apis,
    offsets_apis,
    admin_apis,
)
"""The modules serving the group APIs, one per group type (and the offsets and admin APIs every
type shares), each with its ``ADAPTERS``."""


GROUP_APIS: dict[int, AdaptedApi] = {
    int(api.key): AdaptedApi(api.versions, adapter)
    for api, adapter in registered_by_group_type("gateway adapter", GROUP_TYPES, "ADAPTERS")
}
"""The group APIs the gateway serves: api key -> the declared versions (advertised intersected
with kio's) and the adapter serving them (one per declaration of
:mod:`groupcoord.common.group_api_declarations`). Keyed by plain ints, as request headers carry
them: an int finds an int key by identity, an enum key costs a comparison per lookup."""


class GroupApis(GroupServing):
    """The gateway's ``GroupApiHandler``: the serving core with every group type's adapters."""

    adapters = GROUP_APIS
