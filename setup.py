"""Generated protobuf code is produced when the package is built, never on import.

A wheel gets ``groupcoord.rpc`` / ``groupcoord.records`` compiled straight into its build tree,
so an installed copy needs neither ``proto/`` nor protoc; an editable install compiles them into
``services/`` (where ``scripts/test`` refreshes them too). Everything else is in pyproject.toml.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


def _generator():
    spec = importlib.util.spec_from_file_location("generate_protos", ROOT / "scripts" / "generate_protos.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildWithProtos(build_py):
    def run(self) -> None:
        super().run()
        generator = _generator()
        generator.generate(generator.SOURCE_ROOT if self.editable_mode else Path(self.build_lib))


setup(cmdclass={"build_py": BuildWithProtos})
