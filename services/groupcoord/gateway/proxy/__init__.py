"""The upstream Kafka cluster behind the gateway: forwarding, and the addresses clients see.

``upstream`` (the :class:`Upstream` link: versions, requests on a listener's behalf),
``listeners`` (one gateway listener per upstream broker), ``broker_addresses`` (Metadata,
FindCoordinator and DescribeCluster answers rewritten to gateway addresses),
``internal_topics`` (the coordinator's topics refused to clients, as Kafka refuses its own),
``advertised_host`` (the name listeners advertise). May import ``groupcoord.common`` and
``messages`` (the framed requests it forwards); never ``transport`` (which hands it those
requests), ``security`` or ``groups``, never ``groupcoord.coordinator``.
"""
