"""The pass contract, and `apply_pass`, which owns the bookkeeping every pass used to repeat.

A pass is a module in `passes/` exposing `PASS = PassSpec(...)`: a frozen config dataclass, an
`apply(runtime, config, data) -> (runtime, report)` that never mutates its input, whether it is
exact, the runtime parts it replaces and captures, and the data it needs. `apply_pass` runs it and
refuses a result that mutated the input, changed a part the pass did not declare, or touched the
fields the pipeline owns (identity, applied, info, kernel_owners); it then appends the pass to
`identity` and `applied`, records the kernel fields it installed and files the report under `info[name]`.

Ordering derives from `replaces`/`captures`: a pass that captures a part (compile captures model +
kernels) must come after every pass that replaces one of those parts.

Kernels are named parts: a pass that replaces `kernels` names the `Kernels` fields it installs
(`kernels=frozenset({"self_attention"})`). The runtime records which pass owns each field
(`Runtime.kernel_owners`). Taking over a field another pass installed is allowed only for the passes
listed in `supersedes`; otherwise `check_order` refuses the plan and `apply_pass` the runtime, naming
both passes and the field. docs/kernels.md explains the seam.

Data: `needs` maps a config field to the kind of data it names (today only "requests": a suite or
workload whose (state, questions) pairs the pass reads, e.g. to plan shape buckets). Whoever runs
the pass resolves the name and hands the data over in `data[field]`; passes never read the disk.
"""
from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import mlx.core as mx
import numpy as np
from mlx.utils import tree_flatten

from laya_opt.util.errors import InputError, PassError, PlanError
from laya_opt.core.model import KERNEL_FIELDS
from laya_opt.core.runtime import REFERENCE_OWNER, Runtime
from laya_opt.util.schema import non_default, parse

RUNTIME_PARTS = frozenset({"model", "codec", "encoder_config", "agent_config", "calibration", "dtype", "kernels",
                           "preparer", "planner", "forward"})
BOOKKEEPING = ("identity", "applied", "info", "kernel_owners")   # written by apply_pass only
DATA_KINDS = ("requests",)
NO_DATA = "none"

# apply(runtime, config, data) -> (new runtime, report: plain data for stage records and report.md)
ApplyFn = Callable[[Runtime, Any, Mapping[str, Any]], tuple[Runtime, Mapping[str, Any]]]


@dataclass(frozen=True)
class PassSpec:
    name: str
    config_type: type
    apply: ApplyFn
    exact: bool
    description: str
    replaces: frozenset[str]                 # runtime parts this pass swaps
    captures: frozenset[str] = frozenset()   # parts frozen into what it builds (e.g. a compiled graph)
    kernels: frozenset[str] = frozenset()    # Kernels fields it installs (required when it replaces kernels)
    supersedes: frozenset[str] = frozenset()  # passes whose kernel fields it may take over
    needs: Mapping[str, str] = field(default_factory=dict)  # config field -> data kind
    # precheck(model, config): what can be refused before anything runs (model may hold unevaluated weights)
    precheck: Callable[[Any, Any], None] | None = None

    def __post_init__(self):
        for part in self.replaces | self.captures:
            if part not in RUNTIME_PARTS:
                raise ValueError(f"pass {self.name}: unknown runtime part {part!r}; known: {sorted(RUNTIME_PARTS)}")
        self.check_kernel_fields()
        if not dataclasses.is_dataclass(self.config_type) or not self.config_type.__dataclass_params__.frozen:
            raise TypeError(f"pass {self.name}: config_type must be a frozen dataclass")
        fields = {f.name for f in dataclasses.fields(self.config_type)}
        for name, kind in self.needs.items():
            if name not in fields or kind not in DATA_KINDS:
                raise ValueError(f"pass {self.name}: needs {name!r} -> {kind!r} must name a config field and one of "
                                 f"{DATA_KINDS}")

    def check_kernel_fields(self) -> None:
        for name in ("kernels", "supersedes"):
            if isinstance(getattr(self, name), str):  # frozenset("abc") would be its letters
                raise TypeError(f"pass {self.name}: {name} must be a set of names, "
                                f"not the string {getattr(self, name)!r}")
            object.__setattr__(self, name, frozenset(getattr(self, name)))  # a tuple or list reads the same
        unknown = sorted(self.kernels - set(KERNEL_FIELDS))
        if unknown:
            raise ValueError(f"pass {self.name}: unknown kernel field {', '.join(map(repr, unknown))}; "
                             f"known: {', '.join(KERNEL_FIELDS)}")
        if ("kernels" in self.replaces) != bool(self.kernels):
            raise ValueError(f"pass {self.name}: a pass that replaces kernels names the fields it installs "
                             f"(kernels=...), and only such a pass names any; known: {', '.join(KERNEL_FIELDS)}")
        if self.supersedes and not self.kernels:
            raise ValueError(f"pass {self.name}: supersedes {sorted(self.supersedes)} but installs no kernel field")
        if self.name in self.supersedes or REFERENCE_OWNER in self.supersedes:
            raise ValueError(f"pass {self.name}: supersedes names itself or {REFERENCE_OWNER!r}, which every pass "
                             "may replace anyway")

    def make_config(self, values: Mapping[str, Any] | None = None, path: str = "") -> Any:
        return parse(self.config_type, values or {}, path or self.name)

    def check(self, model: Any, config: Any, where: str = "", error: type[InputError] = InputError) -> None:
        """Run the precheck: a setting the model cannot take is bad input (`error`, named by `where`)."""
        if self.precheck is not None:
            try:
                self.precheck(model, config)
            except ValueError as exc:
                raise error(f"{where or self.name}: {exc}") from None

    def data_names(self, config: Any) -> dict[str, tuple[str, str]]:
        """config field -> (data kind, the name it gives) for every need the config actually uses."""
        return {name: (kind, getattr(config, name)) for name, kind in self.needs.items()
                if getattr(config, name) not in (None, NO_DATA)}


def check_order(specs: list[PassSpec]) -> None:
    """Refuse a plan where a pass replaces a part that an earlier pass captured (e.g. weights after compile),
    or takes over a kernel field an earlier pass installed without declaring that it supersedes it."""
    captured: dict[str, str] = {}
    for spec in specs:
        for part in spec.replaces:
            if part in captured:
                raise PlanError(f"pass {spec.name!r} replaces the {part} that {captured[part]!r} captured earlier; "
                                 f"move {captured[part]!r} after {spec.name!r}")
        for part in spec.captures:
            captured.setdefault(part, spec.name)
    planned_kernel_owners(specs)


def kernel_override_error(spec: PassSpec, owners: Mapping[str, str]) -> str | None:
    """Why `spec` may not install its kernel fields over `owners` (field -> owning pass), or None."""
    for name in sorted(spec.kernels):
        owner = owners.get(name, REFERENCE_OWNER)
        if owner not in (REFERENCE_OWNER, spec.name) and owner not in spec.supersedes:
            return (f"pass {spec.name!r} replaces the kernel field {name!r} that pass {owner!r} installed; "
                    f"declare supersedes={{{owner!r}}} in {spec.name!r}'s PassSpec if it may, or drop one of them")
    return None


def planned_kernel_owners(specs: list[PassSpec]) -> list[dict[str, str]]:
    """Per pass, the owner of every kernel field after it, if every pass is applied (PlanError on an undeclared
    override). A rejected stage only makes the owners of the stages after it fall back to earlier passes."""
    owners = dict.fromkeys(KERNEL_FIELDS, REFERENCE_OWNER)
    after = []
    for spec in specs:
        error = kernel_override_error(spec, owners)
        if error:
            raise PlanError(error)
        owners.update(dict.fromkeys(spec.kernels, spec.name))
        after.append(dict(owners))
    return after


def kernel_ownership_lines(specs: list[PassSpec]) -> list[str]:
    """For `explain`: a table of the owner of every kernel field after each stage (numbered from 0).

    `*` marks the fields a stage installs; `over <pass>` names the pass whose kernel it supersedes."""
    header = ("stage", *KERNEL_FIELDS)
    rows = []
    before = dict.fromkeys(KERNEL_FIELDS, REFERENCE_OWNER)
    for index, (spec, after) in enumerate(zip(specs, planned_kernel_owners(specs))):
        cells = [after[name] if name not in spec.kernels else
                 f"{after[name]}*" + (f" over {before[name]}" if before[name] != REFERENCE_OWNER else "")
                 for name in KERNEL_FIELDS]
        rows.append((f"{index}. {spec.name}", *cells))
        before = after
    widths = [max(len(row[column]) for row in (header, *rows)) for column in range(len(header))]
    table = ["  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
             for row in (header, *rows)]
    return ["kernel owners after each stage (* installed by the stage, `over` the pass it supersedes; if a stage "
            "is rejected, its fields stay with the owner before it):", *table]


# ---------------------------------------------------------------------------------------------------------------------
# Mutation checks


def parameter_fingerprint(model) -> str:
    """Names, shapes, dtypes, object ids and two cheap value sums of every parameter array."""
    flat = tree_flatten(model.parameters())
    digest = hashlib.sha256()
    for name, value in flat:
        digest.update(f"{name}|{value.shape}|{value.dtype}|{id(value)}|".encode())
    if flat:
        # Sum and absolute sum catch writes through `array[...] = ...`, which keep the Python object.
        sums = mx.stack([mx.stack([mx.sum(v.astype(mx.float32)), mx.sum(mx.abs(v.astype(mx.float32)))])
                         for _, v in flat])
        digest.update(np.array(sums).tobytes())
    return digest.hexdigest()


def runtime_fingerprint(runtime: Runtime) -> dict[str, str]:
    """Per field: the object id, plus the parameter fingerprint of the model and a snapshot of `info`."""
    prints = {f.name: str(id(getattr(runtime, f.name))) for f in dataclasses.fields(runtime)}
    prints["model.parameters"] = parameter_fingerprint(runtime.model)
    prints["info.items"] = repr(sorted((str(key), id(value)) for key, value in runtime.info.items()))
    return prints


def fingerprint_changes(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    return [name for name in before if before[name] != after.get(name)]


# ---------------------------------------------------------------------------------------------------------------------
# What a pass changed


def _same_part(before: Any, after: Any) -> bool:
    """The same object, or an equal dtype or frozen dataclass (configs, calibration, kernel tables).

    Conservative: a module, a callable or anything else counts as changed unless it is the very same object
    (an equal-looking clone may hold other settings; a callable's behaviour cannot be compared)."""
    if before is after:
        return True
    if isinstance(before, mx.Dtype):
        return before == after
    if dataclasses.is_dataclass(before) and not isinstance(before, type) and type(before) is type(after) \
            and type(before).__dataclass_params__.frozen:
        try:
            equal = bool(before == after)
        except Exception:  # a field whose == is not a truth value (an array): unknown, so changed
            return False
        # Fields left out of == (a config's raw mapping) are unknown unless they are the same objects.
        return equal and all(getattr(before, f.name) is getattr(after, f.name)
                             for f in dataclasses.fields(before) if not f.compare)
    return False


def changed_parts(before: Runtime, after: Runtime) -> frozenset[str]:
    """The Runtime fields that decide outputs and differ between `before` and `after`; empty: the same answers.

    Every field counts except the bookkeeping apply_pass writes (identity, applied, info, kernel_owners), so a
    field added to Runtime later is compared too. The pipeline reuses the outputs of a stage whose pass
    changed nothing here, and re-runs a sample to check them (laya_opt.runs.reuse).
    """
    return frozenset(f.name for f in dataclasses.fields(Runtime) if f.name not in BOOKKEEPING
                     and not _same_part(getattr(before, f.name), getattr(after, f.name)))


# ---------------------------------------------------------------------------------------------------------------------
# Applying a pass


def identity_suffix(spec: PassSpec, config: Any) -> str:
    settings = non_default(config)
    return spec.name + ("(" + ",".join(f"{key}={value}" for key, value in settings.items()) + ")" if settings else "")


def apply_pass(spec: PassSpec, runtime: Runtime, config: Any, data: Mapping[str, Any] | None = None) -> Runtime:
    """Run one pass under its contract; every breach is a PassError naming the pass."""
    if not isinstance(config, spec.config_type):
        raise TypeError(f"pass {spec.name}: config must be a {spec.config_type.__name__}, got {type(config).__name__}")
    data = dict(data or {})
    override = kernel_override_error(spec, {name: runtime.kernel_owner(name) for name in KERNEL_FIELDS})
    if override:
        raise PassError(override)
    missing = [name for name in spec.data_names(config) if name not in data]
    if missing:
        raise PassError(f"pass {spec.name!r} needs data for {', '.join(missing)} (resolve the names first)")
    before = runtime_fingerprint(runtime)
    result = spec.apply(runtime, config, data)
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], Runtime)
            and isinstance(result[1], Mapping)):
        raise PassError(f"pass {spec.name!r} returned {type(result).__name__}, not (Runtime, report mapping)")
    child, report = result
    changed = fingerprint_changes(before, runtime_fingerprint(runtime))
    if changed:
        raise PassError(f"pass {spec.name!r} mutated its input runtime (changed: {', '.join(changed)})")
    owned = [name for name in BOOKKEEPING if getattr(child, name) is not getattr(runtime, name)]
    if owned:
        raise PassError(f"pass {spec.name!r} wrote {', '.join(owned)}, which apply_pass owns; return a report instead")
    undeclared = sorted(part for part in RUNTIME_PARTS - spec.replaces
                        if getattr(child, part) is not getattr(runtime, part))
    if undeclared:
        raise PassError(f"pass {spec.name!r} changed {', '.join(undeclared)} without declaring it in replaces "
                        f"({', '.join(sorted(spec.replaces)) or 'nothing'})")
    installed = [name for name in KERNEL_FIELDS if getattr(child.kernels, name) is not getattr(runtime.kernels, name)]
    undeclared_kernels = sorted(set(installed) - spec.kernels)
    if undeclared_kernels:
        raise PassError(f"pass {spec.name!r} changed the kernel field {', '.join(undeclared_kernels)} without "
                        f"declaring it in kernels ({', '.join(sorted(spec.kernels)) or 'nothing'})")
    owners = {**runtime.kernel_owners,
              **{name: runtime.kernel_owners.get(name, ()) + (spec.name,) for name in installed}}
    return child.replace(identity=f"{runtime.identity}+{identity_suffix(spec, config)}",
                         applied=runtime.applied + (spec.name,), info={**runtime.info, spec.name: dict(report)},
                         kernel_owners=owners)
