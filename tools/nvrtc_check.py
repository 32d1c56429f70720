"""Compile every laya_opt.core.fused CUDA kernel with NVRTC, exactly as MLX's CUDA backend would, without a GPU.

For each op, dtype and a representative launch it assembles the full source the way MLX 0.32's
`build_kernel` (mlx/backend/cuda/custom_kernel.cpp) does: MLX's default header, our header, the
generated `__global__` signature (inputs, `name_shape`/`_strides`/`_ndim` when the body mentions them,
outputs), the template constants, the body. It then compiles it like jit_module.cpp: MLX's device
headers registered in memory under their include names, `--device-as-default-execution-space`,
`--gpu-architecture=sm_90a` (H200) and include paths to MLX's bundled headers, its CCCL and the CUDA
runtime headers. ptxas's resource line (registers, spills) is printed too.

What it needs, found automatically or given by flag or environment variable:
- an MLX CUDA root (`--mlx-root`, LAYA_MLX_CUDA_ROOT): a folder with lib/libmlx.so (MLX's device headers
  are embedded there as strings) and include/{cccl,cute,cutlass}: the `mlx` folder of an mlx-cuda wheel;
- a CUDA root (`--cuda-root`, LAYA_CUDA_ROOT): a folder with include/cuda_fp16.h and lib/libnvrtc.so*.
Set-up on a machine without CUDA (CUDA 13, as the mlx-cuda-13 wheel):
    pip download --no-deps -d /tmp/laya_nvrtc/wheels 'nvidia-cuda-nvrtc==13.*' 'nvidia-cuda-runtime==13.*'
    for w in /tmp/laya_nvrtc/wheels/nvidia_*.whl; do unzip -q -o "$w" -d /tmp/laya_nvrtc; done
    unzip -q -o mlx_cuda_13-*.whl 'mlx/include/*' 'mlx/lib/libmlx.so' -d /tmp/laya_nvrtc
When something is missing it prints why and exits 0 (status "skipped"), so CI without CUDA passes.

Usage: python tools/nvrtc_check.py [--quick] [--op OP] [--dtype float16] [--show-source]
Exit status: 0 when every kernel compiled without warnings (or the check was skipped), 1 otherwise.
"""
from __future__ import annotations

import argparse
import ctypes
import glob
import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import laya_opt  # noqa: E402,F401  (before mlx.core: preloads OpenBLAS)
import mlx.core as mx  # noqa: E402

from laya_opt.core import fused  # noqa: E402

ARCH = "sm_90a"
# custom_kernel.cpp's default_header, verbatim.
DEFAULT_HEADER = '\n#include "mlx/backend/cuda/device/utils.cuh"\n\n#include <cooperative_groups.h>\n\n'
CUDA_TYPE = {mx.float16: "__half", mx.bfloat16: "__nv_bfloat16", mx.float32: "float", mx.int32: "int32_t"}
TYPE_STRING = {mx.float16: "float16_t", mx.bfloat16: "bfloat16_t", mx.float32: "float", mx.int32: "int32_t"}
# Fingerprints of the embedded device headers our kernels reach (utils.cuh and what it includes), and
# a few more that MLX also registers; each must match exactly one string in libmlx.so.
FINGERPRINTS = {
    "utils.cuh": "This file must not include any host-only code",
    "config.h": "#define MAX_NDIM",
    "complex.cuh": "LIBCUDACXX_ENABLE_SIMPLIFIED_COMPLEX_OPERATIONS",
    "fp16_math.cuh": "#include <cuda_fp16.h>\n#include <cuda/std/type_traits>",
    "cast_op.cuh": "struct CastOp",
}
NEEDED = ("utils.cuh", "config.h", "complex.cuh")
INCLUDE_PREFIX = "mlx/backend/cuda/device/"
KNOWN_ROOTS = ("/tmp/laya_nvrtc", "/usr/local/cuda")

# ----------------------------------------------------------------------------- source assembly (build_kernel)


def template_hash(template) -> str:
    parts = []
    for _, value in template:
        if isinstance(value, bool):
            parts.append("_t" if value else "_f")
        elif isinstance(value, int):
            parts.append(f"_{value}")
        else:
            parts.append("_" + TYPE_STRING[value])
    return "".join(parts)


def shape_infos(body: str, input_names) -> list[tuple[bool, bool, bool]]:
    """custom_kernel.cpp: a plain substring search for name_shape, name_strides, name_ndim in the body."""
    return [(f"{n}_shape" in body, f"{n}_strides" in body, f"{n}_ndim" in body) for n in input_names]


def build_kernel(op: str, template, input_dtypes, output_dtypes) -> tuple[str, str]:
    """(full source, kernel name expression) as MLX generates them for a launch of `op`."""
    input_names, output_names, body, header = fused.KERNELS[op]
    func = f"custom_kernel_laya_{op}{template_hash(template)}"
    lines = [DEFAULT_HEADER, header, "namespace mlx::core::cu {\n\nnamespace cg = cooperative_groups;\n\n",
             f"__global__ void {func}(\n"]
    for name, dtype, (shape, strides, ndim) in zip(input_names, input_dtypes, shape_infos(body, input_names)):
        lines.append(f"    const {CUDA_TYPE[dtype]}* {name},\n")  # every input here has ndim > 0
        if shape:
            lines.append(f"    const __grid_constant__ Shape {name}_shape,\n")
        if strides:
            lines.append(f"    const __grid_constant__ Strides {name}_strides,\n")
        if ndim:
            lines.append(f"    const __grid_constant__ int {name}_ndim,\n")
    for i, (name, dtype) in enumerate(zip(output_names, output_dtypes)):
        lines.append(f"    {CUDA_TYPE[dtype]}* {name}" + (",\n" if i < len(output_names) - 1 else ") {\n"))
    for name, value in template:
        if isinstance(value, bool):
            lines.append(f"  constexpr bool {name} = {'true' if value else 'false'};\n")
        elif isinstance(value, int):
            lines.append(f"  constexpr int {name} = {value};\n")
        else:
            lines.append(f"  using {name} = {CUDA_TYPE[value]};\n")
    if template:
        lines.append("\n")
    lines += [body, "\n}\n\n} // namespace mlx::core::cu\n"]
    return "".join(lines), f"mlx::core::cu::{func}"


@dataclass(frozen=True)
class Case:
    op: str
    dtype: mx.Dtype
    label: str
    template: tuple
    input_dtypes: tuple
    output_dtypes: tuple


def cases(quick: bool = False) -> list[Case]:
    """Representative launches: every distinct template instance the real models and the stand-ins use,
    plus edge block shapes (quick: one per op and dtype)."""
    out = []
    for dtype in fused.FLOAT_DTYPES:
        # D is a runtime value: these differ in block shape (32 to 1024 threads, 1 or 2 chunks per thread).
        for dim in (1024,) if quick else (1024, 64, 4096, 16384):
            t, _, _ = fused.norm_launch(96, dim, dtype, 1e-5)
            out.append(Case("add_layer_norm", dtype, f"D={dim}", tuple(t), (dtype,) * 4 + (mx.int32,), (dtype,) * 2))
            out.append(Case("layer_norm", dtype, f"D={dim}", tuple(t), (dtype,) * 3 + (mx.int32,), (dtype,)))
        rope_variants = [(16, 64), (1, 64), (2, 32)]  # heads per thread 4, 1, 2
        for heads, hd in rope_variants[:1] if quick else rope_variants:
            t, _, _ = fused.rope_launch(96, heads, hd, dtype)
            out.append(Case("qkv_rope", dtype, f"H={heads} hd={hd}", tuple(t), (dtype, mx.float32), (dtype,) * 3))
        for inner in (2624,) if quick else (2624, 1152, 7):  # VEC 8 (4 in float32) and 1
            t, _, _ = fused.geglu_launch(96, inner, dtype)
            out.append(Case("geglu", dtype, f"I={inner}", tuple(t), (dtype,), (dtype,)))
        if dtype == mx.float32:
            continue  # no float32 tensor-core GEMM: linear falls back
        for rows in (96,) if quick else (96, 512):  # 32- and 64-row tiles
            t, _, _ = fused.linear_launch(rows, 1024, dtype)
            out.append(Case("linear", dtype, f"M={rows}", tuple(t), (dtype,) * 4 + (mx.int32,), (dtype,)))
    unique = {}
    for case in out:  # widths with the same block shape share one compiled kernel
        unique.setdefault((case.op, case.template), case)
    return list(unique.values())


# ----------------------------------------------------------------------------- toolchain discovery


@dataclass(frozen=True)
class Toolchain:
    nvrtc: Path
    cuda_include: Path
    mlx_include: Path
    version: tuple[int, int]
    headers: dict = field(repr=False)  # include name -> source text (MLX's embedded device headers)


def _lib_dirs(root: Path):
    return [root / "lib", root / "lib64", root / "targets" / "x86_64-linux" / "lib"]


def _cuda_roots(arg: str | None):
    if arg or os.environ.get("LAYA_CUDA_ROOT"):
        yield Path(arg or os.environ["LAYA_CUDA_ROOT"])
        return
    for entry in sys.path:
        yield Path(entry) / "nvidia" / "cu13"  # CUDA 13 pip wheels share one folder
    for root in KNOWN_ROOTS:
        yield Path(root) / "nvidia" / "cu13"
        yield Path(root)
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            yield Path(os.environ[var])


def _mlx_roots(arg: str | None):
    if arg or os.environ.get("LAYA_MLX_CUDA_ROOT"):
        yield Path(arg or os.environ["LAYA_MLX_CUDA_ROOT"])
        return
    yield Path(mx.__file__).resolve().parent  # the installed mlx package (site-packages/mlx), if a CUDA build
    for root in KNOWN_ROOTS:
        yield Path(root) / "mlx"
    yield Path("/tmp/mlxw/mlx")


def embedded_headers(data: bytes) -> dict[str, str]:
    """MLX's device headers, stored in libmlx.so as NUL-terminated strings, identified by fingerprint."""
    texts = []
    for match in re.finditer(rb"// Copyright", data):
        start = match.start()
        if start and data[start - 1] != 0:
            continue
        texts.append(data[start:data.index(b"\0", start)].decode("utf-8", "replace"))
    found = {}
    for name, mark in FINGERPRINTS.items():
        hits = {t for t in texts if mark in t}
        if len(hits) == 1:
            found[INCLUDE_PREFIX + name] = hits.pop()
    return found


def find_toolchain(cuda_root: str | None = None, mlx_root: str | None = None) -> Toolchain | str:
    """The toolchain, or a one-line reason why the check cannot run here."""
    nvrtc = include = None
    for root in _cuda_roots(cuda_root):
        libs = [p for d in _lib_dirs(root) for p in sorted(glob.glob(str(d / "libnvrtc.so*")))]
        if libs and (root / "include" / "cuda_fp16.h").exists():
            nvrtc, include = Path(libs[0]), root / "include"
            break
    if nvrtc is None:
        return "NVRTC and CUDA headers not found (pass --cuda-root or set LAYA_CUDA_ROOT; see the docstring)"
    for root in _mlx_roots(mlx_root):
        libmlx = root / "lib" / "libmlx.so"
        if libmlx.exists() and (root / "include" / "cccl").is_dir():
            data = libmlx.read_bytes()
            headers = embedded_headers(data)
            missing = [n for n in NEEDED if INCLUDE_PREFIX + n not in headers]
            if missing:
                return f"{libmlx} lacks MLX's device headers {missing} (not a CUDA build of MLX?)"
            if DEFAULT_HEADER.encode() not in data:
                return f"{libmlx}: MLX's default kernel header differs from the one this tool replicates"
            break
    else:
        return "no MLX CUDA root with lib/libmlx.so and include/cccl (pass --mlx-root or set LAYA_MLX_CUDA_ROOT)"
    for builtins in sorted(nvrtc.parent.glob("libnvrtc-builtins.so*")):
        ctypes.CDLL(str(builtins), mode=ctypes.RTLD_GLOBAL)  # NVRTC dlopens it by name
    lib = ctypes.CDLL(str(nvrtc))
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return Toolchain(nvrtc, include, root / "include", (major.value, minor.value), headers)


# ----------------------------------------------------------------------------- compile


@dataclass
class Result:
    case: Case
    ok: bool
    log: str
    seconds: float
    resources: str = ""


def compile_source(tc: Toolchain, source: str, kernel: str) -> tuple[bool, str]:
    """Compile as jit_module.cpp's compile() does; return (success, NVRTC log)."""
    lib = ctypes.CDLL(str(tc.nvrtc))
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    prog = ctypes.c_void_p()
    names = list(tc.headers)
    heads = (ctypes.c_char_p * len(names))(*[tc.headers[n].encode() for n in names])
    incl = (ctypes.c_char_p * len(names))(*[n.encode() for n in names])
    err = lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"laya_fused.cu", len(names), heads, incl)
    if err:
        return False, f"nvrtcCreateProgram: {lib.nvrtcGetErrorString(err).decode()}"
    try:
        lib.nvrtcAddNameExpression(prog, kernel.encode())
        opts = ["--device-as-default-execution-space", f"--gpu-architecture={ARCH}",
                f"--include-path={tc.mlx_include}", f"--include-path={tc.mlx_include / 'cccl'}",
                f"--include-path={tc.cuda_include}", "--ptxas-options=-v"]  # -v only adds the resource line
        arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
        err = lib.nvrtcCompileProgram(prog, len(opts), arr)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value + 1)
        lib.nvrtcGetProgramLog(prog, buf)
        log = buf.value.decode("utf-8", "replace")
        if err:
            return False, f"{lib.nvrtcGetErrorString(err).decode()}\n{log}"
        lowered = ctypes.c_char_p()
        if lib.nvrtcGetLoweredName(prog, kernel.encode(), ctypes.byref(lowered)):
            return False, f"kernel {kernel} not found in the compiled program\n{log}"
        cubin = ctypes.c_size_t()
        if lib.nvrtcGetCUBINSize(prog, ctypes.byref(cubin)) or cubin.value == 0:
            return False, f"no cubin produced\n{log}"
        return True, log
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def _problems(log: str) -> str:
    """Warnings in the log, minus ptxas's informational lines."""
    return "\n".join(line for line in log.splitlines()
                     if line.strip() and not line.startswith("ptxas info") and "bytes stack frame" not in line)


def _resources(log: str) -> str:
    regs = re.findall(r"Used (\d+) registers", log)
    spill = re.findall(r"(\d+) bytes spill stores", log)
    smem = re.findall(r"(\d+) bytes smem", log)
    return f"regs={regs[-1] if regs else '?'} spill={spill[-1] if spill else '?'} smem={smem[-1] if smem else '0'}"


def check(case: Case, tc: Toolchain) -> Result:
    source, kernel = build_kernel(case.op, list(case.template), case.input_dtypes, case.output_dtypes)
    start = time.perf_counter()
    ok, log = compile_source(tc, source, kernel)
    result = Result(case, ok, log, time.perf_counter() - start)
    result.resources = _resources(log)
    if ok and _problems(log):  # a clean compile means no warnings either
        result.ok, result.log = False, "warnings:\n" + _problems(log)
    return result


def run(tc: Toolchain, selected: list[Case], workers: int = 2) -> list[Result]:
    with ThreadPoolExecutor(max_workers=workers) as pool:  # ctypes drops the GIL while NVRTC compiles
        return list(pool.map(lambda c: check(c, tc), selected))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuda-root")
    parser.add_argument("--mlx-root")
    parser.add_argument("--op", choices=list(fused.KERNELS))
    parser.add_argument("--dtype", choices=["float16", "bfloat16", "float32"])
    parser.add_argument("--quick", action="store_true", help="one launch per op and dtype")
    parser.add_argument("--show-source", action="store_true", help="print the first selected case's source")
    parser.add_argument("--workers", type=int, default=max(1, min(4, os.cpu_count() or 1)))
    args = parser.parse_args(argv)
    tc = find_toolchain(args.cuda_root, args.mlx_root)
    if isinstance(tc, str):
        print(f"nvrtc_check: skipped: {tc}")
        return 0
    print(f"NVRTC {tc.version[0]}.{tc.version[1]} ({tc.nvrtc}), arch {ARCH}\n"
          f"  CUDA headers {tc.cuda_include}\n  MLX headers {tc.mlx_include} + {len(tc.headers)} embedded")
    selected = [c for c in cases(args.quick) if (args.op in (None, c.op))
                and (args.dtype is None or c.dtype == getattr(mx, args.dtype))]
    if args.show_source and selected:
        print(build_kernel(selected[0].op, list(selected[0].template), selected[0].input_dtypes,
                           selected[0].output_dtypes)[0])
    results = run(tc, selected, args.workers)
    for r in results:
        dtype = str(r.case.dtype).split(".")[-1]
        print(f"{'OK  ' if r.ok else 'FAIL'} {r.case.op:15s} {dtype:9s} {r.case.label:28s} "
              f"{r.resources:28s} {r.seconds:5.2f}s")
        if not r.ok:
            print("    " + r.log.strip().replace("\n", "\n    "))
    failed = sum(not r.ok for r in results)
    print(f"{len(results) - failed}/{len(results)} kernels compiled cleanly")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
