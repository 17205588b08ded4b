"""A real Prometheus server as a child process (Debian's ``prometheus`` binary), for tests.

It runs unprivileged with a temporary data directory and scrapes the given targets every
second; :meth:`PrometheusServer.query` calls its HTTP API, :meth:`PrometheusServer.wait_for`
polls until a query returns a value (the first scrape lands a few seconds after start).
Point it at any ``host:port`` list — a process using the metrics facade, or a whole cluster's
shards and gateway.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from types import TracebackType


def prometheus_binary() -> str | None:
    return shutil.which("prometheus")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrometheusServer:
    def __init__(self, targets: list[str], workdir: Path, *, scrape_interval: str = "1s") -> None:
        self.targets = targets
        self.workdir = workdir
        self.scrape_interval = scrape_interval
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> PrometheusServer:
        binary = prometheus_binary()
        if binary is None:
            raise RuntimeError("prometheus binary not found")
        config = self.workdir / "prometheus.yml"
        # YAML is a superset of JSON: write the config as JSON, no YAML library needed.
        config.write_text(
            json.dumps(
                {
                    "global": {"scrape_interval": self.scrape_interval, "evaluation_interval": "1s"},
                    "scrape_configs": [
                        {"job_name": "groupcoord", "static_configs": [{"targets": self.targets}]}
                    ],
                }
            )
        )
        log = open(self.workdir / "prometheus.log", "wb")  # noqa: SIM115 - lives as long as the child
        self.proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        self._wait_ready()
        return self

    def _wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"prometheus exited: {(self.workdir / 'prometheus.log').read_text()[-2000:]}"
                )
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise TimeoutError("prometheus did not become ready")

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def query(self, promql: str) -> list[dict]:
        """Instant query; returns the ``result`` vector (``[{"metric": {...}, "value": [t, "v"]}]``)."""
        url = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
        with urllib.request.urlopen(url, timeout=5) as r:
            body = json.load(r)
        if body.get("status") != "success":
            raise RuntimeError(f"query {promql!r} failed: {body}")
        return list(body["data"]["result"])

    def wait_for(self, promql: str, timeout: float = 30.0) -> list[dict]:
        """Poll until ``promql`` returns a non-empty result (scrapes start a few seconds in)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = self.query(promql)
            if result:
                return result
            time.sleep(0.5)
        raise TimeoutError(f"no result for {promql!r} within {timeout}s")
