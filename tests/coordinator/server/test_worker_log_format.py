"""``groupcoord --log-format`` reaches the shard's worker processes: the supervisor puts it in
each worker's config, and a worker configures its logging with it and its own index."""

from __future__ import annotations

import argparse
import signal
from typing import Any

import pytest

from groupcoord.common.process_logging import LOG_FORMAT_ENV, add_log_level
from groupcoord.coordinator.server import supervisor, worker


def parse(*argv: str) -> argparse.Namespace:
    """As ``groupcoord [--log-format F] shard ...`` parses (the flag is the command's, before
    the subcommand; here one parser holds both, as the test shard process's does)."""
    parser = argparse.ArgumentParser()
    add_log_level(parser)
    supervisor.add_arguments(parser)
    return parser.parse_args([*argv, "--kafka", "127.0.0.1:9092", "--threads", "2"])


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [((), None, "text"), (("--log-format", "json"), None, "json"), ((), "json", "json")],
    ids=["default", "flag", "env"],
)
def test_every_worker_config_carries_the_log_format(
    monkeypatch: pytest.MonkeyPatch, argv: tuple[str, ...], env: str | None, expected: str
) -> None:
    monkeypatch.delenv(LOG_FORMAT_ENV, raising=False)
    if env is not None:
        monkeypatch.setenv(LOG_FORMAT_ENV, env)
    configs = supervisor.configs(parse(*argv))
    assert [(c.worker, c.log_format) for c in configs] == [(0, expected), (1, expected)]


def test_a_worker_configures_logging_with_its_format_and_index(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(worker, "configure_logging", lambda *a, **kw: calls.append((*a, kw)))

    async def serve(*_: Any, **__: Any) -> None:
        return None

    monkeypatch.setattr(worker, "serve", serve)
    monkeypatch.setattr(signal, "signal", lambda *_: None)  # leave pytest's SIGINT alone
    config = supervisor.configs(parse("--log-format", "json", "--log-level", "DEBUG"))[1]
    worker.worker_main(config, None, None)  # type: ignore[arg-type]
    assert calls == [("DEBUG", "json", {"worker": 1})]
