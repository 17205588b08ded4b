"""A process ready to serve moves what it built to start out of the cyclic collector's sight."""

from __future__ import annotations

import gc
import weakref

from groupcoord.common.heap import FULL_COLLECTION_EVERY, freeze_startup_objects, space_out_full_collections


class Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: garbage only the cyclic collector frees


def test_startup_objects_are_frozen_and_startup_garbage_is_collected_first() -> None:
    gc.unfreeze()
    garbage = weakref.ref(Node())
    built = [[n] for n in range(1000)]  # what start-up keeps
    try:
        freeze_startup_objects()
        assert garbage() is None  # collected, not frozen for the life of the process
        assert gc.get_freeze_count() >= len(built)
        assert not any(o is built for o in gc.get_objects())  # collections skip what was kept
    finally:
        gc.unfreeze()


def test_full_collections_are_spaced_out_and_the_young_generations_left_alone() -> None:
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        space_out_full_collections()
        assert gc.get_threshold() == (700, 10, FULL_COLLECTION_EVERY)
        gc.set_threshold(5000, 20, 10)
        space_out_full_collections()
        assert gc.get_threshold() == (5000, 20, FULL_COLLECTION_EVERY)
    finally:
        gc.set_threshold(*before)
