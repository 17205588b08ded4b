"""What a read_committed reader of a partition must see, read from its raw log.

tansu 0.6.0 serves aborted records to read_committed consumers (measured: no
``aborted_transactions`` in its Fetch responses), so exactly-once tests in front of it read the
output raw and drop the data of transactions that ABORT markers end themselves, as a Kafka
broker's read_committed fetch would.
"""

from __future__ import annotations

from aiokafka import TopicPartition as AioPartition
from aiokafka.client import AIOKafkaClient
from aiokafka.protocol.fetch import FetchRequest
from aiokafka.record.memory_records import MemoryRecords


async def committed_output(bootstrap: str, topic: str) -> list[bytes]:
    """The partition's records a read_committed reader must see: data of transactions that
    ended with an ABORT marker (and of open ones) left out, in log order."""
    client = AIOKafkaClient(bootstrap_servers=bootstrap)
    await client.bootstrap()
    try:
        client.add_topic(topic)
        await client.force_metadata_update()
        node = client.cluster.leader_for_partition(AioPartition(topic, 0))
        position, batches = 0, []
        while True:
            request = FetchRequest(100, 1, 8 << 20, 0, [(topic, [(0, position, 8 << 20)])])
            response = await client.send(node, request)
            (_t, [(_p, error, highwater, *rest)]) = response.topics[0][0], response.topics[0][1]
            assert error == 0
            records = MemoryRecords(rest[-1])
            while records.has_next():
                batch = records.next_batch()
                if batch.next_offset > position:
                    batches.append(batch)
                    position = batch.next_offset
            if position >= highwater:
                break
        out: list[bytes] = []
        open_txn: dict[int, list[bytes]] = {}
        for batch in batches:
            if batch.is_control_batch:
                kind = int.from_bytes(next(iter(batch)).key[2:4], "big")
                data = open_txn.pop(batch.producer_id, [])
                if kind == 1:
                    out += data
            elif batch.is_transactional:
                open_txn.setdefault(batch.producer_id, []).extend(r.value for r in batch)
            else:
                out += [r.value for r in batch]
        return out
    finally:
        await client.close()
