"""Where bundled files live, and how names and relative paths resolve (one place for both).

The stand-in checkpoint, the project tokenizer, the labelled suites and the gates files ship as package
data (`laya_opt.checkpoints`, `laya_opt.fidelity/suites`, `laya_opt.fidelity/gates`), so a wheel install
works from any directory. Rules: the checkpoint name `standin` means the bundled stand-in; a suite or
gates file given by bare name (`heldout`, `standin`) is a bundled one; anything else is a path, and
relative paths resolve from the current working directory.
"""
from __future__ import annotations

from importlib import resources
from pathlib import Path

from .errors import InputError

STANDIN = "standin"


def _package_dir(package: str) -> Path:
    return Path(str(resources.files(package)))


def standin_checkpoint() -> Path:
    return _package_dir("laya_opt.checkpoints") / "laya-tiny"


def project_tokenizer() -> Path:
    """The project's BPE tokenizer (what `make-checkpoint` ships with random checkpoints)."""
    return _package_dir("laya_opt.checkpoints") / "tokenizer"


def suites_dir() -> Path:
    return _package_dir("laya_opt.fidelity") / "suites"


def suite_names() -> list[str]:
    return sorted(path.stem for path in suites_dir().glob("*.jsonl"))


def gates_dir() -> Path:
    return _package_dir("laya_opt.fidelity") / "gates"


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
