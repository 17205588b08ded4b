"""Capacity planning from the coordinator's metric-sample history (a PySpark job).

Input: the samples shards publish to the metrics topic every 10 s (schema in
:mod:`groupcoord.observability.metric_samples`), read by :mod:`groupcoord_spark.sources`.
Output (in ``out_dir``): ``partitions.parquet``, ``shards.parquet``, ``timeline.parquet``,
``hot_groups.parquet``, ``plan.json``, ``capacity.png`` and ``report.txt``.

One module per step: :mod:`.load` measures the load in the history (DataFrame functions),
:mod:`.sizing` turns it into threads and shards, :mod:`.report` and :mod:`.plot` present the
plan, :mod:`.output` writes the files, :mod:`.job` runs them in order, and :mod:`.command` is
the command line — ``groupcoord capacity`` in local mode, or on a cluster::

    spark-submit spark/groupcoord_spark/capacity/command.py --bootstrap ... --out ...

(the driver's Python needs the ``groupcoord[spark]`` package installed, or ship it with
``--py-files``).
"""
