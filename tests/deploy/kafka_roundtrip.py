"""What "serves a real client" means in the deployment tests, as one script.

Produce a few records, consume them in a consumer group, commit, and read the committed
offset back, with aiokafka (a dependency of groupcoord, so it is in every install and in the
image). Runs as ``python kafka_roundtrip.py BOOTSTRAP TOPIC GROUP [USER PASSWORD CAFILE]`` in a
fresh venv or a client container that knows nothing but the bootstrap address (and, for a
SASL_SSL listener, a SCRAM-SHA-512 user and the CA that signed the listener's certificate);
prints one JSON line and exits 0 only when the committed offset read back equals the records
consumed.
"""

from __future__ import annotations

import asyncio
import json
import sys

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

RECORDS = 5


async def roundtrip(
    bootstrap: str, topic: str, group: str, security: dict | None = None, timeout_s: float = 60.0
) -> dict:
    security = security or {}
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000, **security)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=30000, **security)
    await producer.start()
    try:
        for i in range(RECORDS):
            await producer.send_and_wait(topic, f"record-{i}".encode(), partition=0)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **security,
    )
    await consumer.start()
    try:
        seen: list[bytes] = []
        async with asyncio.timeout(timeout_s):
            while len(seen) < RECORDS:
                batch = await consumer.getmany(timeout_ms=1000)
                seen.extend(r.value for records in batch.values() for r in records)
        await consumer.commit()
        committed = await consumer.committed(TopicPartition(topic, 0))
        coordinator = consumer._coordinator.coordinator_id  # the node the gateway named
    finally:
        await consumer.stop()
    # A second consumer of the group starts where the first committed (read from the coordinator).
    check = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False, **security)
    await check.start()
    try:
        reread = await check.committed(TopicPartition(topic, 0))
    finally:
        await check.stop()
    return {"consumed": len(seen), "committed": committed, "reread": reread, "coordinator": coordinator}


def sasl_ssl(user: str, password: str, cafile: str) -> dict:
    from aiokafka.helpers import create_ssl_context  # noqa: PLC0415

    return {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": user,
        "sasl_plain_password": password,
        "ssl_context": create_ssl_context(cafile=cafile),
    }


def main(argv: list[str]) -> int:
    bootstrap, topic, group, *secured = argv
    result = asyncio.run(roundtrip(bootstrap, topic, group, sasl_ssl(*secured) if secured else None))
    print(json.dumps(result), flush=True)
    return 0 if result["committed"] == result["reread"] == RECORDS == result["consumed"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
