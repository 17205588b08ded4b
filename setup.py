"""Package discovery for the mapped source folders, and proto generation at build time.

pyproject.toml maps import names onto the architecture's folders (``package-dir``); setuptools
cannot discover sub-packages below a mapped folder by itself, so they are listed here. Building a
wheel also compiles ``proto/`` into ``groupcoord.rpc`` / ``groupcoord.records`` so an installed
copy never needs the proto sources (an editable checkout regenerates them on import instead, see
``groupcoord.protogen``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).parent
PACKAGE_DIRS = {
    "groupcoord": "services/groupcoord",
    "groupcoord.gateway": "services/gateway",
    "groupcoord.coordinator": "services/coordinator",
    "groupcoord.controlplane": "services/controlplane",
    "groupcoord.observability": "services/observability",
    "groupcoord_operator": "operator/groupcoord_operator",
    "groupcoord_spark": "spark",
}


def _packages() -> tuple[list[str], dict[str, str]]:
    names: list[str] = []
    dirs: dict[str, str] = {}
    for name, folder in PACKAGE_DIRS.items():
        base = ROOT / folder
        for init in sorted(base.rglob("__init__.py")):
            rel = init.parent.relative_to(base)
            if any(part.startswith((".", "_")) and part != "__pycache__" for part in rel.parts):
                continue
            pkg = ".".join((name, *rel.parts)) if rel.parts else name
            names.append(pkg)
            dirs[pkg] = str(Path(folder, *rel.parts))
    return names, dirs


class BuildWithProtos(build_py):
    def run(self) -> None:
        sys.path.insert(0, str(ROOT / "services"))
        from groupcoord.protogen import generate  # noqa: PLC0415

        generate(force=True)
        super().run()


packages, package_dir = _packages()
setup(packages=packages, package_dir=package_dir, cmdclass={"build_py": BuildWithProtos})
