"""The Kafka-protocol server: accepting connections, framing, one session per client connection.

``server`` (the :class:`Gateway`: listeners' connections to sessions; the ``GroupApiHandler``
it is handed), ``client_session`` (authentication state, then each request to the group
handler or the upstream link), ``protocol`` (sans-IO framing: bytes in, requests and bytes
out), ``api_versions`` (what the gateway really serves). May import ``groupcoord.common``,
``messages``, ``security`` and ``proxy``; never the group serving (it is handed a
``GroupApiHandler``, and asks it what it needs: the served APIs' versions, the shard that
served a request) and never ``groupcoord.coordinator``.
"""
