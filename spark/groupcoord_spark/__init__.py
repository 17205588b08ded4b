"""PySpark jobs over the coordinator's metric-sample history (the ``spark`` extra).

:mod:`.sources` reads the samples (the metrics topic, through Spark's Kafka connector or an
aiokafka Python data source, or exported JSON files) with a schema derived from
:class:`groupcoord.observability.metric_samples.MetricSample`, the one definition of a sample;
:mod:`.capacity` turns them into a capacity plan (``groupcoord capacity``).

Shipped in the same wheel as :mod:`groupcoord` and imports from it (the sample schema, the
upstream security settings); :mod:`groupcoord` loads it only when ``groupcoord capacity`` runs,
so the product runs without PySpark installed.
"""
