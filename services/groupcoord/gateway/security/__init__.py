"""Who a client is and what it may do: listener TLS and SASL, and the group APIs' ACL checks.

``listener_security`` (per-listener TLS/SASL settings and principals), ``sasl_server`` (our own
SASL exchanges: PLAIN, SCRAM via scramp), ``relayed_sasl`` (passthrough: the client's exchange on
its own upstream connection), ``group_authorization`` (one hook per group API, registered against
its declaration, deciding with :mod:`groupcoord.authorization`). May import
``groupcoord.common`` and ``groupcoord.authorization``; never ``groupcoord.coordinator``.
"""
