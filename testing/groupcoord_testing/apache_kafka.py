"""Apache Kafka itself as an upstream, for tests and benchmarks: real KRaft brokers from the
jars Maven resolved (``tests/apache_kafka/pom.xml``, fetched by ``scripts/test``).

Each node runs in combined mode (broker and controller in one JVM) on loopback ports with a
generated ``server.properties``; one node by default, three (a real controller quorum, replication
factor 3 and min ISR 2) where a test needs replication. Storage is formatted before the first
start, SCRAM users included, as ``kafka-storage.sh format --add-scram`` does.

Two security variants, as our users run Kafka:

- ``plaintext``: every listener PLAINTEXT, no authorizer.
- ``sasl_ssl``: clients meet a SASL_SSL listener with SCRAM-SHA-256/512 users; the brokers talk to
  each other and to the controllers with SASL PLAIN as ``User:broker``; Kafka's
  ``StandardAuthorizer`` with ``allow.everyone.if.no.acl.found=false`` and only the brokers and
  the coordinator's own principal as super users, so every other principal gets exactly the rights
  its ACLs give it, checked by Kafka and not by us.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groupcoord.common.run_dirs import cache_dir
from groupcoord.embedded_broker import free_port, stop_process_group, wait_for_port

#: the upstream names the test matrix uses → the Maven version of ``kafka_2.13`` they run
VERSIONS: Mapping[str, str] = {"kafka-4.4": "4.4.0", "kafka-3.9": "3.9.2"}

BROKER_USER = ("broker", "broker-secret")


class KafkaUnavailable(RuntimeError):
    """Java or the resolved Kafka jars are missing on this machine (``scripts/test`` fetches
    the jars where Maven is installed)."""


def jars_dir(version: str) -> Path:
    """Where ``scripts/test`` copies Kafka ``version``'s jars and their dependencies
    (``$GROUPCOORD_KAFKA_JARS/<version>`` or the per-user cache): kept between runs."""
    root = os.environ.get("GROUPCOORD_KAFKA_JARS")
    return (Path(root) if root else cache_dir() / "kafka") / version


def java_binary(version: str) -> str:
    """``$JAVA_HOME/bin/java`` or ``java`` on PATH; Kafka 4.x needs Java 17 or newer."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).exists():
        raise KafkaUnavailable(f"no java on PATH (JAVA_HOME unset) to run Kafka {version}")
    return java


def classpath(version: str) -> str:
    jars = jars_dir(version)
    if not (jars / ".complete").exists():
        raise KafkaUnavailable(
            f"Kafka {version} jars are not in {jars} (scripts/test resolves tests/apache_kafka/pom.xml with Maven)"
        )
    return f"{jars}/*"


def java_command(version: str, main: str, *args: str, heap_mb: int | None = None) -> list[str]:
    """The command running ``main`` (a broker, or one of Kafka's tools such as
    ``org.apache.kafka.tools.consumer.group.ConsumerGroupCommand``) on Kafka ``version``'s jars.

    Heaps are small (2 cores, many JVMs in one test run). Without ``heap_mb`` it is a short-lived
    tool, which also skips the optimizing JIT: that only slows its start.
    """
    tool = heap_mb is None
    heap = 256 if tool else heap_mb
    return [
        java_binary(version),
        f"-Xms{min(heap, 128)}m",
        f"-Xmx{heap}m",
        "-XX:+UseSerialGC",
        *(["-XX:TieredStopAtLevel=1"] if tool else []),
        "-Djava.awt.headless=true",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-Dlog4j2.level=WARN",
        "-cp",
        classpath(version),
        main,
        *args,
    ]


def random_cluster_id() -> str:
    """A KRaft cluster id: a random UUID in URL-safe base64 without padding, as
    ``kafka-storage.sh random-uuid`` prints; like Kafka's ``Uuid.randomUuid`` never one starting
    with ``-``, which ``kafka-storage format -t`` would take for an option (1 start in 64 failed)."""
    while (cluster_id := base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")).startswith("-"):
        pass
    return cluster_id


@dataclass
class Node:
    node_id: int
    client_port: int
    internal_port: int
    controller_port: int
    data_dir: Path
    properties: Path
    log: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def rss_mib(self) -> float:
        """Resident memory of the broker's JVM (0 when stopped)."""
        if not self.running:
            return 0.0
        assert self.process is not None
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0


@dataclass
class ApacheKafka:
    """A running Apache Kafka cluster of ``nodes`` combined broker/controller nodes.

    ``bootstrap`` (and ``host``/``port``, as :class:`~groupcoord.embedded_broker.EmbeddedBroker`
    has them) name the client listener. ``client_config()`` gives a client's settings for it.
    """

    workdir: Path
    version: str = "4.4.0"
    nodes: int = 1
    security: str = "plaintext"  # or "sasl_ssl"
    #: SCRAM users created at format time (name → password), sasl_ssl only
    scram_users: Mapping[str, str] = field(default_factory=dict)
    #: principals (without ``User:``) with every right besides the brokers', sasl_ssl only
    super_users: tuple[str, ...] = ()
    #: the client listener's certificate chain, key and the CA clients trust (PEM), sasl_ssl only
    tls: tuple[Path, Path, Path] | None = None
    overrides: Mapping[str, Any] = field(default_factory=dict)
    heap_mb: int = 384
    host: str = "127.0.0.1"
    cluster_id: str = field(default_factory=random_cluster_id)
    members: list[Node] = field(default_factory=list, repr=False)
    startup_s: float = 0.0

    @property
    def port(self) -> int:
        return self.members[0].client_port

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.host}:{n.client_port}" for n in self.members)

    @property
    def upstream_name(self) -> str:
        return f"kafka-{'.'.join(self.version.split('.')[:2])}"

    # -- configuration ----------------------------------------------------------------------

    def _server_properties(self, node: Node) -> dict[str, Any]:
        replicas = min(3, self.nodes)
        min_isr = min(2, self.nodes)
        voters = ",".join(f"{n.node_id}@{self.host}:{n.controller_port}" for n in self.members)
        secure = self.security == "sasl_ssl"
        props: dict[str, Any] = {
            "process.roles": "broker,controller",
            "node.id": node.node_id,
            "controller.quorum.voters": voters,
            "listeners": f"CLIENT://{self.host}:{node.client_port},INTERNAL://{self.host}:{node.internal_port},"
            f"CONTROLLER://{self.host}:{node.controller_port}",
            "advertised.listeners": f"CLIENT://{self.host}:{node.client_port},INTERNAL://{self.host}:{node.internal_port}",
            "listener.security.protocol.map": (
                "CLIENT:SASL_SSL,INTERNAL:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT"
                if secure
                else "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT"
            ),
            "inter.broker.listener.name": "INTERNAL",
            "controller.listener.names": "CONTROLLER",
            "log.dirs": str(node.data_dir),
            "num.partitions": 1,
            "default.replication.factor": replicas,
            "min.insync.replicas": min_isr,
            "offsets.topic.replication.factor": replicas,
            "offsets.topic.num.partitions": 10,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": min_isr,
            "transaction.state.log.num.partitions": 4,
            # Kafka 4.2+'s share coordinator (KIP-932): its state topic must fit the cluster
            "share.coordinator.state.topic.replication.factor": replicas,
            "share.coordinator.state.topic.min.isr": min_isr,
            "share.coordinator.state.topic.num.partitions": 4,
            "group.initial.rebalance.delay.ms": 0,
            # small enough that the transaction tests see timeouts and cleanups within a test
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": 2000,
            "transaction.remove.expired.transaction.cleanup.interval.ms": 5000,
            "auto.create.topics.enable": "true",
            "log.segment.bytes": 16 * 1024 * 1024,
            "socket.send.buffer.bytes": -1,
            "socket.receive.buffer.bytes": -1,
        }
        if secure:
            assert self.tls is not None, "sasl_ssl needs the client listener's certificate"
            cert, key, _ca = self.tls
            plain = (
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'username="{BROKER_USER[0]}" password="{BROKER_USER[1]}" '
                f'user_{BROKER_USER[0]}="{BROKER_USER[1]}";'
            )
            keystore = node.data_dir.parent / f"keystore-{node.node_id}.pem"
            keystore.write_bytes(key.read_bytes() + cert.read_bytes())
            props |= {
                "sasl.mechanism.controller.protocol": "PLAIN",
                "sasl.mechanism.inter.broker.protocol": "PLAIN",
                "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
                "listener.name.controller.plain.sasl.jaas.config": plain,
                "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
                "listener.name.internal.plain.sasl.jaas.config": plain,
                "listener.name.client.sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
                "listener.name.client.scram-sha-256.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
                "listener.name.client.scram-sha-512.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
                "listener.name.client.ssl.keystore.type": "PEM",
                "listener.name.client.ssl.keystore.location": str(keystore),
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "allow.everyone.if.no.acl.found": "false",
                "super.users": ";".join(f"User:{u}" for u in (BROKER_USER[0], *self.super_users)),
            }
        return props | dict(self.overrides)

    def client_config(self, user: str | None = None, **extra: Any) -> dict[str, Any]:
        """librdkafka settings for the client listener, as ``user`` on ``sasl_ssl``."""
        config: dict[str, Any] = {"bootstrap.servers": self.bootstrap}
        if self.security == "sasl_ssl":
            assert user is not None and self.tls is not None
            config |= {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": user,
                "sasl.password": self.scram_users[user],
                "ssl.ca.location": str(self.tls[2]),
            }
        return config | extra

    # -- lifecycle ----------------------------------------------------------------------------

    def _format(self, node: Node) -> None:
        args = ["format", "-t", self.cluster_id, "-c", str(node.properties)]
        if self.version.startswith("3."):
            args.append("--ignore-formatted")
        for user, password in self.scram_users.items():
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                args += ["--add-scram", f"{mechanism}=[name={user},password={password}]"]
        done = subprocess.run(
            java_command(self.version, "kafka.tools.StorageTool", *args),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed: {done.stdout}\n{done.stderr}")

    def start(self, timeout: float = 90.0, attempts: int = 3) -> ApacheKafka:
        """Start every node. Ports are picked free and bound by the JVMs seconds later; should
        another process take one meanwhile (a node's log says "Address already in use", seen
        once in CI on a controller port), the nodes start again on new ports."""
        for attempt in range(1, attempts + 1):
            try:
                return self._start(timeout)
            except Exception:
                if attempt == attempts or not self._lost_a_port():
                    raise
                print(f"Apache Kafka: a port was taken before its node bound it; again ({attempt})", file=sys.stderr)
                for node in self.members:
                    shutil.rmtree(node.data_dir.parent, ignore_errors=True)
                self.members.clear()
        raise AssertionError("unreachable")

    def _lost_a_port(self) -> bool:
        return any(
            node.log.exists() and "Address already in use" in node.log.read_text(errors="replace")
            for node in self.members
        )

    def _wait_listening(self, node: Node, timeout: float) -> None:
        """Until ``node`` listens for clients; raises at once if its JVM exited."""
        deadline = time.monotonic() + timeout
        while True:
            if node.process is not None and node.process.poll() is not None:
                raise RuntimeError(f"Kafka node {node.node_id} exited ({node.process.returncode}): see {node.log}")
            try:
                wait_for_port(self.host, node.client_port, 0.5)
                return
            except TimeoutError:
                if time.monotonic() > deadline:
                    raise

    def _start(self, timeout: float) -> ApacheKafka:
        begun = time.monotonic()
        classpath(self.version)  # fail fast, before making directories
        self.workdir.mkdir(parents=True, exist_ok=True)
        for i in range(1, self.nodes + 1):
            self.members.append(
                Node(
                    node_id=i,
                    client_port=free_port(self.host),
                    internal_port=free_port(self.host),
                    controller_port=free_port(self.host),
                    data_dir=self.workdir / f"node-{i}" / "data",
                    properties=self.workdir / f"node-{i}" / "server.properties",
                    log=self.workdir / f"node-{i}" / "kafka.log",
                )
            )
        for node in self.members:
            node.data_dir.mkdir(parents=True, exist_ok=True)
            node.properties.write_text(
                "".join(f"{k}={v}\n" for k, v in self._server_properties(node).items())
            )
            self._format(node)
        for node in self.members:
            self.start_node(node.node_id, wait=False)
        try:
            for node in self.members:
                self._wait_listening(node, timeout - (time.monotonic() - begun))
            self.wait_ready(timeout - (time.monotonic() - begun))
        except Exception:
            self.stop()
            raise
        self.startup_s = time.monotonic() - begun
        print(
            f"Apache Kafka {self.version} ({self.nodes} node(s), {self.security}) ready in "
            f"{self.startup_s:.1f}s, RSS {', '.join(f'{n.rss_mib():.0f}' for n in self.members)} MiB",
            file=sys.stderr,
        )
        return self

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until the running brokers all appear in Metadata (each one registered with the
        controller quorum) as a client sees it."""
        from confluent_kafka.admin import AdminClient  # noqa: PLC0415

        user = next(iter(self.super_users), None) if self.security == "sasl_ssl" else None
        if user is not None and user not in self.scram_users:
            user = next(iter(self.scram_users))
        admin = AdminClient(self.client_config(user))
        want = {n.node_id for n in self.members if n.running}
        deadline = time.monotonic() + max(timeout, 5.0)
        seen: set[int] = set()
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                seen = set(admin.list_topics(timeout=5).brokers)
                if want <= seen:
                    return
            time.sleep(0.3)
        raise TimeoutError(f"Kafka brokers {sorted(want)} not all registered (saw {sorted(seen)})")

    def node(self, node_id: int) -> Node:
        return self.members[node_id - 1]

    def start_node(self, node_id: int, wait: bool = True) -> None:
        node = self.node(node_id)
        log = open(node.log, "ab")  # noqa: SIM115 - the broker's own stdout/stderr
        node.process = subprocess.Popen(
            java_command(self.version, "kafka.Kafka", str(node.properties), heap_mb=self.heap_mb),
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        if wait:
            wait_for_port(self.host, node.client_port, 60)
            self.wait_ready()

    def kill_node(self, node_id: int) -> None:
        """SIGKILL one node's JVM, as a crashed machine would stop it."""
        node = self.node(node_id)
        if node.process is not None and node.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.process.pid, signal.SIGKILL)
            node.process.wait(10)
        node.process = None

    def stop_node(self, node_id: int) -> None:
        """A clean shutdown of one node (SIGTERM: controlled shutdown, leaders moved first)."""
        node = self.node(node_id)
        stop_process_group(node.process, grace_s=30)
        node.process = None

    def stop(self) -> None:
        for node in self.members:
            stop_process_group(node.process, grace_s=10)
            node.process = None

    def __enter__(self) -> ApacheKafka:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
