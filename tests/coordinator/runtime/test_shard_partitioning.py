"""Group → state-topic partition, exactly as Kafka places groups on __consumer_offsets."""

import pytest

from groupcoord.common.partitioning import java_string_hash, partition_for, worker_for


def test_hash_is_javas_string_hashcode() -> None:
    # Values of "…".hashCode() in Java.
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Hello World") == -862545276
    # Famous string whose hashCode is Integer.MIN_VALUE: Kafka's Utils.abs maps it to 0.
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert partition_for("polygenelubricants", 50) == 0


def test_non_bmp_characters_hash_as_two_utf16_units() -> None:
    # "😀" is U+1F600 = surrogates D83D DE00 in Java: 0xD83D * 31 + 0xDE00.
    assert java_string_hash("😀") == 0xD83D * 31 + 0xDE00


def test_negative_hashes_use_kafkas_abs() -> None:
    group = "consumer-group-7"
    h = java_string_hash(group)
    assert partition_for(group, 50) == (h & 0x7FFFFFFF) % 50
    negatives = [g for g in (f"consumer-group-{i}" for i in range(200)) if java_string_hash(g) < 0]
    assert negatives and all(0 <= partition_for(g, 7) < 7 for g in negatives)


def test_worker_of_partition_and_bad_counts() -> None:
    assert [worker_for(p, 3) for p in range(6)] == [0, 1, 2, 0, 1, 2]
    with pytest.raises(ValueError):
        partition_for("g", 0)
