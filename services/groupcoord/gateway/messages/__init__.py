"""The Kafka messages every layer of the gateway handles, below all of them.

``framed_request`` (:class:`~.framed_request.Request`: a client's request as framed off its
connection, which the transport reads and the proxy forwards), ``kio_entities`` (what the
layers ask of kio's per-version entity classes), ``wire_translation`` (kio ⇄ the coordinator's
protobuf messages, for the group adapters and the refusals authorization builds). May import
``groupcoord.common`` only: ``transport``, ``proxy``, ``security`` and ``groups`` all import it,
so it imports none of them.
"""
