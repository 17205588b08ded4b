"""How large a gRPC message between the gateway and the shards may be, in one place.

gRPC's default (4 MiB received) is smaller than a legal Kafka request: a broker reads frames up
to ``socket.request.max.bytes`` (100 MiB), so one OffsetCommit of a few hundred thousand
partitions, or one large OffsetFetch or ListGroups reply, broke the stream it shared with
other groups (every call on it failed). Both ends now allow the largest legal request plus
the envelope around it, and pack batches of envelopes (or of replies) under that size; a
single envelope or reply larger than that fails alone, with an error of its own, and the
stream goes on.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

from google.protobuf.message import Message

# socket.request.max.bytes (Kafka's default) and room for the envelope and batch around it
MAX_MESSAGE_BYTES = 100 * 1024 * 1024 + 1024 * 1024
# what a batch adds around each envelope (a field tag and a length)
PER_ITEM_OVERHEAD = 16

#: the channel and server options that apply the limit both ways
OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
)

M = TypeVar("M", bound=Message)


def packed(items: Iterable[M], limit: int = MAX_MESSAGE_BYTES) -> Iterator[list[M]]:
    """``items`` in order, in lists whose messages together fit ``limit`` (an item larger than
    ``limit`` alone in its list: the caller refuses it, see :func:`fits`)."""
    batch: list[M] = []
    size = 0
    for item in items:
        item_size = item.ByteSize() + PER_ITEM_OVERHEAD
        if batch and size + item_size > limit:
            yield batch
            batch, size = [], 0
        batch.append(item)
        size += item_size
    if batch:
        yield batch


def fits(message: Message, limit: int = MAX_MESSAGE_BYTES) -> bool:
    """Whether ``message`` can travel in a batch of its own."""
    return message.ByteSize() + PER_ITEM_OVERHEAD <= limit
