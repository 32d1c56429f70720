"""Weight-only group quantization: schemes, module selection by path, group-width checks and the coverage
manifest (spec §12.5, §13.1-13.3). The quantized checkpoint format lives in `checkpoint.py`.

Selection is by module path, never by substring: `"layers." in path` also matches `head.layers.*`,
`scorer.layers.*` and `act_head.layers.*` (§13.3). The action head is never quantized: its first
Linear has input width D+4, which no group size divides, and its dtype contract is explicit FP32.
"""
from __future__ import annotations

import fnmatch
import functools
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any, Mapping

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten


# mode -> (allowed group sizes, allowed bits), as mx.quantize documents them.
SCHEMES = {
    "affine": ((32, 64, 128), (2, 3, 4, 5, 6, 8)),
    "mxfp4": ((32,), (4,)),
    "mxfp8": ((32,), (8,)),
    "nvfp4": ((16,), (4,)),
}
DEFAULT_INCLUDE = ("encoder.layers.*",)
ACTION_HEAD_PREFIX = "act_head."
HEAD_PREFIXES = ("head.", "scorer.")  # what the port's `quantize_heads` switch refers to
ACTION_HEAD_REASON = "action head: explicit fp32 contract"
NOT_SELECTED_REASON = "not selected"
DENSE_TYPES = (nn.Linear, nn.Embedding)
QUANTIZED_TYPES = (nn.QuantizedLinear, nn.QuantizedEmbedding)


@dataclass(frozen=True)
class QuantScheme:
    bits: int
    group_size: int
    mode: str = "affine"

    def __post_init__(self):
        check_scheme(self.bits, self.group_size, self.mode)

    def as_dict(self) -> dict:
        return {"bits": self.bits, "group_size": self.group_size, "mode": self.mode}

    @property
    def label(self) -> str:
        return f"{self.mode} {self.bits}-bit g{self.group_size}"


def check_scheme(bits: Any, group_size: Any, mode: Any, where: str = "quantization") -> None:
    if mode not in SCHEMES:
        raise ValueError(f"{where}: mode {mode!r} is not one of {', '.join(SCHEMES)}")
    groups, widths = SCHEMES[mode]
    if isinstance(bits, bool) or bits not in widths:
        raise ValueError(f"{where}: bits {bits!r} is not supported by mode {mode!r}; choose one of {list(widths)}")
    if isinstance(group_size, bool) or group_size not in groups:
        raise ValueError(f"{where}: group_size {group_size!r} is not supported by mode {mode!r}; "
                         f"choose one of {list(groups)}")


@functools.lru_cache(maxsize=None)
def _probe(scheme: QuantScheme, device: str) -> str | None:
    # A tiny quantize + quantized_matmul on the default device; older MLX lacks `mode` or the fp formats.
    try:
        weight = mx.ones((8, 4 * scheme.group_size))
        packed, scales, *biases = mx.quantize(weight, scheme.group_size, scheme.bits, mode=scheme.mode)
        out = mx.quantized_matmul(mx.ones((1, weight.shape[1])), packed, scales=scales,
                                  biases=biases[0] if biases else None, transpose=True,
                                  group_size=scheme.group_size, bits=scheme.bits, mode=scheme.mode)
        mx.eval(out)
    except Exception as exc:  # the message of MLX itself says what is missing
        return f"{type(exc).__name__}: {exc}"
    return None


def check_mode_supported(scheme: QuantScheme) -> None:
    """Refuse a scheme the installed MLX cannot run on the default device, naming mode, device and version."""
    device = str(mx.default_device())
    problem = _probe(scheme, device)
    if problem:
        raise ValueError(f"quantization mode {scheme.mode!r} ({scheme.bits}-bit, group_size {scheme.group_size}) "
                         f"is not supported by MLX {mx.__version__} on {device}: {problem}")


# ----------------------------------------------------------------------------- modules and selection


def _module_order(model: nn.Module) -> dict[str, int]:
    # Parameter insertion order (encoder first), so manifests read top to bottom like the model.
    order: dict[str, int] = {}
    for name, _ in tree_flatten(model.parameters()):
        order.setdefault(name.rsplit(".", 1)[0], len(order))
    return order


def weight_modules(model: nn.Module) -> dict[str, nn.Module]:
    """Every Linear and Embedding, dense or quantized, by path, in model order."""
    order = _module_order(model)
    found = {path: module for path, module in model.named_modules()
             if isinstance(module, DENSE_TYPES + QUANTIZED_TYPES)}
    return dict(sorted(found.items(), key=lambda item: order.get(item[0], len(order))))


def dense_modules(model: nn.Module) -> dict[str, nn.Module]:
    return {path: module for path, module in weight_modules(model).items() if isinstance(module, DENSE_TYPES)}


def selector_matches(path: str, selector: str) -> bool:
    """A glob (`*`, `?`, `[`) matches the whole path; a plain selector is a path prefix ending at a dot."""
    if any(char in selector for char in "*?["):
        return fnmatch.fnmatchcase(path, selector)
    return path == selector or path.startswith(selector + ".")


def check_selectors(selectors: Any, field_name: str) -> None:
    for selector in selectors:
        if not isinstance(selector, str) or not selector.strip() or selector != selector.strip():
            raise ValueError(f"{field_name}: selector {selector!r} must be a non-empty module path or glob "
                             "without surrounding spaces")


@dataclass(frozen=True)
class Selection:
    selected: dict[str, str]   # path -> the include selector that chose it
    kept: dict[str, str]       # path -> why it stays dense


def select_modules(model: nn.Module, include: tuple[str, ...] = DEFAULT_INCLUDE,
                   exclude: tuple[str, ...] = ()) -> Selection:
    """Dense Linears/Embeddings chosen by `include` minus `exclude`; a selector matching nothing is an error."""
    candidates = dense_modules(model)
    unmatched = [f"{kind} {selector!r}" for kind, selectors in (("include", include), ("exclude", exclude))
                 for selector in selectors if not any(selector_matches(path, selector) for path in candidates)]
    if unmatched:
        raise ValueError(f"quantization selector(s) match no dense Linear or Embedding: {', '.join(unmatched)}; "
                         f"module paths look like {', '.join(list(candidates)[:3])}")
    selected, kept = {}, {}
    for path in candidates:
        chosen = next((selector for selector in include if selector_matches(path, selector)), None)
        excluded = next((selector for selector in exclude if selector_matches(path, selector)), None)
        if chosen and not excluded:
            selected[path] = chosen
        elif excluded and chosen:
            kept[path] = f"excluded by {excluded!r}"
        else:
            kept[path] = ACTION_HEAD_REASON if path.startswith(ACTION_HEAD_PREFIX) else NOT_SELECTED_REASON
    return Selection(selected=selected, kept=kept)


def input_width(module: nn.Module) -> int:
    """Dense input width (Linear in_features, Embedding dims) of a dense or packed module."""
    if isinstance(module, QUANTIZED_TYPES):
        return module.weight.shape[1] * 32 // module.bits
    return module.weight.shape[1]


def quantization_problems(modules: Mapping[str, nn.Module], scheme: QuantScheme,
                          origin: Mapping[str, str]) -> list[str]:
    """Why each selected module cannot be quantized (group width, action-head contract); empty when all fit."""
    problems = []
    for path, module in modules.items():
        width = input_width(module)
        if width % scheme.group_size:
            problems.append(f"{path}: input width {width} is not divisible by group_size {scheme.group_size} "
                            f"(selected by {origin[path]!r})")
        elif path.startswith(ACTION_HEAD_PREFIX):
            problems.append(f"{path}: the action head stays dense (explicit fp32 contract, spec §13.2) "
                            f"(selected by {origin[path]!r})")
    return problems


def quantize_modules(model: nn.Module, schemes: Mapping[str, QuantScheme]) -> None:
    """Replace the listed dense modules of `model` in place with QuantizedLinear/QuantizedEmbedding."""
    nn.quantize(model, class_predicate=lambda path, module: schemes[path].as_dict() if path in schemes else False)


# ----------------------------------------------------------------------------- coverage manifest


@dataclass(frozen=True)
class CoverageRow:
    path: str
    kind: str                  # "Linear" | "Embedding"
    shape: tuple[int, int]     # dense (out, in) or (rows, dims)
    status: str                # "quantized" | "kept"
    detail: str                # scheme label, or why it was kept
    bits: int | None
    group_size: int | None
    mode: str | None
    bytes_before: int
    bytes_after: int


@dataclass(frozen=True)
class CoverageManifest:
    rows: tuple[CoverageRow, ...]
    dense_dtype: str
    weight_bytes_before: int
    weight_bytes_after: int
    model_bytes_before: int     # every parameter, norms and biases included
    model_bytes_after: int
    bits_per_weight_before: float
    bits_per_weight_after: float  # effective: packed weights + scales + biases over Linear/Embedding weights
    quantized_weight_fraction: float

    def to_dict(self) -> dict:
        data = asdict(self)
        data["rows"] = [dict(row, shape=list(row["shape"])) for row in data["rows"]]
        return data

    def table(self) -> dict:
        """One row per module, as the generic report table of a pass report."""
        return {"title": "Quantization coverage", "columns": ["module", "kind", "shape", "status", "scheme / reason",
                                                             "bytes before", "bytes after"],
                "rows": [[row.path, row.kind, f"{row.shape[0]}x{row.shape[1]}", row.status, row.detail,
                          f"{row.bytes_before:,}", f"{row.bytes_after:,}"] for row in self.rows]}


def _row(path: str, module: nn.Module, itemsize: int, kept_reason: str) -> CoverageRow:
    kind = "Embedding" if isinstance(module, (nn.Embedding, nn.QuantizedEmbedding)) else "Linear"
    shape = (module.weight.shape[0], input_width(module))
    before = shape[0] * shape[1] * itemsize
    if isinstance(module, QUANTIZED_TYPES):
        stored = [module["weight"], module["scales"]] + ([module["biases"]] if "biases" in module else [])
        return CoverageRow(path, kind, shape, "quantized", f"{module.mode} {module.bits}-bit g{module.group_size}",
                           module.bits, module.group_size, module.mode, before, sum(a.nbytes for a in stored))
    return CoverageRow(path, kind, shape, "kept", kept_reason, None, None, None, module.weight.nbytes,
                       module.weight.nbytes)


def coverage_manifest(model: nn.Module, dense_dtype: mx.Dtype, kept_reasons: Mapping[str, str] | None = None
                      ) -> CoverageManifest:
    """Per Linear/Embedding: quantized (mode/bits/group) or kept (reason); bytes before at `dense_dtype`."""
    kept_reasons = kept_reasons or {}
    itemsize = mx.zeros((1,), dtype=dense_dtype).itemsize
    rows = tuple(_row(path, module, itemsize, kept_reasons.get(path) or (
        ACTION_HEAD_REASON if path.startswith(ACTION_HEAD_PREFIX) else NOT_SELECTED_REASON))
        for path, module in weight_modules(model).items())
    before, after = sum(r.bytes_before for r in rows), sum(r.bytes_after for r in rows)
    elements = sum(r.shape[0] * r.shape[1] for r in rows)
    quantized = sum(r.shape[0] * r.shape[1] for r in rows if r.status == "quantized")
    model_after = sum(value.nbytes for _, value in tree_flatten(model.parameters()))
    return CoverageManifest(rows=rows, dense_dtype=str(dense_dtype).removeprefix('mlx.core.'),
                            weight_bytes_before=before, weight_bytes_after=after,
                            model_bytes_before=model_after - after + before,
                            model_bytes_after=model_after, bits_per_weight_before=8 * before / elements,
                            bits_per_weight_after=8 * after / elements,
                            quantized_weight_fraction=quantized / elements)


def coverage_summary(manifest: CoverageManifest) -> str:
    """One line: how much was quantized, bytes and effective bits per weight, why the rest was kept."""
    quantized = [row for row in manifest.rows if row.status == "quantized"]
    schemes = sorted({row.detail for row in quantized})
    reasons = Counter(row.detail for row in manifest.rows if row.status == "kept")
    kept = "; ".join(f"{count} kept: {reason}" for reason, count in reasons.items())
    return (f"{len(quantized)} of {len(manifest.rows)} modules quantized ({', '.join(schemes) or 'none'}); "
            f"weights {manifest.weight_bytes_before:,} -> {manifest.weight_bytes_after:,} B, "
            f"{manifest.bits_per_weight_before:.3f} -> {manifest.bits_per_weight_after:.3f} bits/weight "
            f"({manifest.dense_dtype} dense), {manifest.quantized_weight_fraction:.1%} of weights quantized"
            + (f"; {kept}" if kept else ""))
