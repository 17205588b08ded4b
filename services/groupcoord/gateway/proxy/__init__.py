"""The upstream Kafka cluster behind the gateway: forwarding, and the addresses clients see.

``upstream`` (the :class:`Upstream` link: versions, requests on a listener's behalf),
``listeners`` (one gateway listener per upstream broker), ``broker_addresses`` (Metadata,
FindCoordinator and DescribeCluster answers rewritten to gateway addresses),
``advertised_host`` (the name listeners advertise). May import ``groupcoord.common``; never
``groupcoord.coordinator``.
"""
