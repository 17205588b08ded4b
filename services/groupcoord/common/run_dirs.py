"""Where groupcoord writes files at run time: the local cluster's state file and the broker binary.

An installed copy must run where ``$HOME`` is missing, read-only or not executable (a container
with a read-only root filesystem and a numeric user without a home), so nothing is written
under the home directory unless it is writable, and every location can be given by the
environment. Each kind of directory is the first writable one of its candidates, the same on
every call, so ``groupcoord status`` finds the file ``groupcoord up`` wrote.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

STATE_DIR_ENV = "GROUPCOORD_STATE_DIR"
CACHE_DIR_ENV = "GROUPCOORD_CACHE_DIR"


def _home() -> Path | None:
    try:
        return Path.home()
    except (KeyError, RuntimeError):  # a numeric user without a passwd entry nor $HOME
        return None


def _per_user_temp(kind: str) -> Path:
    return Path(tempfile.gettempdir()) / f"groupcoord-{os.getuid()}" / kind


def _usable(path: Path) -> bool:
    """``path`` exists as a writable directory, or could be created (its nearest existing
    ancestor is a writable directory)."""
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            return False
        probe = probe.parent
    return probe.is_dir() and os.access(probe, os.W_OK | os.X_OK)


def first_usable(candidates: Iterable[Path]) -> Path:
    """The first candidate directory that can be written; created on the way."""
    tried = []
    for path in candidates:
        tried.append(str(path))
        if _usable(path):
            try:
                path.mkdir(parents=True, exist_ok=True)
            except OSError:
                continue
            return path
    raise OSError(f"no writable directory among {', '.join(tried)}")


def _xdg(var: str) -> list[Path]:
    value = os.environ.get(var)
    return [Path(value) / "groupcoord"] if value and Path(value).is_absolute() else []


def state_dir() -> Path:
    """``$GROUPCOORD_STATE_DIR``, else ``$XDG_STATE_HOME/groupcoord``, else ``~/.groupcoord``,
    else a per-user folder under the temp directory."""
    explicit = os.environ.get(STATE_DIR_ENV)
    if explicit:
        return first_usable([Path(explicit)])
    home = _home()
    candidates = [*_xdg("XDG_STATE_HOME")]
    if home is not None:
        candidates.append(home / ".groupcoord")
    candidates.append(_per_user_temp("state"))
    return first_usable(candidates)


def cache_dir() -> Path:
    """``$GROUPCOORD_CACHE_DIR``, else ``$XDG_CACHE_HOME/groupcoord``, else
    ``~/.cache/groupcoord``, else a per-user folder under the temp directory."""
    explicit = os.environ.get(CACHE_DIR_ENV)
    if explicit:
        return first_usable([Path(explicit)])
    home = _home()
    candidates = [*_xdg("XDG_CACHE_HOME")]
    if home is not None:
        candidates.append(home / ".cache" / "groupcoord")
    candidates.append(_per_user_temp("cache"))
    return first_usable(candidates)
