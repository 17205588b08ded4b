"""The ``groupcoord`` command as a user meets it: a subcommand whose optional extra is not
installed, and ``groupcoord capacity`` pointed at a cluster without samples, each end in one
line that says what to do, never a traceback."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

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
