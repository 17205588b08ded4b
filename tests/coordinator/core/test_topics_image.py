"""The topics image remembers what it computed about subscriptions: the same answers as
computing them afresh, the same hash as every earlier release stored in group metadata
records (a different hash would bump every group's epoch after an upgrade), bounded memory."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from groupcoord.coordinator.core import topics_image
from groupcoord.coordinator.core.consumer.regex_subscriptions import resolve
from groupcoord.coordinator.core.topics_image import TopicImage, TopicsImage


def reference_hash(image: TopicsImage, topic_names: Iterable[str]) -> int:
    """The metadata hash as it was computed before the image remembered anything."""
    h = hashlib.blake2b(digest_size=8)
    for name in sorted(set(topic_names)):
        t = image.by_name.get(name)
        if t is None:
            continue
        h.update(name.encode())
        h.update(b"\0")
        h.update(t.topic_id)
        h.update(t.num_partitions.to_bytes(4, "big"))
        for racks in t.partition_racks:
            h.update(",".join(sorted(racks)).encode())
            h.update(b";")
    return int.from_bytes(h.digest(), "big") >> 1


NAMES = [f"t{i}" for i in range(8)]
racks = st.frozensets(st.sampled_from(["a", "b", "c"]), max_size=2)
topics = st.lists(
    st.tuples(st.sampled_from(NAMES), st.integers(1, 4), st.booleans(), st.lists(racks, max_size=4)),
    unique_by=lambda t: t[0],
)


def image_of(spec: list[tuple[str, int, bool, list[frozenset[str]]]]) -> TopicsImage:
    return TopicsImage.of(
        TopicImage(name.encode().ljust(16, b"\0"), name, n, tuple(r) if with_racks else ())
        for name, n, with_racks, r in spec
    )


@given(topics, st.lists(st.lists(st.sampled_from([*NAMES, "missing"]), max_size=6), min_size=1, max_size=4))
def test_the_metadata_hash_is_the_one_every_release_stored(spec, subscriptions) -> None:
    image = image_of(spec)
    for names in [*subscriptions, *subscriptions]:  # asked again: answered from memory
        assert image.metadata_hash(names) == reference_hash(image, names)


@given(topics, st.lists(st.sampled_from([*NAMES, "missing"]), max_size=6), st.frozensets(st.sampled_from(NAMES)))
def test_a_subscription_s_ids_are_its_existing_topics_and_its_regex_s(spec, names, resolved) -> None:
    image = image_of(spec)
    wanted = set(names) | resolved
    expected = frozenset(t.topic_id for t in image.by_name.values() if t.name in wanted)
    got = image.subscription_ids(tuple(names), resolved)
    assert got == expected
    assert image.subscription_ids(tuple(names), resolved) is got  # members sharing it share one set
    assert image.subscription_ids(tuple(names)) == frozenset(
        t.topic_id for t in image.by_name.values() if t.name in set(names)
    )


def test_what_an_image_remembers_is_not_part_of_its_value() -> None:
    spec = [("t0", 3, True, [frozenset({"a"})] * 3), ("t1", 1, False, [])]
    asked, fresh = image_of(spec), image_of(spec)
    asked.subscription_ids(("t0", "t1"))
    asked.metadata_hash(["t0"])
    assert asked == fresh


def test_an_image_remembers_a_bounded_number_of_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(topics_image, "MEMO_ENTRIES", 10)
    image = image_of([(name, 2, False, []) for name in NAMES])
    for i in range(100):
        subscription = tuple(NAMES[j] for j in range(len(NAMES)) if i >> j & 1)
        assert image.subscription_ids(subscription) == frozenset(n.encode().ljust(16, b"\0") for n in subscription)
        assert len(image._memo) <= 10


@given(topics, st.lists(st.lists(st.sampled_from([*NAMES, "missing"]), max_size=6), min_size=1, max_size=6))
def test_a_large_subscription_s_whole_hash_is_remembered_and_is_the_same_hash(spec, subscriptions) -> None:
    image = image_of(spec)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(topics_image, "HASH_MEMO_MIN_TOPICS", 0)  # every subscription counts as large
        m.setattr(topics_image, "HASH_MEMO_ENTRIES", 3)
        for names in [*subscriptions, *reversed(subscriptions)]:
            assert image.metadata_hash(names) == reference_hash(image, names)
            assert image.metadata_hash(iter(names)) == reference_hash(image, names)  # any iterable
            assert len(image._hashes) <= 3


def test_the_coordinators_own_topics_are_hidden_under_the_names_in_use() -> None:
    """A cluster run with ``--state-topic`` of its own hides that name, not the default's."""
    hidden = frozenset({"gc_state", "gc_metrics"})
    image = TopicsImage.of(
        [TopicImage(uuid.uuid4().bytes, n, 1) for n in ("gc_state", "gc_metrics", "__groupcoord_state", "app")],
        hidden,
    )
    assert resolve(".*", image) == {"__groupcoord_state", "app"}
    assert resolve("gc_.*", image) == frozenset()
