"""Stage outputs shared between runs (a sweep's trials): a stage is not evaluated again when an earlier run
evaluated the same runtime on the same requests.

Trials of a sweep differ in a setting or two and share every stage before them: on a GPU each of those stages
costs a minute on `gate`, so without sharing a trial re-evaluates the same five stages. The key of a stage's
entry (in the reference cache's directory, under `stages/`) is:

- the reference cache key (`refcache.reference_key`): checkpoint, requests and their tokens, the reference's
  dtype, identity, planner and forward (so the batch size), MLX, backend, device, BLAS and its threads;
- the stage runtime's identity and dtype: the checkpoint hash, the loaded dtype and every applied pass with its
  non-default settings, in order (`passes.contract.identity_suffix`), i.e. the lineage of accepted stages;
- the SHA-256 of every file of the laya_opt package and of its pass and fidelity folders (code, kernels,
  bundled suites): defaults and kernels are there;
- the MLX_* and LAYA_* environment variables (CUDA graphs and TF32 switches change bits).

A stage whose lineage took data (a pass setting that names a suite) is not cached: the data's content is not in
the key. A hit is not trusted alone: the stage's seeded re-run sample (`fidelity.rerun`) is evaluated on the
stage's own runtime and compared bit for bit with the cached outputs. Identical: those are the stage's outputs,
and the sample is its determinism check, as for a reused stage. Any difference: the stage is evaluated in full,
as if there were no entry, and the entry is replaced.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from laya_opt.core.runtime import Runtime
from laya_opt.fidelity.checker import Outputs
from laya_opt.runs.refcache import CacheKey, CacheResult, cached_reference, entry_path, make_key, write_entry
from laya_opt.util.resources import user_cache_dir
from laya_opt.util.system import environment_switches

KIND = "stages"
# Where the package's files are: laya_opt itself and the folders the layout installs under it.
PACKAGES = ("laya_opt", "laya_opt.passes", "laya_opt.fidelity")


# Not in the digest: bytecode caches; the gates files, which judge outputs after they are computed
# (calibrate-gates writes one after filing its cast outputs here, for the verdict runs that follow it);
# and what only explains: Markdown and a checkpoint's training logs (the wheel carries checkpoints/, whose
# TRAINING.md each training session rewrites; no code reads them, and the weights are in the reference key).
SKIPPED_FOLDERS = ("__pycache__", "gate_files", "logs")
SKIPPED_SUFFIXES = (".md",)


def counts_in_digest(relative: Path) -> bool:
    return not (set(relative.parts) & set(SKIPPED_FOLDERS)) and relative.suffix not in SKIPPED_SUFFIXES


def folder_digest(roots: dict[str, Path]) -> str:
    """SHA-256 over the relative path and bytes of every file under each named folder (the skipped excluded)."""
    digest = hashlib.sha256()
    for name, root in sorted(roots.items()):
        for path in sorted(p for p in root.rglob("*") if p.is_file() and counts_in_digest(p.relative_to(root))):
            digest.update(f"{name}/{path.relative_to(root).as_posix()}\0".encode() + path.read_bytes() + b"\0")
    return digest.hexdigest()


def package_folders() -> dict[str, Path]:
    return {name: Path(importlib.util.find_spec(name).origin).parent for name in PACKAGES}


@functools.lru_cache(maxsize=1)
def package_digest() -> str:
    """The package's code and data as installed (a wheel, or a checkout's editable install), once per process."""
    return folder_digest(package_folders())


@dataclass(frozen=True)
class StageCache:
    """The stage cache of runs whose reference has the key `reference` (the sweep's trials share one)."""

    reference: CacheKey
    directory: Path | None = None   # None: the user cache directory, as the reference cache

    def key(self, runtime: Runtime) -> CacheKey:
        return make_key({"reference": self.reference.digest, "identity": runtime.identity,
                         "dtype": str(runtime.dtype), "package": package_digest(),
                         "environment": environment_switches()})

    def outputs(self, key: CacheKey, compute: Callable[[], Outputs]) -> CacheResult:
        """The entry's outputs (status `hit`), or `compute()`d and stored."""
        return cached_reference(key, compute, self.directory, KIND)

    def replace(self, key: CacheKey, compute: Callable[[], Outputs]) -> Outputs:
        """`compute()`d outputs written over the entry (a hit whose sample answered otherwise)."""
        started = time.perf_counter()
        outputs = compute()
        root = self.directory if self.directory is not None else user_cache_dir()
        try:
            write_entry(entry_path(Path(root), key, KIND), key, outputs, time.perf_counter() - started)
        except OSError:  # a full or read-only cache must not cost the run
            pass
        return outputs
