"""What this machine runs laya-opt on: the MLX backend, the BLAS behind MLX's CPU matmuls, memory, packages.

Nothing here times anything. The BLAS is read from the process: the library that exports `cblas_sgemm`
in the global symbol scope is the one MLX's CPU backend binds to (the dynamic linker searches that
scope before MLX's own dependencies); with none there, MLX uses the BLAS it was shipped with, which
`/proc/self/maps` shows. `doctor` prints this, and every results manifest records it.
"""
from __future__ import annotations

import ctypes
import os
import platform
import re
import sys
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

from laya_opt.util import blas as _blas
from laya_opt.util.backend import installed_backends, package_version, several_backends

WHEEL_FIX = 'pip install "laya-opt[cpu]"'
OPENBLAS_FIX = "apt-get install -y libopenblas0-pthread"
# Optimised BLAS libraries by a word in their path; anything else named libblas/libcblas is the reference one.
OPTIMISED_BLAS = {"openblas": "OpenBLAS", "mkl": "Intel MKL", "blis": "BLIS"}
_REFERENCE_BLAS = re.compile(r"^lib(c|ref)?blas\b")
PEERS = ("laya",)  # the upstream PyTorch package; never imported here


@dataclass(frozen=True)
class BlasInfo:
    kind: str                  # openblas | mkl | blis | accelerate | reference | unknown
    name: str                  # for people: "OpenBLAS", "reference BLAS bundled with mlx", ...
    library: str | None        # the shared library's path, when one was found
    slow: bool                 # the reference BLAS: fp32 matmul over 10x slower
    evidence: str              # how it was found
    fix: str | None = None     # what to do when it is slow
    source: str | None = None  # where it came from: "wheel mkl 2026.2.1", "system", "LAYA_OPT_BLAS", ...

    def to_json(self) -> dict:
        return asdict(self)


def blas_kind(path: str) -> str:
    """openblas / mkl / blis / reference / unknown, from a library path (its folder counts: Debian's
    openblas-pthread/libblas.so.3 is OpenBLAS)."""
    lowered = path.lower()
    for word in OPTIMISED_BLAS:
        if word in lowered:
            return word
    return "reference" if _REFERENCE_BLAS.match(Path(path).name) else "unknown"


def mapped_libraries(maps_text: str) -> list[str]:
    """Shared-object paths of a /proc/<pid>/maps text, each once, in the order they appear."""
    seen: dict[str, None] = {}
    for line in maps_text.splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and ".so" in Path(parts[5]).name:
            seen.setdefault(parts[5].strip(), None)
    return list(seen)


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def global_cblas_owner() -> str | None:
    """The library that exports `cblas_sgemm` in the global symbol scope (Linux), or None."""
    if not sys.platform.startswith("linux"):
        return None
    scope = ctypes.CDLL(None)
    try:
        address = ctypes.cast(scope.cblas_sgemm, ctypes.c_void_p)
    except AttributeError:
        return None
    info = _DlInfo()
    for library in (scope, "libdl.so.2"):  # dladdr lives in libc since glibc 2.34, in libdl before
        try:
            dladdr = (library if isinstance(library, ctypes.CDLL) else ctypes.CDLL(library)).dladdr
        except (AttributeError, OSError):
            continue
        if dladdr(address, ctypes.byref(info)) and info.dli_fname:
            return os.fsdecode(info.dli_fname)
    return None


def _reference_fix(preload: _blas.Preload | None, machine: str | None = None) -> str:
    machine = platform.machine() if machine is None else machine
    if preload is not None and preload.skipped == "LAYA_OPT_NO_BLAS_PRELOAD is set":
        return "unset LAYA_OPT_NO_BLAS_PRELOAD (it turns the BLAS preload off)"
    if preload is not None and preload.skipped == "mlx.core was imported before laya_opt":
        return "import laya_opt before mlx.core (a fast BLAS must be loaded first)"
    if preload is not None and preload.failures:
        candidate, error = preload.failures[0]
        return f"{candidate.path} ({candidate.source}) did not load: {error}"
    if machine in ("x86_64", "AMD64"):
        return f"{WHEEL_FIX} (it installs MKL's wheel); laya_opt then loads it before mlx.core"
    return f"{OPENBLAS_FIX} (no BLAS wheel for {machine}; or LAYA_OPT_BLAS=/path/to/libopenblas.so.0)"


def _source(owner: str, preload: _blas.Preload | None) -> str | None:
    loaded = preload.loaded if preload is not None else None
    if loaded is not None and os.path.realpath(loaded.path) == os.path.realpath(owner):
        return loaded.source
    return None


def classify_blas(maps_text: str, cblas_owner: str | None, preload: _blas.Preload | None = None,
                  system: str = sys.platform, machine: str | None = None) -> BlasInfo:
    """The BLAS behind MLX's CPU matmuls, from the mapped libraries and the global `cblas_sgemm` owner, and
    where it came from (`preload`: what laya_opt loaded, and what failed to load).

    Pure: `doctor` and the tests hand in the process's own maps text and symbol owner, or simulated ones.
    """
    if system == "darwin":
        return BlasInfo("accelerate", "Apple Accelerate", None, False, "macOS: mlx links the Accelerate framework",
                        source="macOS")
    if cblas_owner:
        kind = blas_kind(cblas_owner)
        source = _source(cblas_owner, preload)
        how = f"cblas_sgemm resolves to {cblas_owner}" + (f" (preloaded by laya_opt: {source})" if source else "")
        if kind in OPTIMISED_BLAS:
            return BlasInfo(kind, OPTIMISED_BLAS[kind], cblas_owner, False, how, source=source)
        slow = kind == "reference"
        return BlasInfo(kind, "reference BLAS" if slow else "unrecognised BLAS", cblas_owner, slow, how,
                        _reference_fix(preload, machine) if slow else None, source)
    bundled = [path for path in mapped_libraries(maps_text)
               if blas_kind(path) == "reference" and "mlx" in path.lower()]
    if bundled:
        return BlasInfo("reference", "reference BLAS bundled with mlx", bundled[0], True,
                        "no cblas_sgemm in the global scope; mlx's own BLAS is mapped",
                        _reference_fix(preload, machine), "mlx's wheel")
    return BlasInfo("unknown", "unknown", None, False, "no BLAS library found among the mapped libraries")


def detect_blas() -> BlasInfo:
    """This process's BLAS (import laya_opt, and with it mlx.core, first)."""
    maps = Path("/proc/self/maps")
    text = maps.read_text(encoding="utf-8", errors="replace") if maps.exists() else ""
    return classify_blas(text, global_cblas_owner(), _blas.PRELOAD)


def mlx_backend() -> str:
    """cuda, metal or cpu: the backend of MLX's default device (cpu when there is no GPU backend or the
    default device was set to the CPU)."""
    import mlx.core as mx

    if mx.default_device().type == mx.DeviceType.cpu:
        return "cpu"
    for name in ("cuda", "metal"):
        module = getattr(mx, name, None)
        try:
            if module is not None and module.is_available():
                return name
        except (AttributeError, RuntimeError):
            continue
    return "cpu"


def system_memory(meminfo_text: str | None = None) -> dict:
    """Total and available RAM in bytes (Linux /proc/meminfo, else sysconf); None where unknown."""
    if meminfo_text is None and Path("/proc/meminfo").exists():
        meminfo_text = Path("/proc/meminfo").read_text(encoding="utf-8")
    values = {}
    for line in (meminfo_text or "").splitlines():
        key, _, rest = line.partition(":")
        if key in ("MemTotal", "MemAvailable") and rest.split():
            values[key] = int(rest.split()[0]) * 1024  # kB
    total = values.get("MemTotal")
    if total is None and hasattr(os, "sysconf"):
        try:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):
            total = None
    return {"total_bytes": total, "available_bytes": values.get("MemAvailable")}


_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def declared_packages(distribution: str = "laya-opt") -> dict[str, dict[str, str | None]]:
    """Group ("required" or the extra's name) -> package -> installed version or None, from the metadata."""
    groups: dict[str, dict[str, str | None]] = {}
    try:
        requirements = metadata.requires(distribution) or []
    except metadata.PackageNotFoundError:
        return groups
    for requirement in requirements:
        name = _NAME.match(requirement)
        if name is None:
            continue
        extra = _EXTRA.search(requirement)
        groups.setdefault(extra.group(1) if extra else "required", {})[name.group(1)] = package_version(name.group(1))
    return groups


def device_facts() -> dict:
    """MLX version, backend, default device and what MLX says about it (memory size on a GPU)."""
    import mlx.core as mx

    info_fn = getattr(mx, "device_info", None) or getattr(getattr(mx, "metal", None), "device_info", None)
    info = {}
    if info_fn is not None:
        try:
            info = {key: value if isinstance(value, (int, float, str, bool)) else str(value)
                    for key, value in info_fn().items()}
        except RuntimeError as exc:  # e.g. metal.device_info on a machine without Metal
            info = {"error": str(exc)}
    return {"mlx": package_version("mlx"), "backend": mlx_backend(), "device": str(mx.default_device()),
            "device_info": info}


SWITCH_PREFIXES = ("MLX_", "LAYA_")


def environment_switches(prefixes: tuple[str, ...] = SWITCH_PREFIXES) -> dict[str, str]:
    """The environment variables in effect that start with `prefixes`, sorted: MLX reads its tuning and cache
    variables once per process (CUDA graphs, cuDNN attention, their cache sizes), and they change timings, kernels
    and whether a long evaluation runs at all."""
    return {name: value for name, value in sorted(os.environ.items()) if name.startswith(prefixes)}


def doctor_report() -> dict:
    """Everything `laya-opt doctor` prints, plus the list of problems found."""
    blas = detect_blas()
    facts = device_facts()
    packages = declared_packages()
    peers = {name: package_version(name) for name in PEERS}
    backends = installed_backends()
    problems = []
    if blas.slow and facts["backend"] == "cpu":
        problems.append(f"MLX's CPU matmuls use the {blas.name} ({blas.library}): fp32 matmul is over 10x slower. "
                        f"Fix: {blas.fix}")
    if several_backends(backends):
        problems.append(several_backends(backends))
    missing = [name for name, version in packages.get("required", {}).items() if version is None]
    if missing:
        problems.append(f"required package(s) not installed: {', '.join(missing)}")
    return {"laya-opt": package_version("laya-opt"), "python": sys.version.split()[0],
            "platform": platform.platform(), **facts, "mlx_backends": backends, "blas": blas.to_json(),
            "blas_preload": preload_json(_blas.PRELOAD), "memory": system_memory(), "packages": packages,
            "peers": peers, "switches": environment_switches(), "problems": problems}


def preload_json(preload: _blas.Preload) -> dict:
    """What laya_opt's BLAS preload loaded, from where, and what it tried that did not load."""
    loaded = preload.loaded
    return {"loaded": loaded.path if loaded else None, "source": loaded.source if loaded else None,
            "skipped": preload.skipped,
            "failures": [{"path": c.path, "source": c.source, "error": error} for c, error in preload.failures]}
