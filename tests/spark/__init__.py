"""Tests of the PySpark jobs (a local Spark session, see the ``spark`` fixture)."""
