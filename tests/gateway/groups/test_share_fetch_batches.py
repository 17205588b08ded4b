"""What the gateway reads of fetched record batches for a share group: each complete v2
batch's offsets, producer and kind, never a batch cut by the fetch's size limit; and which of
them a member may get — never a transaction marker, and with read_committed never a batch of
an aborted transaction, as Kafka's read_committed consumer skips them."""

from __future__ import annotations

import struct

from groupcoord.gateway.groups.share_fetch import Batch, batches, deliverable

TRANSACTIONAL, CONTROL = 1 << 4, 1 << 5


def batch(base: int, count: int, producer: int = -1, attributes: int = 0, body: bytes = b"r" * 10) -> bytes:
    """A v2 record batch header (records opaque: only the header is read)."""
    rest = struct.pack(">ibIhiqqqhii", 0, 2, 0, attributes, count - 1, 0, 0, producer, 0, 0, count) + body
    return struct.pack(">qi", base, len(rest)) + rest


def test_complete_batches_are_read_and_a_cut_one_is_left_out() -> None:
    data = batch(0, 3) + batch(3, 2, producer=7, attributes=TRANSACTIONAL) + batch(5, 1, 7, TRANSACTIONAL | CONTROL)
    complete, found = batches(data + batch(6, 4)[:-5])
    assert complete == data
    assert found == [Batch(0, 2, -1, False, False), Batch(3, 4, 7, True, False), Batch(5, 5, 7, True, True)]
    assert batches(b"") == (b"", []) and batches(None) == (b"", [])


def test_markers_are_never_delivered_and_aborted_transactions_only_without_read_committed() -> None:
    found = [
        Batch(0, 2, -1, False, False),
        Batch(3, 4, 7, True, False),  # producer 7's transaction, aborted
        Batch(5, 6, 8, True, False),  # producer 8's, committed
        Batch(7, 7, 7, True, True),  # 7's abort marker
        Batch(8, 8, 8, True, True),  # 8's commit marker
        Batch(9, 10, 7, True, False),  # 7's next transaction, not aborted
    ]
    assert deliverable(found, None) == [(0, 2), (3, 4), (5, 6), (9, 10)]
    assert deliverable(found, [(7, 3)]) == [(0, 2), (5, 6), (9, 10)]
