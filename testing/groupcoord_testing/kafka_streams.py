"""A Kafka Streams application for tests and benchmarks: Kafka's word count
(``java/WordCount.java``), compiled once per run against Kafka 4.4's jars, run as one JVM per
instance with its stdout (its state changes and tasks) followed."""

from __future__ import annotations

import functools
import hashlib
import os
import signal
import subprocess
import tempfile
import threading
from pathlib import Path

from groupcoord_testing.apache_kafka import VERSIONS, classpath, java_binary, java_command

WORD_COUNT = Path(__file__).parent / "java" / "WordCount.java"


@functools.cache
def word_count_classes() -> str:
    """WordCount compiled once per run (the source launcher would compile it in every instance,
    a few CPU seconds each on a 2-core machine), into a directory named by its source's hash."""
    digest = hashlib.sha256(WORD_COUNT.read_bytes()).hexdigest()[:12]
    out = Path(tempfile.gettempdir()) / f"groupcoord-wordcount-{digest}"
    if not (out / "WordCount.class").exists():
        javac = str(Path(java_binary(VERSIONS["kafka-4.4"])).with_name("javac"))
        tmp = Path(tempfile.mkdtemp(prefix="wordcount-"))
        subprocess.run(
            [javac, "-cp", classpath(VERSIONS["kafka-4.4"]), "-d", str(tmp), str(WORD_COUNT)],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        tmp.rename(out) if not out.exists() else None
    return str(out)


class Instance:
    """One Kafka Streams instance (its own process and state directory), its stdout followed."""

    def __init__(self, bootstrap: str, app: str, workdir: Path, name: str, protocol: str = "streams") -> None:
        self.name = name
        self.log = workdir / f"{name}.log"
        self.lines: list[str] = []
        command = java_command(
            VERSIONS["kafka-4.4"], "WordCount", bootstrap, app, "lines", "counts",
            str(workdir / f"{name}-state"), protocol, "exactly_once_v2", heap_mb=256,
        )  # fmt: skip
        at = command.index("-cp") + 1
        command[at] = f"{word_count_classes()}{os.pathsep}{command[at]}"
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=self.log.open("w"),
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.strip())

    def tasks(self) -> set[str] | None:
        """The active tasks it reported when it last reached RUNNING (None: never)."""
        reported = [line for line in self.lines if line.startswith("TASKS")]
        return set(reported[-1].split()[1:]) if reported else None

    def running(self) -> bool:
        states = [line for line in self.lines if line.startswith("STATE")]
        return bool(states) and states[-1] == "STATE RUNNING"

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> int:
        """SIGTERM: the shutdown hook closes the instance (it leaves the group); the JVM then
        exits with 143, as any JVM ended by SIGTERM."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            code = self.process.wait(40)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            code = self.process.wait(10)
        self._reader.join(10)  # its last lines read
        return code

    def report(self) -> str:
        tail = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
        return f"{self.name}: {self.lines[-10:]}\n{tail}"
