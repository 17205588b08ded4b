"""Operator tools that talk to the gateway over the Kafka protocol (``groupcoord groups``)."""
