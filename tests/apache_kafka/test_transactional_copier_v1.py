"""Kafka's exactly-once check through the gateway where the upstream has no transactions V2.

Kafka 3.9 and tansu finalize no ``transaction.version`` 2, so the gateway in front of them
finalizes none either: it never promises what the upstream's transaction coordinator cannot do.
Kafka 4.4's Java ``TransactionalMessageCopier`` then runs transactions V1 (AddOffsetsToTxn,
TxnOffsetCommit below v5, one producer epoch for the whole run), and copies exactly once while
the shard leading its group is killed -9. tansu serves aborted records to read_committed readers,
so there the output is read raw, aborted transactions dropped as a Kafka broker would
(:mod:`groupcoord_testing.committed_output`).

Each upstream is started by its own test, not by a parametrized module fixture: such a fixture
makes pytest reorder a module's tests around it, and beside the three-node cluster of
``test_transactional_copier.py`` that broke the copier tests there.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from groupcoord.common.partitioning import partition_for
from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord_testing.committed_output import committed_output

from .copier import (
    CommittedReader,
    Copy,
    assert_copied_exactly_once,
    copier_cluster,
    finalized_features,
    pending_offset_epochs,
    seeded_job,
    start_copier,
    stop_copier,
    upstream_named,
)

RECORDS = 2400


@pytest.mark.parametrize("upstream_name", ["kafka-3.9", "tansu"])
def test_copier_copies_exactly_once_on_transactions_v1_where_the_upstream_has_no_v2(
    upstream_name: str, tmp_path: Path
) -> None:
    with upstream_named(upstream_name, tmp_path) as upstream, copier_cluster(upstream, tmp_path / "cluster") as cluster:
        upstream_features = finalized_features(cluster, (upstream.host, upstream.port))
        assert upstream_features.get("transaction.version", 0) < 2, upstream_features
        assert "transaction.version" not in finalized_features(cluster, cluster.gateway.bootstrap_address)

        job = seeded_job(upstream, cluster, RECORDS, None)
        # tansu serves aborted records to read_committed readers: its output is read raw
        hides_aborted = not isinstance(upstream, EmbeddedBroker)
        readers = [CommittedReader(job.gateway, job.sink, RECORDS)] if hides_aborted else []
        for reader in readers:
            reader.start()
        copier = start_copier(job, tmp_path / "copier.log")
        copy = Copy(copier, tmp_path / "copier.log", cluster, upstream)
        try:
            copy.wait_for_progress(RECORDS // 4, 120, "a quarter copied")
            control = cluster.cluster.control  # type: ignore[union-attr]
            assert control is not None
            leader = control.placement[partition_for(job.group, cluster.options.partitions)].leader
            os.killpg(control.processes[leader].process.pid, signal.SIGKILL)
            copy.wait_for_progress(RECORDS, 180, "all copied")
            assert copier.wait(30) == 0, copy.report()
            copy.progress.join(10)
            for reader in readers:
                reader.join(90)
        finally:
            stop_copier(copier)
            for reader in readers:
                reader.stop.set()
        if hides_aborted:
            assert_copied_exactly_once(job, *readers)
        else:
            raw = cluster.run(committed_output(upstream.bootstrap, job.sink))
            assert_copied_exactly_once(job, output=[v.decode() for v in raw])
        epochs = pending_offset_epochs(upstream, cluster, job.group)
        assert epochs and not any(bump for _, bump in epochs), epochs[:5]
        assert len({e for e, _ in epochs}) == 1, "V1: no epoch bump between transactions"
