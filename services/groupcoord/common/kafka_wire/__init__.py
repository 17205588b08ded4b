"""The Kafka wire format, as every service that speaks it needs it.

The gateway serves and forwards Kafka requests; a shard worker sends Metadata requests to the
upstream cluster. Both encode and decode through :mod:`.codec` (kio, with unknown tagged fields
skipped by :mod:`.tagged_fields`) and frame through :mod:`.framing`; all three are sans-IO
(bytes in, values out). :mod:`.exchange` is the one asyncio piece: one request on a connection
of its own, for the few calls that need no connection state. :mod:`.api_keys` names every
API key the code uses, the one place their numbers are written.
"""
