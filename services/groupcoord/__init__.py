"""groupcoord: a Kafka group coordinator that runs as its own service cluster."""

from groupcoord.protogen import generate as _generate_protos

__version__ = "0.1.0"

_generate_protos()
