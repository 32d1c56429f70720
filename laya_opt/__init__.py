"""laya-opt: composable, fidelity-gated optimization passes for the Laya decision model on MLX.

The public API, in four calls::

    import laya_opt as lo

    reference = lo.load()                                  # the bundled stand-in, float32
    fast = lo.apply(lo.load(dtype="float16"), lo.passes.HeadPruneFinalConfig()) # one pass, by config
    fast = lo.apply(fast, "compile_buckets", multiple=16)                       # ... or by name
    result = lo.run_pipeline(reference, [lo.passes.HeadPruneFinalConfig(), lo.passes.CompileBucketsConfig()],
                             suite="smoke", dtype="float16")                   # gated stage by stage
    timings = lo.benchmark({"reference": reference, "fast": result.final_runtime}, workloads=["short-1"])

Everything else (Runtime, Pipeline, the fidelity checker) is importable from its module; the errors
of bad input are the types in `laya_opt.util.errors`.
"""
from __future__ import annotations

from collections.abc import Mapping

from laya_opt.util.backend import require_backend
from laya_opt.util.errors import (CheckpointError, ConfigError, ExperimentError, InputError, LayaError, PassError,  # noqa: F401
                                  QuestionError, SchemaError, SuiteError)
from laya_opt.util.version import VERSION as __version__

require_backend()  # Linux: stop here, naming the extras, when mlx has no backend (plain `pip install laya-opt`)

from laya_opt.util import blas as _blas  # noqa: F401,E402  (must run before mlx.core is imported; see util/blas.py)

__all__ = ["load", "apply", "run_pipeline", "benchmark", "load_suite", "passes", "LayaError", "InputError",
           "PassError", "CheckpointError", "ConfigError", "ExperimentError", "QuestionError", "SchemaError",
           "SuiteError", "__version__"]


def load(checkpoint=None, dtype: str = "float32", batch_size: int = 16):
    """A Runtime for a checkpoint directory (upstream or laya-mlx layout); None or "standin": the stand-in."""
    from laya_opt.util.resources import checkpoint_path
    from laya_opt.core.runtime import load_runtime

    return load_runtime(checkpoint_path(checkpoint), dtype=dtype, batch_size=batch_size)


def apply(runtime, pass_, /, data=None, **settings):
    """Apply one pass: a config object (`lo.passes.CompileBucketsConfig(multiple=16)`), or a name + settings.

    Data a pass needs (e.g. `plan_from="heldout"`) is resolved from its name unless `data` ({config field:
    its data}) gives it; anything else as `data` (a dict of settings, say) is a TypeError.
    """
    from laya_opt.passes.contract import PassSpec, apply_pass
    from laya_opt.runs.pipeline import pass_data
    from laya_opt.passes.registry import build_registry

    registry = build_registry()
    if isinstance(pass_, (str, PassSpec)):
        spec = registry.get(pass_) if isinstance(pass_, str) else pass_
        config = spec.make_config(settings)
    else:
        if settings:
            raise TypeError("give settings either in the config object or as keywords with a pass name, not both")
        spec, config = registry.for_config(pass_), pass_
    if data is not None and (not isinstance(data, Mapping) or set(data) - set(spec.needs)):
        # lo.apply(rt, "quantize_encoder", {"bits": 4}) would otherwise apply the default 8 bits in silence
        given = sorted(map(str, data)) if isinstance(data, Mapping) else type(data).__name__
        raise TypeError(f"lo.apply: data (the third argument) maps {spec.name}'s data fields "
                        f"({', '.join(sorted(spec.needs)) or 'it has none'}) to their data, got {given}; "
                        f"settings go as keywords (lo.apply(runtime, {spec.name!r}, setting=value)) "
                        "or in a config object")
    spec.check(runtime.model, config)  # a setting the model cannot take is an InputError, not the pass failing
    if data is None:
        data = pass_data(spec, config)
    return apply_pass(spec, runtime, config, data)


def run_pipeline(reference, passes=(), *, suite="smoke", dtype: str = "float16", gates=None, rerun: int = 128,
                 progress=None, gates_file=None):
    """Cast `reference` to `dtype` (stage 0), then apply and gate every pass on `suite` (a name or a Suite).

    `passes` holds config objects, PassSpecs or `laya_opt.runs.steps.Step`s; `gates` overrides the
    defaults for every stage, e.g. `{"cumulative": ["max_abs_dp <= 0.02"]}`; the defaults come from
    `gates_file` (`standin`, the bundled calibration, when None; `spec`; or a path). `rerun` requests (a seeded
    sample) are evaluated twice per stage and compared bit for bit (fidelity.rerun).
    """
    from laya_opt.core.checkpoint import dtype_name
    from laya_opt.runs.pipeline import Pipeline
    from laya_opt.runs.steps import GateSet
    from laya_opt.util.schema import parse

    pipeline = Pipeline(passes, gates=parse(GateSet, gates or {}, "gates"), candidate_dtype=dtype,
                        reference_dtype=dtype_name(reference.dtype), rerun=rerun, gates_file=gates_file)
    return pipeline.run(reference, load_suite(suite) if isinstance(suite, str) else suite, progress=progress)


def benchmark(runtimes, workloads=("short-1",), *, baseline: str | None = None, show_progress: bool = False,
              **settings):
    """Time runtimes ({label: Runtime}) on named workloads in rotating blocks; speed-ups are paired against
    `baseline` (default: the first label). Settings are `laya_opt.timing.bench.BenchConfig` fields."""
    from laya_opt.timing.bench import BenchConfig, benchmark as run_benchmark
    from laya_opt.suites.workloads import build_workload
    from laya_opt.util.schema import parse

    labels = list(runtimes)
    if not labels:
        raise InputError("benchmark needs at least one runtime")
    config = parse(BenchConfig, settings, "benchmark")
    return run_benchmark(baseline or labels[0], runtimes, [build_workload(name) for name in workloads], config,
                         show_progress)


def load_suite(name_or_path):
    """A labelled suite: a bundled name (`smoke`, `heldout`, ...) or a .jsonl path."""
    from laya_opt.suites.suite_file import load_suite as read_suite
    from laya_opt.util.resources import suite_path

    return read_suite(suite_path(str(name_or_path)))


def __getattr__(name: str):
    if name == "passes":  # the built-in passes package, imported on first use
        import importlib

        return importlib.import_module(f"{__name__}.passes")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
