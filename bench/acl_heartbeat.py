"""acl-heartbeat: what authorization costs heartbeats.

The e2e-heartbeat load (KIP-848 steady-state heartbeats through gateway + shards, run as
`groupcoord up`) twice in the same run: without authorization (``--acl-source none``, the
default) and with an ACL file of B bindings (other principals' LITERAL and PREFIXED grants, plus
READ on the heartbeating groups' prefix and on the topic for User:ANONYMOUS), so every heartbeat
is one group READ decision (and a joining one a topic DESCRIBE too). Prints both runs'
heartbeats/s and p50/p99 and the ratios.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import uuid
from pathlib import Path

NAME = "acl-heartbeat"
DESCRIPTION = "heartbeats/s and p99 without authorization vs with an ACL file of B bindings"


def acl_document(bindings: int, topic: str) -> dict[str, list[dict[str, str]]]:
    acls = [
        {"principal": "User:ANONYMOUS", "operation": "READ", "resourceType": "GROUP",
         "resourceName": "hb-", "patternType": "PREFIXED"},
        {"principal": "User:ANONYMOUS", "operation": "READ", "resourceType": "TOPIC", "resourceName": topic},
    ]  # fmt: skip
    for i in range(max(0, bindings - len(acls))):
        acls.append(
            {
                "principal": f"User:team-{i}",
                "operation": "READ" if i % 2 else "DESCRIBE",
                "resourceType": "GROUP" if i % 3 else "TOPIC",
                "resourceName": f"team-{i}-" if i % 2 else f"team-{i}",
                "patternType": "PREFIXED" if i % 2 else "LITERAL",
            }
        )
    return {"acls": acls}


def run(args: list[str]) -> dict[str, object]:
    from _up_process import UpProcess  # noqa: PLC0415
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415
    from e2e_heartbeat import add_load_options, on_off_ratios, run_load  # noqa: PLC0415

    from groupcoord.embedded_broker import EmbeddedBroker, free_port  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog=NAME)
    parser.add_argument("--bindings", type=int, default=1000, help="ACL bindings in the file")
    add_load_options(parser)
    opts = parser.parse_args(args)
    runs: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker() as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topic = f"hb-{uuid.uuid4().hex[:6]}"
        for fut in admin.create_topics([NewTopic(topic, 12, 1)]).values():
            fut.result(15)
        acl_file = Path(tmp) / "acls.json"
        acl_file.write_text(json.dumps(acl_document(opts.bindings, topic)))
        for mode, extra in (("acl_off", []), ("acl_on", ["--acl-file", str(acl_file)])):
            with UpProcess(broker.bootstrap, free_port(), extra=extra) as up:
                time.sleep(4)  # the shards' topic metadata refresh sees the topic
                runs[mode] = run_load(up.bootstrap, topic, opts)
    off, on = runs["acl_off"], runs["acl_on"]
    return {
        "bindings": opts.bindings,
        **runs,
        **on_off_ratios(off, on),
    }
