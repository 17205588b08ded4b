"""The Kubernetes operator (kopf): one ``GroupCoordinator`` custom resource per coordinator
cluster.

:mod:`.spec` reads the resource, :mod:`.build` turns it into workloads (pure),
:mod:`.reconcile` applies them and places partitions with
:func:`groupcoord.controlplane.placement.place`, recording leaders and epochs in the status
that shard and gateway processes watch; :mod:`.rollout` rolls shard processes one at a time
(partitions moved away first); :mod:`.election` keeps one active replica; :mod:`.handlers` is
the kopf wiring; :mod:`.crd` generates the CRD.

A package of its own (``groupcoord_operator``, not ``operator``, which would shadow the
standard library). May import :mod:`groupcoord.controlplane.placement`,
:mod:`groupcoord.common` and the metrics endpoint; never the gateway or the coordinator.
"""
