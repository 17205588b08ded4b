"""Tests of the capacity job on synthetic metric-sample histories."""
