"""Staging directories: build an output beside its final place, publish it with one rename, leave nothing behind.

A staging dir is `<parent>/.laya-staging-<name>-<random>/`; the process that made it holds an
exclusive lock on its `.owner` file while it lives. On the way out (success, an exception, Ctrl-C,
or SIGTERM, which the CLI turns into an exception) the staging dir is removed, and so is any parent
this call created that is still empty. Each new staging dir first sweeps its parent of staging dirs
whose owner is gone (a run killed with SIGKILL), so a crash is cleaned up by the next run. Directories
get the user's normal permissions (the umask), not mkdtemp's 0700.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from laya_opt.util.errors import InputError

PREFIX = ".laya-staging-"
OWNER = ".owner"
UNLOCKED_GRACE_S = 600.0   # a staging dir without .owner yet is being created


def normal_mode() -> int:
    """0o777 less the umask: the mode `mkdir` would give."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o777 & ~mask


def check_creatable(path: Path, what: str) -> None:
    """Refuse, before any work, a directory that cannot be created: its nearest existing ancestor must be a
    writable directory."""
    path = Path(path).absolute()
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir():
        raise InputError(f"{what} {path}: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(f"{what} {path}: {existing} is not writable")


def make_parents(path: Path) -> list[Path]:
    """Create `path` and its missing parents; return the ones created, outermost first."""
    missing = [p for p in (path, *path.parents) if not p.exists()][::-1]
    path.mkdir(parents=True, exist_ok=True)
    return missing


def remove_if_empty(paths: list[Path]) -> None:
    for path in reversed(paths):
        try:
            path.rmdir()
        except OSError:  # not empty (something was published there) or already gone
            return


def sweep(parent: Path) -> list[Path]:
    """Remove the staging dirs under `parent` whose owning process is gone; return them."""
    removed = []
    for path in sorted(parent.glob(f"{PREFIX}*")):
        try:
            handle = open(path / OWNER)
        except FileNotFoundError:
            if path.is_dir() and time.time() - path.stat().st_mtime > UNLOCKED_GRACE_S:
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
            continue
        except OSError:
            continue
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # its owner is alive
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


@contextmanager
def staging_dir(parent: Path, name: str) -> Iterator[Path]:
    """A fresh, locked staging dir under `parent` (created if needed); removed on exit unless published."""
    created = make_parents(Path(parent))
    sweep(Path(parent))
    path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{name}-", dir=parent))
    try:
        os.chmod(path, normal_mode())
        with open(path / OWNER, "w") as owner:
            fcntl.flock(owner, fcntl.LOCK_EX)
            yield path
    finally:
        if path.exists():
            shutil.rmtree(path, ignore_errors=True)
        remove_if_empty(created)


def publish(staging: Path, target: Path) -> None:
    """Rename a finished staging dir to `target`; the rename fails rather than replace a non-empty directory."""
    os.rename(staging, target)
    (target / OWNER).unlink()


def replace_file(path: Path, write) -> None:
    """Write a single file through a hidden partial beside it, renamed over `path` once `write(partial)` returned:
    readers see the old file or the whole new one, and a failed write leaves no partial behind."""
    partial = path.with_name(f".{path.name}.partial-{os.getpid()}{path.suffix}")
    try:
        write(partial)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
