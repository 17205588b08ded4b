"""The GroupCoordinator CustomResourceDefinition, built in Python so there is one source of truth.

The Helm chart ships the rendered copy (``helm/groupcoord/crds/``; regenerate with
``python -m groupcoord_operator --print-crd > helm/groupcoord/crds/groupcoord.io_groupcoordinators.yaml``)
and a test fails when the two differ. The operator
validates each spec against the same ``openAPIV3Schema`` before acting, so a cluster without
(or with older) schema validation still ends in a clear ``Degraded`` condition instead of a
crash loop. Rules a structural schema cannot say (heartbeat < session timeout, the partition
count never changes) are CEL ``x-kubernetes-validations`` here *and* checked again by
:func:`groupcoord_operator.spec.parse_spec`.
"""

from __future__ import annotations

from typing import Any

from groupcoord_operator.crd_pod_template import integer, pod_template, quantity, resource_requirements

GROUP = "groupcoord.io"
VERSION = "v1alpha1"
KIND = "GroupCoordinator"
PLURAL = "groupcoordinators"
SINGULAR = "groupcoordinator"
SHORT_NAMES = ["gcoord"]
API_VERSION = f"{GROUP}/{VERSION}"

MAX_PARTITIONS = 1024
MAX_SHARDS = 256
MAX_THREADS = 64
MAX_STANDBYS = 3
ASSIGNORS = ["uniform", "range"]
MIGRATION_POLICIES = ["disabled", "downgrade", "upgrade", "bidirectional"]
SASL_MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
LISTENER_TYPES = ["internal", "nodeport", "loadbalancer"]
LOG_FORMATS = ["text", "json"]
CONDITION_TYPES = ["Ready", "Progressing", "Degraded", "Warning", "ReconciliationPaused"]
MAX_BROKER_PORTS = 64
MAX_LISTENERS = 8


def _secret_key_ref(description: str) -> dict:
    return {
        "type": "object",
        "description": description,
        "required": ["name", "key"],
        "properties": {
            "name": {"type": "string", "minLength": 1, "description": "Secret name (same namespace)."},
            "key": {"type": "string", "minLength": 1, "description": "Key within the Secret."},
        },
    }


def _listener_tls(what: str) -> dict:
    return {
        "type": "object",
        "description": f"{what}, with the server certificate from a Secret (e.g. cert-manager's).",
        "required": ["secretName"],
        "properties": {
            "secretName": {
                "type": "string",
                "minLength": 1,
                "description": "Secret holding the certificate and key.",
            },
            "certificate": {
                "type": "string",
                "default": "tls.crt",
                "description": "Key of the certificate (PEM).",
            },
            "key": {"type": "string", "default": "tls.key", "description": "Key of the private key (PEM)."},
            "clientAuth": {
                "type": "string",
                "enum": ["none", "requested", "required"],
                "default": "none",
                "description": "Client certificates, as Kafka's ssl.client.auth; the principal is the subject.",
            },
            "caCertificate": {
                "type": "string",
                "default": "ca.crt",
                "description": "Key (same Secret) of the CA bundle that signs client certificates.",
            },
        },
    }


def _listener_sasl(what: str) -> dict:
    return {
        "type": "object",
        "description": f"{what}: passthrough relays the client's exchange to the Kafka cluster; "
        "credentials checks it against credentialsSecret.",
        "required": ["mode"],
        "x-kubernetes-validations": [
            {
                "rule": "self.mode != 'credentials' || has(self.credentialsSecret)",
                "message": "mode credentials needs credentialsSecret",
            }
        ],
        "properties": {
            "mode": {
                "type": "string",
                "enum": ["credentials", "passthrough"],
                "description": "Who checks credentials.",
            },
            "mechanisms": {
                "type": "array",
                "items": {"type": "string", "enum": SASL_MECHANISMS},
                "description": "Enabled mechanisms (default: all).",
            },
            "credentialsSecret": {
                "type": "string",
                "description": "Secret with one key per user name, its value the password (mode credentials).",
            },
            "sessionLifetimeMs": {
                "type": "integer",
                "minimum": 0,
                "description": "KIP-368: clients re-authenticate within this (Kafka's connections.max.reauth.ms; "
                "mode credentials); 0 or absent: never.",
            },
        },
    }


def _listener(description: str, *, required: list[str] | None = None, security: dict | None = None) -> dict:
    """A listener (Strimzi's model): ``gateway.listener``, or an item of ``gateway.listeners``
    (``required`` name and port, with its own ``security`` properties)."""
    listed = required is not None
    schema: dict[str, Any] = {
        "type": "object",
        "description": description,
        "properties": {
            "name": {
                "type": "string",
                "pattern": "^[a-z0-9]{1,11}$",
                "maxLength": 11,
                **({} if listed else {"default": "plain"}),
                "description": "Listener name, as in status.listeners.",
            },
            "type": {
                "type": "string",
                "enum": LISTENER_TYPES,
                "default": "internal",
                "description": "internal: ClusterIP Service, each pod advertises its pod IP; "
                "nodeport: NodePort bootstrap Service, each pod advertises its node's IP with "
                "every listener port as a hostPort; loadbalancer: a LoadBalancer Service with "
                "every listener port, pods advertise its address.",
            },
            "port": integer(
                "Bootstrap port; the upstream broker with node id i is at port + 1 + i.",
                1024,
                65000,
                None if listed else 9092,
            ),
            "brokerPorts": integer(
                "Per-broker listener ports after the bootstrap port, one per upstream node id "
                "0 .. brokerPorts-1 (the same port on every gateway pod, so any pod behind the "
                "Service serves it): more than the largest broker node id.",
                1,
                MAX_BROKER_PORTS,
                3,
            ),
            "advertisedHost": {
                "type": "string",
                "description": "loadbalancer only: the address clients use (a DNS name on the load "
                "balancer); default: the Service's load-balancer ingress once assigned.",
            },
            **(security or {}),
        },
    }
    if listed:
        schema["required"] = required
        schema["x-kubernetes-validations"] = [
            {
                "rule": "!has(self.advertisedHost) || self.type == 'loadbalancer'",
                "message": "advertisedHost is only for type loadbalancer",
            }
        ]
    return schema


def _gateway_security() -> dict:
    """TLS and SASL on the gateway's client listeners (the names docs/security.md uses)."""
    return {
        "type": "object",
        "description": "TLS and SASL on the client listeners.",
        "properties": {
            "tls": _listener_tls("TLS on every listener"),
            "sasl": _listener_sasl("SASL on every listener"),
            "allowSharedUpstreamIdentity": {
                "type": "boolean",
                "default": False,
                "description": "Let clients of listeners that do not relay their SASL (mode credentials, or no sasl) "
                "reach a Kafka cluster that enforces ACLs under the coordinator's own Kafka credentials, with its "
                "rights; without it the gateway refuses to start there.",
            },
        },
    }


def _authorization() -> dict:
    return {
        "type": "object",
        "description": "Kafka ACLs enforced on every group API.",
        "properties": {
            "aclSource": {
                "type": "string",
                "enum": ["file", "upstream"],
                "default": "file",
                "description": "file: the aclConfigMap; upstream: the Kafka cluster's own ACLs (DescribeAcls).",
            },
            "aclConfigMap": {
                "type": "object",
                "description": "ConfigMap with the ACL bindings as JSON (aclSource file).",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string", "minLength": 1, "description": "ConfigMap name."},
                    "key": {
                        "type": "string",
                        "default": "acls.json",
                        "description": "Key of the JSON document.",
                    },
                },
            },
            "superUsers": {
                "type": "array",
                "items": {"type": "string", "pattern": "^[A-Za-z]+:.+$"},
                "description": "Principals allowed everything, as Kafka's super.users (e.g. User:admin).",
            },
            "allowEveryoneIfNoAclFound": {
                "type": "boolean",
                "default": False,
                "description": "Allow requests on resources no ACL names, as Kafka's allow.everyone.if.no.acl.found.",
            },
        },
    }


def spec_schema() -> dict[str, Any]:
    """The ``spec`` schema: ranges and enums the API server enforces on every write."""
    return {
        "type": "object",
        "description": "Desired state of one group-coordinator cluster.",
        "required": ["kafka", "stateTopic", "shards"],
        "x-kubernetes-validations": [
            {
                "rule": "self.standbysPerPartition < self.shards || self.standbysPerPartition == 0",
                "message": "standbysPerPartition must be smaller than shards (a standby lives on another shard)",
            }
        ],
        "properties": {
            "image": {
                "type": "string",
                "description": "Container image of the shard and gateway processes; the operator's default when empty.",
            },
            "imagePullPolicy": {
                "type": "string",
                "enum": ["Always", "IfNotPresent", "Never"],
                "default": "IfNotPresent",
                "description": "Pull policy for the workload image.",
            },
            "serviceAccountName": {
                "type": "string",
                "description": "ServiceAccount of shard and gateway pods; it needs get/list/watch on groupcoordinators to read leadership.",
            },
            "kafka": {
                "type": "object",
                "description": "The upstream Kafka cluster: forwarded traffic and the state topic.",
                "required": ["bootstrapServers"],
                "properties": {
                    "bootstrapServers": {
                        "type": "string",
                        "minLength": 1,
                        "description": "Comma-separated host:port list of Kafka brokers.",
                    },
                    "tls": {
                        "type": "object",
                        "description": "TLS to the brokers.",
                        "properties": {
                            "enabled": {"type": "boolean", "default": False, "description": "Use TLS."},
                            "caSecret": _secret_key_ref(
                                "CA bundle (PEM) that signs the broker certificates."
                            ),
                            "certSecret": _secret_key_ref("Client certificate (PEM) for mutual TLS."),
                            "keySecret": _secret_key_ref("Client private key (PEM) for mutual TLS."),
                        },
                    },
                    "sasl": {
                        "type": "object",
                        "description": "SASL authentication to the brokers.",
                        "required": ["mechanism", "usernameSecret", "passwordSecret"],
                        "properties": {
                            "mechanism": {
                                "type": "string",
                                "enum": SASL_MECHANISMS,
                                "description": "SASL mechanism.",
                            },
                            "usernameSecret": _secret_key_ref("The SASL user name."),
                            "passwordSecret": _secret_key_ref("The SASL password."),
                        },
                    },
                },
            },
            "authorization": _authorization(),
            "stateTopic": {
                "type": "object",
                "description": "The compacted Kafka topic holding group state; one partition = one single-writer event loop.",
                "required": ["partitions"],
                "properties": {
                    "name": {
                        "type": "string",
                        "default": "__groupcoord_state",
                        "pattern": r"^[a-zA-Z0-9._-]{1,249}$",
                        "description": "Topic name.",
                    },
                    "partitions": {
                        **integer(
                            "Number of state-topic partitions; fixed at creation (a group lives on "
                            "partition hash(group id) mod partitions, so changing it would orphan group state).",
                            1,
                            MAX_PARTITIONS,
                        ),
                        "x-kubernetes-validations": [
                            {"rule": "self == oldSelf", "message": "stateTopic.partitions is immutable"}
                        ],
                    },
                    "replicationFactor": integer(
                        "Replicas of each state-topic partition when the topic is created (Kafka's "
                        "offsets.topic.replication.factor); clamped to the Kafka cluster's broker count, "
                        "which the Warning condition reports.",
                        1,
                        32,
                        3,
                    ),
                    "minInsyncReplicas": integer(
                        "min.insync.replicas of the state topic: acks=all writes need this many replicas "
                        "(clamped to the replication factor in force).",
                        1,
                        32,
                        2,
                    ),
                },
                "x-kubernetes-validations": [
                    {
                        "rule": "!has(self.minInsyncReplicas) || !has(self.replicationFactor) || self.minInsyncReplicas <= self.replicationFactor",
                        "message": "minInsyncReplicas must not exceed replicationFactor",
                    }
                ],
            },
            "shards": integer("Number of coordinator shard pods (StatefulSet replicas).", 1, MAX_SHARDS),
            "threadsPerShard": integer("Event-loop worker threads per shard.", 1, MAX_THREADS, 2),
            "standbysPerPartition": integer(
                "Hot standbys tailing each partition on other shards (fast failover).", 0, MAX_STANDBYS, 0
            ),
            "groupDefaults": {
                "type": "object",
                "description": "Defaults for groups that do not override them (IncrementalAlterConfigs on GROUP).",
                "x-kubernetes-validations": [
                    {
                        "rule": "!has(self.heartbeatIntervalMs) || !has(self.sessionTimeoutMs) || self.heartbeatIntervalMs < self.sessionTimeoutMs",
                        "message": "heartbeatIntervalMs must be smaller than sessionTimeoutMs",
                    }
                ],
                "properties": {
                    "sessionTimeoutMs": integer("Consumer group session timeout.", 1000, 3_600_000, 45000),
                    "heartbeatIntervalMs": integer("Consumer group heartbeat interval.", 100, 600_000, 5000),
                    "assignors": {
                        "type": "array",
                        "minItems": 1,
                        "items": {"type": "string", "enum": ASSIGNORS},
                        "default": ["uniform", "range"],
                        "description": "Server-side assignors, preferred first (KIP-848).",
                    },
                    "maxGroupSize": integer("Maximum members per group.", 1, 1_000_000, 1000),
                    "migrationPolicy": {
                        "type": "string",
                        "enum": MIGRATION_POLICIES,
                        "default": "bidirectional",
                        "description": "Online migration between classic and consumer protocol (group.consumer.migration.policy).",
                    },
                    "shareDlqTopicNamePrefix": {
                        "type": "string",
                        "maxLength": 200,
                        "default": "dlq.",
                        "description": "The prefix every share group's dead-letter queue topic must have; empty allows any name (errors.deadletterqueue.topic.name.prefix, KIP-1191).",
                    },
                    "shareDlqAutoCreateTopics": {
                        "type": "boolean",
                        "default": False,
                        "description": "Whether a share group's missing dead-letter queue topic is created (errors.deadletterqueue.auto.create.topics.enable, KIP-1191).",
                    },
                },
            },
            "gateway": {
                "type": "object",
                "description": "The Kafka-protocol gateway clients bootstrap to.",
                "x-kubernetes-validations": [
                    {
                        "rule": "!has(self.listeners) || !has(self.listener)",
                        "message": "gateway.listener and gateway.listeners exclude each other",
                    },
                    {
                        "rule": "!has(self.listeners) || !has(self.security) || "
                        "(!has(self.security.tls) && !has(self.security.sasl))",
                        "message": "with gateway.listeners, TLS and SASL are set per listener (tls, authentication)",
                    },
                ],
                "properties": {
                    "replicas": integer("Gateway pods.", 1, 64, 2),
                    "security": _gateway_security(),
                    "listener": _listener(
                        "How clients reach the gateway (Strimzi's listener types); status.listeners shows the "
                        "bootstrap address. One listener, with security from gateway.security; for several, "
                        "listeners."
                    ),
                    "listeners": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": MAX_LISTENERS,
                        "description": "Several listeners, each with its own port, type, TLS and authentication "
                        "(Strimzi's listeners[]); every gateway pod serves all of them, and each gets a Service "
                        "(the first the gateway Service, the others <name>-gateway-<listener>) and an entry in "
                        "status.listeners. Instead of listener and gateway.security's tls and sasl.",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "x-kubernetes-validations": [
                            {
                                "rule": "self.all(a, self.all(b, a.name == b.name || "
                                "a.port + (has(a.brokerPorts) ? a.brokerPorts : 3) < b.port || "
                                "b.port + (has(b.brokerPorts) ? b.brokerPorts : 3) < a.port))",
                                "message": "listeners' ports overlap: each listener takes port .. port + brokerPorts",
                            },
                            {
                                "rule": "self.all(l, !(l.name in ['kafka', 'broker', 'metrics']))",
                                "message": "kafka, broker and metrics name the gateway's own ports: not a listener name",
                            },
                        ],
                        "items": _listener(
                            "One listener.",
                            required=["name", "port"],
                            security={
                                "tls": _listener_tls("TLS on this listener"),
                                "authentication": _listener_sasl("SASL on this listener"),
                            },
                        ),
                    },
                },
            },
            "resources": {
                "type": "object",
                "description": "Compute resources of the workloads.",
                "properties": {
                    "shard": resource_requirements(
                        "Resources of each shard container; requests.cpu, when not set, is cpuPerShardThread x threadsPerShard."
                    ),
                    "gateway": resource_requirements("Resources of each gateway container."),
                    "cpuPerShardThread": {
                        **quantity(
                            "CPU request per worker process of a shard: the pod requests this x threadsPerShard."
                        ),
                        "default": "500m",
                    },
                },
            },
            "template": {
                "type": "object",
                "description": "Pod template overrides per component.",
                "properties": {"shard": pod_template("shard"), "gateway": pod_template("gateway")},
            },
            "internalTls": {
                "type": "object",
                "description": "Mutual TLS between gateway and shards (always on). By default the TLS Secrets "
                "<name>-internal-tls-gateway and <name>-internal-tls-shard (ca.crt, tls.crt, tls.key; the chart "
                "generates them); name others here, e.g. cert-manager Certificates with commonName "
                "groupcoord-gateway / groupcoord-shard, dnsNames the same, from one CA issuer.",
                "properties": {
                    "secrets": {
                        "type": "object",
                        "description": "TLS Secrets (ca.crt, tls.crt, tls.key) per component.",
                        "properties": {
                            "gateway": {
                                "type": "string",
                                "minLength": 1,
                                "description": "The gateway's Secret.",
                            },
                            "shard": {"type": "string", "minLength": 1, "description": "The shards' Secret."},
                        },
                    },
                },
            },
            "logging": {
                "type": "object",
                "description": "Logs of the shard and gateway processes (their stderr).",
                "properties": {
                    "format": {
                        "type": "string",
                        "enum": LOG_FORMATS,
                        "default": "text",
                        "description": "text lines, or json: one JSON object per line (time, level, logger, "
                        "message, worker, exc_info, extra fields) for Loki or Elasticsearch.",
                    },
                },
            },
            "networkPolicy": {
                "type": "object",
                "description": "The NetworkPolicies the operator writes: shard gRPC only from gateway and "
                "operator pods, metrics only from metricsFrom, clients only to the gateway's listeners.",
                "properties": {
                    "metricsFrom": {
                        "type": "array",
                        "description": "NetworkPolicyPeers that may scrape metrics (default: pods of this namespace).",
                        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    },
                    "operatorFrom": {
                        "type": "array",
                        "description": "NetworkPolicyPeers of the operator's pods (default: pods labelled "
                        "app.kubernetes.io/name=groupcoord, app.kubernetes.io/component=operator in any namespace).",
                        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    },
                },
            },
        },
    }


def strict(schema: Any) -> Any:
    """``schema`` refusing unknown fields: every object that lists its properties gets
    ``additionalProperties: false`` (except Kubernetes-typed ones that preserve unknown fields).

    A CRD's structural schema may not say this itself (the API server prunes unknown fields,
    and kubectl's default strict field validation turns a pruned field into an error); the
    operator checks the same with this variant, for servers or clients that do neither."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if "properties" in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def status_schema() -> dict[str, Any]:
    """The ``status`` schema: leadership shards and gateways read, plus conditions."""
    condition = {
        "type": "object",
        "required": ["type", "status"],
        "properties": {
            "type": {"type": "string", "enum": CONDITION_TYPES},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "reason": {"type": "string"},
            "message": {"type": "string"},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "observedGeneration": {"type": "integer"},
        },
    }
    return {
        "type": "object",
        "description": "Observed state, written only by the operator.",
        "properties": {
            "observedGeneration": {"type": "integer", "description": "The spec generation last acted on."},
            "partitions": {
                "type": "array",
                "description": "Leadership per state-topic partition: the only source shards and gateways trust.",
                "items": {
                    "type": "object",
                    "required": ["partition", "leader", "epoch"],
                    "properties": {
                        "partition": {"type": "integer", "minimum": 0},
                        "leader": {"type": "integer", "minimum": 0, "description": "Leading shard id."},
                        "epoch": {"type": "integer", "minimum": 1, "description": "Leadership epoch."},
                        "standbys": {"type": "array", "items": {"type": "integer", "minimum": 0}},
                    },
                },
            },
            "shards": {
                "type": "array",
                "description": "Health of each shard as the operator sees it.",
                "items": {
                    "type": "object",
                    "required": ["shard", "state"],
                    "properties": {
                        "shard": {"type": "integer", "minimum": 0},
                        "state": {"type": "string", "enum": ["Starting", "Ready", "Failed"]},
                        "leaders": {"type": "integer", "minimum": 0},
                    },
                },
            },
            "readyShards": {"type": "integer", "description": "Shards whose pod is Ready."},
            "replicas": {
                "type": "integer",
                "description": "Shard pods that exist (the scale subresource's statusReplicasPath).",
            },
            "labelSelector": {
                "type": "string",
                "description": "Selector of the shard pods (the scale subresource's labelSelectorPath).",
            },
            "listeners": {
                "type": "array",
                "description": "Where clients connect, per listener (Strimzi's status.listeners).",
                "items": {
                    "type": "object",
                    "required": ["name", "type"],
                    "properties": {
                        "name": {"type": "string"},
                        "type": {"type": "string", "enum": LISTENER_TYPES},
                        "bootstrapServers": {
                            "type": "string",
                            "description": "Comma-separated host:port list for bootstrap.servers.",
                        },
                        "addresses": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {"host": {"type": "string"}, "port": {"type": "integer"}},
                            },
                        },
                    },
                },
            },
            "rollout": {
                "type": "object",
                "description": "A rolling replacement of shard pods under way.",
                "properties": {
                    "replacingShard": {
                        "type": "integer",
                        "description": "The shard whose pod is being replaced (its partitions moved away first).",
                    }
                },
            },
            "stateTopic": {
                "type": "object",
                "description": "The state-topic replication the shards create the topic with (after clamping).",
                "properties": {
                    "replicationFactor": {"type": "integer"},
                    "minInsyncReplicas": {"type": "integer"},
                    "kafkaBrokers": {
                        "type": "integer",
                        "description": "Brokers the operator found in the Kafka cluster.",
                    },
                },
            },
            "conditions": {"type": "array", "items": condition},
        },
    }


def build_crd() -> dict[str, Any]:
    """The whole CustomResourceDefinition object."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{PLURAL}.{GROUP}",
            "labels": {"app.kubernetes.io/part-of": "groupcoord"},
        },
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": SINGULAR,
                "shortNames": SHORT_NAMES,
                "categories": ["groupcoord"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {
                        "status": {},
                        # `kubectl scale groupcoordinator/<name> --replicas=N` sets spec.shards
                        "scale": {
                            "specReplicasPath": ".spec.shards",
                            "statusReplicasPath": ".status.replicas",
                            "labelSelectorPath": ".status.labelSelector",
                        },
                    },
                    "additionalPrinterColumns": [
                        {"name": "Partitions", "type": "integer", "jsonPath": ".spec.stateTopic.partitions"},
                        {"name": "Shards", "type": "integer", "jsonPath": ".spec.shards"},
                        {"name": "Threads", "type": "integer", "jsonPath": ".spec.threadsPerShard"},
                        {"name": "Ready-Shards", "type": "integer", "jsonPath": ".status.readyShards"},
                        {
                            "name": "Bootstrap",
                            "type": "string",
                            "jsonPath": ".status.listeners[0].bootstrapServers",
                        },
                        {
                            "name": "Ready",
                            "type": "string",
                            "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
                        },
                        {
                            "name": "Degraded",
                            "type": "string",
                            "jsonPath": '.status.conditions[?(@.type=="Degraded")].status',
                        },
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": "A Kafka group-coordinator cluster (gateway + coordinator shards).",
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec_schema(),
                                "status": status_schema(),
                            },
                        }
                    },
                }
            ],
        },
    }
