"""Where bundled files live, and how names and relative paths resolve (one place for both).

The stand-in checkpoint, the project tokenizer, the labelled suites and the gates files ship as package
data (`laya_opt.checkpoints`, `laya_opt/suites/data`, `laya_opt.fidelity/gate_files`), so a wheel install
works from any directory. Rules: the checkpoint name `standin` means the bundled stand-in; a suite or
gates file given by bare name (`heldout`, `standin`) is a bundled one; anything else is a path, and
relative paths resolve from the current working directory. Per-user state (the reference cache, the run
history) lives in the platform's cache and data directories, overridable by `LAYA_OPT_CACHE_DIR` /
`LAYA_OPT_DATA_DIR`.
"""
from __future__ import annotations

import os
import sys
from importlib import resources
from pathlib import Path

from laya_opt.util.errors import InputError

STANDIN = "standin"


def _package_dir(package: str) -> Path:
    return Path(str(resources.files(package)))


def standin_checkpoint() -> Path:
    return _package_dir("laya_opt.checkpoints") / "laya-tiny"


def project_tokenizer() -> Path:
    """The project's BPE tokenizer (what `make-checkpoint` ships with random checkpoints)."""
    return _package_dir("laya_opt.checkpoints") / "tokenizer"


def suites_dir() -> Path:
    return _package_dir("laya_opt.suites") / "data"


def suite_names() -> list[str]:
    return sorted(path.stem for path in suites_dir().glob("*.jsonl"))


def gates_dir() -> Path:
    return _package_dir("laya_opt.fidelity") / "gate_files"


def gates_file_path(value: str | Path, what: str = "gates_file") -> Path:
    """A bundled gates file by name (`standin`), or a .yaml/.json path; a missing one names the bundled ones."""
    text = str(value)
    bundled = "/" not in text and not text.endswith((".yaml", ".yml", ".json"))
    path = gates_dir() / f"{text}.yaml" if bundled else Path(text).expanduser()
    if not path.is_file():
        names = sorted(item.stem for item in gates_dir().glob("*.yaml"))
        raise InputError(f"{what}: gates file {text!r} not found ({path}); bundled: {', '.join(names) or 'none'}, "
                         "or `spec` for the spec's tolerances")
    return path


def checkpoint_path(value: str | Path | None) -> Path:
    """`standin` (or None) is the bundled stand-in; anything else a directory path (relative: from the cwd)."""
    if value is None or str(value) == STANDIN:
        return standin_checkpoint()
    return Path(value).expanduser()


def is_suite_path(value: str) -> bool:
    return "/" in value or value.endswith(".jsonl")


def suite_path(value: str, what: str = "suite") -> Path:
    """A bundled suite by name, or a .jsonl path; a missing one is an InputError listing the bundled names."""
    path = Path(value).expanduser() if is_suite_path(value) else suites_dir() / f"{value}.jsonl"
    if not path.is_file():
        raise InputError(f"{what}: suite {value!r} not found ({path}); bundled suites: "
                         f"{', '.join(suite_names()) or 'none'}")
    return path


def _user_dir(override: str, xdg: str, xdg_default: str, mac: str, windows: str) -> Path:
    """`$override`, else the platform's per-user folder for this kind of file, with `laya-opt` appended."""
    if os.environ.get(override):
        return Path(os.environ[override]).expanduser()
    home = Path.home()
    if sys.platform == "darwin":
        return home / "Library" / mac / "laya-opt"
    if sys.platform.startswith("win"):
        return Path(os.environ.get("LOCALAPPDATA") or home / "AppData" / "Local") / "laya-opt" / windows
    return Path(os.environ.get(xdg) or home / xdg_default).expanduser() / "laya-opt"


def user_cache_dir() -> Path:
    """Recomputable files (reference outputs): `$LAYA_OPT_CACHE_DIR`, `$XDG_CACHE_HOME/laya-opt`,
    ~/.cache/laya-opt."""
    return _user_dir("LAYA_OPT_CACHE_DIR", "XDG_CACHE_HOME", ".cache", "Caches", "Cache")


def user_data_dir() -> Path:
    """Files worth keeping (the run history): `$LAYA_OPT_DATA_DIR`, `$XDG_DATA_HOME/laya-opt`,
    ~/.local/share/laya-opt."""
    return _user_dir("LAYA_OPT_DATA_DIR", "XDG_DATA_HOME", ".local/share", "Application Support", "Data")
