"""Who a client is and what it may do: listener TLS and SASL, and the group APIs' ACL checks.

``listener_security`` (per-listener TLS/SASL settings and principals), ``sasl_server`` (our own
SASL exchanges: PLAIN, SCRAM via scramp), ``relayed_sasl`` (passthrough: the client's exchange on
its own upstream connection), ``group_acls`` (the caller, the policy's decisions, verdicts and
the hooks several group types share), one module of authorization hooks per group type
(``classic_authorization``, ``consumer_authorization``, ``share_authorization``,
``offsets_authorization``, ``admin_authorization``), and ``group_authorization`` (the one table
of hooks, registered against the APIs' declarations, deciding with
:mod:`groupcoord.authorization`).

May import ``groupcoord.common``, ``groupcoord.authorization``, ``groupcoord.rpc`` (the refusals
are the coordinator's messages) and ``messages``; never ``groups``, ``transport`` or ``proxy``
(they import this package), never ``groupcoord.coordinator``.
"""
