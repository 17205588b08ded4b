"""`groupcoord up` as a child process for the end-to-end benchmarks (not a benchmark itself)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


class UpProcess:
    def __init__(
        self,
        kafka: str,
        port: int,
        shards: int = 2,
        threads: int = 1,
        partitions: int = 50,
        extra: list[str] | None = None,
    ) -> None:
        self.port = port
        self.cmd = [
            sys.executable, "-m", "groupcoord.cli", "--log-level", "WARNING", "up",
            "--kafka", kafka, "--port", str(port), "--shards", str(shards),
            "--threads", str(threads), "--partitions", str(partitions),
        ] + list(extra or [])  # fmt: skip
        self.proc: subprocess.Popen[str] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> UpProcess:
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, text=True, start_new_session=True)
        deadline = time.monotonic() + 120
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("groupcoord is up"):
                return self
            if time.monotonic() > deadline:
                break
        self.__exit__()
        raise RuntimeError("groupcoord up did not start")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
