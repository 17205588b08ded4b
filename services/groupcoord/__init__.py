"""groupcoord: a Kafka group coordinator that runs as its own service cluster."""

__version__ = "0.1.0"
