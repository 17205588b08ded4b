"""A Docker Engine, a Debian base image and our image, for the container tests.

Nothing is pulled from a registry: the base image is made from Debian packages
(``mmdebstrap --variant=minbase`` piped into ``docker import``, from the mirror the host's apt
sources name), and our image is built from the repository's real Dockerfile on top of it with
``--build-arg BASE_IMAGE``. Build containers reach the package index only the way the host
does: ``--network host``, with the host's pip configuration (its http(s) index URLs) and CA
bundle passed as BuildKit secrets (``pipconf``, ``pipcert``), never copied into a layer.
Docker's layer cache keeps a rebuild to seconds when only sources changed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[2]
BASE_IMAGE = os.environ.get("GROUPCOORD_TEST_BASE_IMAGE", "groupcoord-base:test")
# Another checkout on the same Docker Engine (a CI run beside a developer) builds its own tag.
IMAGE = os.environ.get("GROUPCOORD_TEST_IMAGE", "groupcoord:test")
SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# What a slim Debian image leaves out too: documentation and translations (~50 MB).
DPKG_EXCLUDES = ["/usr/share/doc/*", "/usr/share/man/*", "/usr/share/locale/*", "/usr/share/info/*"]


# Two pytest-xdist workers may both reach for the Docker Engine at once (CI: the image tests on
# one, the deployment test on the other). One dockerd is started, under an exclusive lock, and
# every worker using it holds a shared lock on USERS for its session; whoever leaves last stops
# the dockerd a test started (its pid in STARTED), so one worker never stops it under another.
_LOCKS = Path(tempfile.gettempdir())
STARTING = _LOCKS / "groupcoord-dockerd.starting.lock"
USERS = _LOCKS / "groupcoord-dockerd.users.lock"
STARTED = _LOCKS / "groupcoord-dockerd.pid"


class DockerUnavailable(RuntimeError):
    """No Docker Engine can be used or started here (the reason says why)."""


def docker_cli() -> str:
    """Debian's client (BuildKit built in) before any other ``docker`` on PATH: a newer client
    without the buildx plugin refuses ``DOCKER_BUILDKIT=1``."""
    for candidate in (os.environ.get("GROUPCOORD_TEST_DOCKER"), "/usr/bin/docker", shutil.which("docker")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise DockerUnavailable("no docker client (apt-get install docker.io)")


@dataclass
class Docker:
    cli: str
    daemon: subprocess.Popen[bytes] | None = None  # the dockerd this session started, if any
    users: IO[str] | None = None  # this session's shared lock on USERS

    def run(
        self, *args: str, check: bool = True, timeout: float = 600, **kwargs
    ) -> subprocess.CompletedProcess[str]:  # noqa: ANN003
        done = subprocess.run(
            [self.cli, *args], capture_output=True, text=True, timeout=timeout, check=False, **kwargs
        )
        if check and done.returncode != 0:
            raise RuntimeError(
                f"docker {' '.join(args[:3])} ... failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            )
        return done

    def answers(self) -> bool:
        return self.run("version", "--format", "{{.Server.Version}}", check=False, timeout=30).returncode == 0

    def has_image(self, ref: str) -> bool:
        return self.run("image", "inspect", ref, check=False).returncode == 0

    def stop_daemon(self) -> None:
        """Leave the Engine: the last session to leave stops the dockerd a test started."""
        if self.users is None:
            self._stop(self.daemon)
            return
        users, self.users = self.users, None
        fcntl.flock(users, fcntl.LOCK_UN)
        try:
            fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            users.close()
            return  # another worker still uses it; it stops it when it leaves
        try:
            if self.daemon is not None:
                self._stop(self.daemon)
            elif STARTED.exists():  # started by another worker, which left first
                pid = int(STARTED.read_text() or 0)
                cmdline = Path(f"/proc/{pid}/cmdline")
                with contextlib.suppress(OSError):  # gone already, or the pid is no dockerd now
                    if pid > 0 and b"dockerd" in cmdline.read_bytes():
                        os.kill(pid, signal.SIGTERM)
            STARTED.unlink(missing_ok=True)
        finally:
            users.close()

    @staticmethod
    def _stop(daemon: subprocess.Popen[bytes] | None) -> None:
        if daemon is not None and daemon.poll() is None:
            daemon.terminate()
            try:
                daemon.wait(30)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait(10)


def connect(log_dir: Path) -> Docker:
    """A Docker Engine that answers: the running one, else a ``dockerd`` started here (as root).
    Another worker's session may be starting one at the same moment: one starts, under a lock."""
    docker = Docker(docker_cli())
    users = open(USERS, "a")  # noqa: SIM115 - held for the session (see stop_daemon)
    fcntl.flock(users, fcntl.LOCK_SH)
    docker.users = users
    with open(STARTING, "a") as starting:
        fcntl.flock(starting, fcntl.LOCK_EX)
        try:
            if not docker.answers():
                _start(docker, log_dir)
        except BaseException:
            docker.stop_daemon()
            raise
    return docker


def _start(docker: Docker, log_dir: Path) -> None:
    dockerd = shutil.which("dockerd") or (
        "/usr/sbin/dockerd" if os.access("/usr/sbin/dockerd", os.X_OK) else None
    )
    if dockerd is None:
        raise DockerUnavailable(
            "no Docker Engine answers and there is no dockerd (apt-get install docker.io)"
        )
    if os.geteuid() != 0:
        raise DockerUnavailable("no Docker Engine answers and starting dockerd needs root")
    log = open(log_dir / "dockerd.log", "ab")  # noqa: SIM115 - the daemon's own log, for the session
    docker.daemon = subprocess.Popen(
        [dockerd], stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True
    )
    STARTED.write_text(str(docker.daemon.pid))
    deadline = time.monotonic() + 60
    while not docker.answers():
        if docker.daemon.poll() is not None or time.monotonic() > deadline:
            raise DockerUnavailable(f"dockerd did not come up; see {log_dir / 'dockerd.log'}")
        time.sleep(0.5)


def debian_mirror() -> str:
    """The Debian mirror the host's apt sources use (deb822 ``URIs:`` or one-line ``deb``)."""
    sources = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for path in sources:
        try:
            text = path.read_text()
        except OSError:
            continue
        for url in re.findall(r"^(?:URIs:\s*|deb\s+(?:\[[^\]]*\]\s+)?)(\S+)", text, re.MULTILINE):
            if re.search(r"/debian/?$", url):
                return url.rstrip("/")
    return DEFAULT_MIRROR


def build_base_image(docker: Docker) -> str:
    """``groupcoord-base:test``: Debian minbase with python3, venv and CA certificates."""
    if docker.has_image(BASE_IMAGE):
        return BASE_IMAGE
    if shutil.which("mmdebstrap") is None:
        raise DockerUnavailable("no base image and no mmdebstrap to make one (apt-get install mmdebstrap)")
    cmd = [
        "mmdebstrap",
        "--variant=minbase",
        "--include=python3,python3-venv,ca-certificates",
        *[f"--dpkgopt=path-exclude={p}" for p in DPKG_EXCLUDES],
        "--dpkgopt=path-include=/usr/share/doc/*/copyright",
        SUITE,
        "-",
        debian_mirror(),
    ]
    mm = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    imported = subprocess.run(
        [docker.cli, "import", "-", BASE_IMAGE],
        stdin=mm.stdout,
        capture_output=True,
        timeout=900,
        check=False,
    )
    assert mm.stdout is not None and mm.stderr is not None
    mm.stdout.close()
    err = mm.stderr.read().decode(errors="replace")
    if mm.wait() != 0 or imported.returncode != 0:
        raise RuntimeError(f"making {BASE_IMAGE} failed:\n{err[-3000:]}\n{imported.stderr[-2000:]}")
    return BASE_IMAGE


def host_pip_secrets(work: Path) -> list[str]:
    """``--secret`` arguments carrying the host's pip index URLs and CA bundle into the build.

    Only http(s) indexes travel (the host's ``file://`` indexes and local find-links do not exist
    in a container); the CA bundle is the one pip uses here (``PIP_CERT`` / ``global.cert``),
    which a TLS-intercepting egress proxy needs."""
    listed = subprocess.run(
        ["python3", "-m", "pip", "config", "list"], capture_output=True, text=True, check=False
    ).stdout
    settings: dict[str, list[str]] = {}
    for key, value in re.findall(r"^\S*?\.([\w-]+)='(.*)'$", listed, re.MULTILINE):
        settings.setdefault(key, []).extend(value.split())
    lines = ["[global]"]
    for key in ("index-url", "extra-index-url", "trusted-host"):
        values = [
            v for v in settings.get(key, []) if key == "trusted-host" or v.startswith(("http://", "https://"))
        ]
        if values:
            lines.append(f"{key} = {' '.join(dict.fromkeys(values))}")
    conf = work / "pip.conf"
    conf.write_text("\n".join(lines) + "\n")
    secrets = ["--secret", f"id=pipconf,src={conf}"]
    cert = os.environ.get("PIP_CERT") or next(iter(settings.get("cert", [])), None)
    if cert and Path(cert).is_file():
        secrets += ["--secret", f"id=pipcert,src={cert}"]
    return secrets


def build_image(docker: Docker, base: str, work: Path, target: str | None = None) -> tuple[str, float]:
    """Our image from the repository's Dockerfile on ``base`` (its default target, or
    ``target``); returns its tag and build seconds."""
    started = time.monotonic()
    name, _, version = IMAGE.rpartition(":")
    tag = IMAGE if target is None else f"{name}-{target}:{version}"
    docker.run(
        "build",
        "--network",
        "host",
        *host_pip_secrets(work),
        "--build-arg",
        f"BASE_IMAGE={base}",
        *(("--target", target) if target else ()),
        "-t",
        tag,
        str(ROOT),
        env={**os.environ, "DOCKER_BUILDKIT": "1"},
        timeout=1200,
    )
    # The images earlier builds tagged are dangling now: drop them (the layer cache stays).
    docker.run(
        "image", "prune", "-f", "--filter", "label=org.opencontainers.image.title=groupcoord", check=False
    )
    return tag, time.monotonic() - started


CLIENT_IMAGE = "groupcoord-client:test"
CLIENT_DOCKERFILE = """\
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
RUN --mount=type=secret,id=pipconf,required=false --mount=type=secret,id=pipcert,required=false \\
    if [ -s /run/secrets/pipconf ]; then export PIP_CONFIG_FILE=/run/secrets/pipconf; fi; \\
    if [ -s /run/secrets/pipcert ]; then export PIP_CERT=/run/secrets/pipcert; fi; \\
    python3 -m venv /client && /client/bin/pip install --no-cache-dir {requirements}
ENV PATH=/client/bin:$PATH
USER 10001:10001
"""


def build_client_image(docker: Docker, base: str, work: Path) -> str:
    """A client image (librdkafka through confluent-kafka, and aiokafka) on the same base, at the
    versions the test environment has: the client side of the deployment tests."""
    from importlib.metadata import version  # noqa: PLC0415

    requirements = " ".join(f"{name}=={version(name)}" for name in ("confluent-kafka", "aiokafka"))
    context = work / "client"
    context.mkdir(exist_ok=True)
    (context / "Dockerfile").write_text(CLIENT_DOCKERFILE.replace("{requirements}", requirements))
    docker.run(
        "build",
        "--network",
        "host",
        *host_pip_secrets(work),
        "--build-arg",
        f"BASE_IMAGE={base}",
        "-t",
        CLIENT_IMAGE,
        str(context),
        env={**os.environ, "DOCKER_BUILDKIT": "1"},
        timeout=1200,
    )
    return CLIENT_IMAGE
