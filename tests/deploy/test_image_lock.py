"""The image installs from lock files (requirements/image.lock, build.lock): every package pinned
with the hashes of its files, so two builds of one commit install the same bytes. These checks
keep the locks in step with pyproject.toml: a dependency added or tightened there without
regenerating the lock (the command is in the Dockerfile) fails here, not in a user's build."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$")


@dataclass
class Pin:
    version: Version
    marker: str | None
    hashes: int = 0


Pins = dict[str, list[Pin]]


def locked(name: str) -> Pins:
    """package -> its pins (a universal lock may pin a package twice, under exclusive markers),
    each with the number of file hashes that follow it."""
    pins: Pins = {}
    current: Pin | None = None
    for line in (ROOT / "requirements" / name).read_text().splitlines():
        if m := PIN.match(line):
            current = Pin(Version(m[2]), m[3])
            pins.setdefault(canonicalize_name(m[1]), []).append(current)
        elif line.strip().startswith("--hash=sha256:") and current is not None:
            current.hashes += 1
    return pins


def assert_satisfied(requirements: list[str], pins: Pins) -> None:
    for text in requirements:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        assert name in pins, f"{text}: not in the lock (regenerate it, see the Dockerfile)"
        for pin in pins[name]:
            assert req.specifier.contains(pin.version, prereleases=True), (
                f"{text}: the lock pins {pin.version} (regenerate it, see the Dockerfile)"
            )


@pytest.fixture(scope="module")
def project() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_image_lock_pins_what_pyproject_asks_for_the_image(project: dict[str, object]) -> None:
    meta = project["project"]
    assert isinstance(meta, dict)
    pins = locked("image.lock")
    assert_satisfied(meta["dependencies"] + meta["optional-dependencies"]["operator"], pins)
    # nothing only the tests or the spark extra want is shipped
    for extra_only in ("pytest", "pyspark", "confluent-kafka", "grpcio-tools"):
        assert extra_only not in pins, f"{extra_only} is locked into the image"


def test_the_local_lock_pins_the_local_extra_and_the_image_ships_none_of_it(project: dict[str, object]) -> None:
    meta = project["project"]
    assert isinstance(meta, dict)
    local = meta["optional-dependencies"]["local"]
    assert_satisfied(local, locked("local.lock"))
    image = locked("image.lock")
    for text in local:  # pods run the default target: no embedded broker, no CA library
        assert canonicalize_name(Requirement(text).name) not in image, f"{text} is locked into the image"


def test_the_build_lock_pins_the_build_system(project: dict[str, object]) -> None:
    build = project["build-system"]
    assert isinstance(build, dict)
    assert_satisfied(build["requires"], locked("build.lock"))


@pytest.mark.parametrize("name", ["image.lock", "build.lock", "local.lock"])
def test_every_locked_package_carries_hashes(name: str) -> None:
    pins = locked(name)
    assert pins
    for package, entries in pins.items():
        for pin in entries:
            assert pin.hashes > 0, f"{name}: {package}=={pin.version} has no hash (pip --require-hashes refuses it)"


def test_protobuf_code_generated_at_build_runs_on_the_locked_runtime() -> None:
    """grpcio-tools generates code that checks the protobuf runtime's version at import: the
    build's and the image's protobuf must be one version (a newer gencode refuses to load)."""
    image, build = locked("image.lock"), locked("build.lock")
    assert [p.version for p in image["protobuf"]] == [p.version for p in build["protobuf"]]
