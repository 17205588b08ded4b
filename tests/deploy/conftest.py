"""Fixtures of the container tests: a Docker Engine (started here when none answers) and our
image built from the real Dockerfile on a base made from Debian packages (see docker_env)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from .docker_env import Docker, DockerUnavailable, build_base_image, build_image, connect


def _unavailable(reason: str) -> None:
    """Skip where Docker cannot run; on CI as root it must, so there it fails instead."""
    if os.environ.get("CI") and os.geteuid() == 0:
        pytest.fail(f"the container tests must run on CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def docker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Docker]:
    try:
        engine = connect(tmp_path_factory.mktemp("dockerd"))
    except DockerUnavailable as exc:
        _unavailable(str(exc))
    try:
        yield engine
    finally:
        engine.stop_daemon()


@pytest.fixture(scope="session")
def image(docker: Docker, tmp_path_factory: pytest.TempPathFactory) -> str:
    """``groupcoord:test``, built from the repository's Dockerfile (cached layers reused)."""
    try:
        base = build_base_image(docker)
    except DockerUnavailable as exc:
        _unavailable(str(exc))
    tag, seconds = build_image(docker, base, tmp_path_factory.mktemp("build"))
    print(f"\nbuilt {tag} on {base} in {seconds:.1f}s")
    return tag
