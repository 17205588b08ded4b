"""Fixtures of the container tests: a Docker Engine (started here when none answers) and our
image built from the real Dockerfile on a base made from Debian packages (see docker_env)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from real_parts import unavailable

from .docker_env import (
    Docker,
    DockerUnavailable,
    build_base_image,
    build_client_image,
    build_image,
    connect,
)


def _unavailable(reason: str) -> None:
    """Skip where Docker cannot run; on CI it must, so there it fails instead."""
    unavailable(reason)


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
def base_image(docker: Docker) -> str:
    try:
        return build_base_image(docker)
    except DockerUnavailable as exc:
        _unavailable(str(exc))


@pytest.fixture(scope="session")
def image(docker: Docker, base_image: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """``groupcoord:test``, built from the repository's Dockerfile (cached layers reused)."""
    tag, seconds = build_image(docker, base_image, tmp_path_factory.mktemp("build"))
    print(f"\nbuilt {tag} on {base_image} in {seconds:.1f}s")
    return tag


@pytest.fixture(scope="session")
def local_image(docker: Docker, base_image: str, image: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """``groupcoord-local:test``: the Dockerfile's ``local`` target (the image plus ``groupcoord
    up``'s embedded tansu broker); built after ``image``, whose layers it reuses."""
    tag, seconds = build_image(docker, base_image, tmp_path_factory.mktemp("build-local"), target="local")
    print(f"\nbuilt {tag} on {base_image} in {seconds:.1f}s")
    return tag


@pytest.fixture(scope="session")
def client_image(docker: Docker, base_image: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """``groupcoord-client:test``: confluent-kafka (librdkafka) and aiokafka on the same base."""
    return build_client_image(docker, base_image, tmp_path_factory.mktemp("client"))
