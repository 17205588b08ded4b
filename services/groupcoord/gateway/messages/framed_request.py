"""A client's request as it comes off its connection: framed, not decoded.

The transport frames it (:class:`~groupcoord.gateway.transport.protocol.ServerConnection`) and
the proxy forwards it byte for byte (:class:`~groupcoord.gateway.proxy.upstream.UpstreamLink`)
or checks it for internal topics first (:mod:`~groupcoord.gateway.proxy.internal_topics`); it
lives below both, so neither imports the other for it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Request:
    """A framed request. ``frame`` is the payload after the size prefix (header + body)."""

    seq: int
    api_key: int
    api_version: int
    correlation_id: int
    frame: bytes
