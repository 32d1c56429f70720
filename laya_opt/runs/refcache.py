"""A cache of the reference runtime's checker outputs, keyed by everything those outputs depend on.

A run evaluates its FP32 reference on the gating suite before any stage, and on the held-out suite that
is minutes of CPU time spent on an answer that is already known. An entry is reused only when every
key component is the same:

- checkpoint: the SHA-256 of model.safetensors and of the config files beside it (the temperatures in
  rl_agent_config.json change every probability);
- requests: the SHA-256 of the suite's requests (states, questions, labels, tags, record ids) and of the
  token tensors they prepare to (`bench.prepared_digest`);
- reference: dtype, identity, planner and forward (the batch size moves the padding);
- MLX version, backend, default device and the BLAS behind CPU matmuls, with its thread count on the CPU
  (OpenBLAS splits a matmul by thread count, which moves float32 rounding: 1 and 2 threads give different
  bits, so a Ray worker's one-thread trial must not reuse a two-thread process's reference);
- hardware: the device's name and architecture as MLX reports them (`mx.device_info()`: the GPU model, e.g. an
  H100 or an H200, whose GEMM kernels differ; the CPU's model, whose instruction set picks the BLAS's
  kernels), since "Device(gpu, 0)" is the same string on every GPU and a cache directory can be shared by
  machines (Ray workers, a carried device study);
- source: the SHA-256 of every laya_opt source file the evaluation imports, found by reading their
  imports (so it works from a wheel as from a checkout, and an edit to the model code is a miss).

The file name is the SHA-256 of those components, and the entry repeats them: a read checks them, the
payload's length and its SHA-256, so a truncated, corrupted or foreign entry is recomputed and replaced,
never reused. Entries are written to a temporary file and renamed into place. The cache holds at most
`LAYA_OPT_CACHE_MAX_MB` (512 by default). A lookup holds a per-entry file lock from the read to the
store, so concurrent runs with one key compute it once: after a store, the least recently used entries go (a hit
marks its entry used), never the one just written.
"""
from __future__ import annotations

import ast
import ctypes
import fcntl
import gzip
import hashlib
import importlib.util
import json
import math
import os
import tempfile
import time
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

from laya_opt.core.checkpoint import file_sha256
from laya_opt.util.errors import InputError
from laya_opt.fidelity.checker import EvalRequest, Outputs, QuestionOutput
from laya_opt.util.resources import user_cache_dir
from laya_opt.core.runtime import ModelInput, Runtime

FORMAT = "laya-opt-reference-outputs/1"
# The modules whose source decides what the reference evaluation returns; their imports are followed.
SOURCE_ROOTS = ("laya_opt.core.runtime", "laya_opt.fidelity.checker", __name__)
CHECKPOINT_FILES = ("model.safetensors", "rl_agent_config.json", "encoder/config.json", "mlx_config.json")
KEY_PREVIEW = 12
MAX_MB_VARIABLE = "LAYA_OPT_CACHE_MAX_MB"
DEFAULT_MAX_MB = 512       # entries are 10 KB (smoke) to 160 KB (heldout): thousands fit
ARRAY_FIELDS = {"probabilities": np.float64, "logits": np.float32, "action": np.float32}  # QuestionOutput's arrays


class CorruptEntry(ValueError):
    """An entry that cannot be trusted; the cache recomputes and replaces it."""


# ---------------------------------------------------------------------------------------------------------------------
# The key


def _module_file(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):  # an imported name that is a class or function, not a module
        return None
    return Path(spec.origin) if spec is not None and spec.origin and spec.origin.endswith(".py") else None


def _imported_modules(name: str, path: Path) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    named: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package) \
                if node.level else node.module or ""
            named.add(base)
            named.update(f"{base}.{alias.name}" for alias in node.names)
    return {module for module in named if module.split(".")[0] == "laya_opt"}


def source_files() -> dict[str, Path]:
    """Module name -> source file for `roots` and every laya_opt module they import, parents included."""
    found: dict[str, Path] = {}
    pending = list(SOURCE_ROOTS)
    while pending:
        name = pending.pop()
        if name in found:
            continue
        path = _module_file(name)
        if path is None:
            continue
        found[name] = path
        parents = [".".join(name.split(".")[:depth]) for depth in range(1, name.count(".") + 1)]
        pending += parents + sorted(_imported_modules(name, path))
    return dict(sorted(found.items()))


def source_digest() -> str:
    digest = hashlib.sha256()
    for name, path in source_files().items():
        digest.update(f"{name}\0".encode() + path.read_bytes() + b"\0")
    return digest.hexdigest()


def checkpoint_digest(checkpoint_dir: Path, weights_sha256: str | None = None) -> str:
    """SHA-256 over the weights and config files of a checkpoint directory (absent optional files count)."""
    parts = []
    for name in CHECKPOINT_FILES:
        path = checkpoint_dir / name
        if name == "model.safetensors" and weights_sha256:
            parts.append(f"{name}={weights_sha256}")
        else:
            parts.append(f"{name}={file_sha256(path) if path.is_file() else 'absent'}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def requests_digest(requests: Sequence[EvalRequest]) -> str:
    """SHA-256 of the requests as data: record ids, states, questions, labels and tags, in order.

    Keys keep their order: a question's options and a dict state render in it, so the model sees it
    (sorting them once made a pair differing only in option order share this component)."""
    rows = [[r.record_id, r.state, r.questions, r.labels, r.tags] for r in requests]
    text = json.dumps(rows, ensure_ascii=False, default=repr)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CacheKey:
    digest: str                # the entry's file name
    components: dict           # what it was computed from, stored in the entry and checked on read


def make_key(components: dict) -> CacheKey:
    components = {"format": FORMAT, **components}
    return CacheKey(hashlib.sha256(json.dumps(components, sort_keys=True).encode()).hexdigest(), components)


def reference_key(reference: Runtime, requests: Sequence[EvalRequest], checkpoint_dir: Path, token_sha256: str,
                  platform: dict, weights_sha256: str | None = None) -> CacheKey:
    """The key of `reference`'s outputs on `requests`; `platform` is `bench.environment()` (or its subset)."""
    return make_key({
        "checkpoint": checkpoint_digest(Path(checkpoint_dir), weights_sha256),
        "requests": requests_digest(requests),
        "tokens": token_sha256,
        "dtype": str(reference.dtype),
        "identity": reference.identity,
        "planner": getattr(reference.planner, "description", repr(reference.planner)),
        "forward": getattr(reference.forward, "description", repr(reference.forward)),
        "mlx": platform["versions"]["mlx"],
        "backend": platform["backend"],
        "device": platform["device"],
        "hardware": hardware(platform),
        "blas": platform["blas"]["library"],
        "blas_threads": blas_threads() if platform["backend"] == "cpu" else None,
        "source": source_digest(),
    })


def hardware(platform: dict) -> dict:
    """The device's model in `platform["device_info"]`: its name and architecture only (the rest, e.g. memory
    sizes, does not change an output)."""
    info = platform["device_info"]
    return {name: info.get(name) for name in ("device_name", "architecture")}


def blas_threads() -> int | None:
    """The thread count of the BLAS in this process's global scope (OpenBLAS, MKL), or None when unknown."""
    try:
        scope = ctypes.CDLL(None)
    except OSError:
        return None
    for name in ("openblas_get_num_threads", "MKL_Get_Max_Threads"):
        getter = getattr(scope, name, None)
        if getter is not None:
            getter.restype = ctypes.c_int
            return int(getter())
    return None


# ---------------------------------------------------------------------------------------------------------------------
# Outputs <-> plain data (JSON keeps float64 exactly; float32 arrays pass through float64 unchanged)


def _question_to_plain(q: QuestionOutput) -> dict:
    row = {f.name: getattr(q, f.name) for f in fields(q)}  # every field: a new one is cached too
    row.update({name: row[name].tolist() for name in ARRAY_FIELDS}, tags=dict(q.tags),
               model_input=None if q.model_input is None else asdict(q.model_input))
    return row


def _question_from_plain(row: dict) -> QuestionOutput:
    fed = row["model_input"]
    return QuestionOutput(**{**row, **{name: np.asarray(row[name], dtype) for name, dtype in ARRAY_FIELDS.items()},
                             "model_input": None if fed is None else
                             ModelInput(tuple(fed["ids"]), tuple(fed["markers"]), fed["qtype"])})


def outputs_to_bytes(outputs: Outputs) -> bytes:
    plain = {"identity": outputs.identity, "repeat": outputs.repeat, "rerun": outputs.rerun,
             "questions": [_question_to_plain(q) for q in outputs.questions]}
    # mtime=0: the same outputs give the same bytes
    return gzip.compress(json.dumps(plain, ensure_ascii=False).encode("utf-8"), mtime=0)


def outputs_from_bytes(payload: bytes) -> Outputs:
    plain = json.loads(gzip.decompress(payload).decode("utf-8"))
    return Outputs(identity=plain["identity"], repeat=plain["repeat"], rerun=plain.get("rerun", 0),
                   questions=tuple(_question_from_plain(row) for row in plain["questions"]))


# ---------------------------------------------------------------------------------------------------------------------
# Entries: one header line (JSON), then the gzip payload


def entry_path(cache_dir: Path, key: CacheKey, kind: str = "reference") -> Path:
    """`kind`: the folder of the cache (`reference`; `stages`, laya_opt.runs.stagecache)."""
    return cache_dir / kind / f"{key.digest}.entry"


def write_entry(path: Path, key: CacheKey, outputs: Outputs, compute_s: float) -> None:
    payload = outputs_to_bytes(outputs)
    header = {"format": FORMAT, "key": key.digest, "components": key.components, "compute_s": compute_s,
              "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "payload_bytes": len(payload), "payload_sha256": hashlib.sha256(payload).hexdigest()}
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, staging = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(json.dumps(header, sort_keys=True).encode("ascii") + b"\n" + payload)
            out.flush()
            os.fsync(out.fileno())
        os.replace(staging, path)  # readers see the old entry or the whole new one, never a part
    except BaseException:
        Path(staging).unlink(missing_ok=True)
        raise


def max_cache_bytes() -> int:
    """The reference cache's size limit: `LAYA_OPT_CACHE_MAX_MB` (default 512), read per lookup."""
    raw = os.environ.get(MAX_MB_VARIABLE, "").strip()
    if not raw:
        return DEFAULT_MAX_MB * 2 ** 20
    try:
        megabytes = float(raw)
    except ValueError:
        megabytes = math.nan
    if not math.isfinite(megabytes) or megabytes <= 0:
        raise InputError(f"{MAX_MB_VARIABLE} must be a positive number of megabytes, got {raw!r}")
    return int(megabytes * 2 ** 20)


def prune(directory: Path, limit_bytes: int, keep: Path) -> list[Path]:
    """Remove the least recently used entries (by mtime: a hit touches its entry) until the directory's
    entries fit in `limit_bytes`; `keep` (the entry just written or read) always stays. Returns what went."""
    entries = []
    for path in directory.glob("*.entry"):
        try:
            info = path.stat()
        except OSError:  # removed meanwhile by another run
            continue
        entries.append((info.st_mtime, path, info.st_size))
    total = sum(size for _, _, size in entries)
    removed = []
    for _, path, size in sorted(entries):
        if total <= limit_bytes:
            break
        if path == keep:
            continue
        try:
            path.unlink()
        except OSError:
            continue
        total -= size
        removed.append(path)
    return removed


def read_entry(path: Path, key: CacheKey) -> tuple[Outputs, dict]:
    """The outputs and header of an entry; CorruptEntry names what does not match."""
    data = path.read_bytes()
    line, newline, payload = data.partition(b"\n")
    try:
        header = json.loads(line.decode("ascii"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise CorruptEntry("unreadable header") from None
    if not newline or not isinstance(header, dict) or header.get("format") != FORMAT:
        raise CorruptEntry(f"not a {FORMAT} entry")
    if header.get("key") != key.digest or header.get("components") != key.components:
        raise CorruptEntry("its key components differ from this run's")
    if len(payload) != header.get("payload_bytes"):
        raise CorruptEntry(f"payload is {len(payload)} bytes, the header says {header.get('payload_bytes')}")
    if hashlib.sha256(payload).hexdigest() != header.get("payload_sha256"):
        raise CorruptEntry("payload SHA-256 does not match the header")
    try:
        return outputs_from_bytes(payload), header
    except (OSError, EOFError, ValueError, KeyError, TypeError) as exc:
        raise CorruptEntry(f"payload does not decode ({type(exc).__name__})") from None


# ---------------------------------------------------------------------------------------------------------------------
# Looking up


@dataclass(frozen=True)
class CacheResult:
    outputs: Outputs
    status: str                 # hit | computed | recomputed (a bad entry was replaced) | off
    key: CacheKey | None
    path: Path | None
    seconds: float              # loading the entry (hit) or evaluating the reference
    saved_s: float | None = None  # hit: what evaluating took when the entry was made
    note: str = ""              # why an entry was recomputed or not stored

    def describe(self) -> str:
        """One line for the console and report.md."""
        if self.status == "off":
            return f"computed in {self.seconds:.1f} s (cache off)"
        key = f"key {self.key.digest[:KEY_PREVIEW]}…"
        if self.status == "hit":
            return f"cache hit ({key}; loaded in {self.seconds:.2f} s, computing took {self.saved_s:.1f} s)"
        return f"computed in {self.seconds:.1f} s ({key}; {self.note or 'stored'})"

    def to_json(self) -> dict:
        return {"status": self.status, "key": self.key.digest if self.key else None,
                "components": self.key.components if self.key else None,
                "path": str(self.path) if self.path else None, "seconds": self.seconds, "saved_s": self.saved_s,
                "note": self.note, "summary": self.describe()}


def cached_reference(key: CacheKey | None, compute: Callable[[], Outputs], cache_dir: Path | None = None,
                     kind: str = "reference") -> CacheResult:
    """The reference outputs for `key` from the cache, or `compute()`d and stored; key None: cache off.
    `kind` names the cache's folder (stage outputs use the same entries: laya_opt.runs.stagecache)."""
    if key is None:
        started = time.perf_counter()
        outputs = compute()
        return CacheResult(outputs, "off", None, None, time.perf_counter() - started)
    limit = max_cache_bytes()  # a bad limit is refused before anything is computed
    path = entry_path(Path(cache_dir) if cache_dir is not None else user_cache_dir(), key, kind)
    with entry_lock(path):
        return _lookup_or_compute(path, key, compute, limit)


@contextmanager
def entry_lock(path: Path) -> Iterator[None]:
    """An exclusive lock per entry (`<entry>.lock`, flock): concurrent runs with one key (sweep trials, Ray
    workers) wait for the first to compute and store the entry, then read it, so the reference is evaluated
    once. A lock that cannot be taken (read-only cache) costs nothing but the sharing."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path.with_suffix(".lock"), "a")
    except OSError:
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _lookup_or_compute(path: Path, key: CacheKey, compute: Callable[[], Outputs], limit: int) -> CacheResult:
    problem = ""
    if path.is_file():
        started = time.perf_counter()
        try:
            outputs, header = read_entry(path, key)
            with suppress(OSError):
                os.utime(path)  # recently used: the last entry pruning removes
            return CacheResult(outputs, "hit", key, path, time.perf_counter() - started,
                               saved_s=float(header.get("compute_s") or 0.0))
        except (CorruptEntry, OSError) as exc:
            problem = f"the cached entry was bad ({exc}) and was replaced"
    started = time.perf_counter()
    outputs = compute()
    seconds = time.perf_counter() - started
    try:
        write_entry(path, key, outputs, seconds)
    except OSError as exc:  # a full or read-only cache must not cost the run
        return CacheResult(outputs, "recomputed" if problem else "computed", key, None, seconds,
                           note=f"{problem + '; ' if problem else ''}not stored: {exc}")
    removed = prune(path.parent, limit, keep=path)
    note = problem
    if removed:
        pruned = (f"{len(removed)} least recently used entr{'y' if len(removed) == 1 else 'ies'} removed "
                  f"({MAX_MB_VARIABLE} limit)")
        note = "; ".join([problem or "stored", pruned])
    return CacheResult(outputs, "recomputed" if problem else "computed", key, path, seconds, note=note)
