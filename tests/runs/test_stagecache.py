"""The stage cache (a sweep's trials share evaluated stages): keyed on the stage runtime's lineage and
everything else its outputs depend on; a hit is used only once its re-run sample matches bit for bit."""
from __future__ import annotations

import dataclasses
from contextlib import contextmanager
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from fake_passes import NOISY, REQUESTS
from hypothesis import given, settings
from hypothesis import strategies as st

from laya_opt.core.runtime import load_runtime
from laya_opt.passes.contract import PassSpec
from laya_opt.runs import stagecache
from laya_opt.runs.pipeline import Pipeline
from laya_opt.runs.refcache import entry_path, make_key, write_entry
from laya_opt.runs.stagecache import KIND, StageCache


@pytest.fixture
def reference(tiny_checkpoint_dir):
    return load_runtime(tiny_checkpoint_dir, "float32")


def run(steps, reference, cache, rerun=2, track=None):
    extra = {"track": track} if track else {}
    return Pipeline(steps, candidate_dtype="float32", rerun=rerun).run(reference, REQUESTS, stage_cache=cache,
                                                                       **extra)


class Bars:
    """A progress tracker that records each evaluation's total and the steps it advanced."""

    def __init__(self):
        self.bars = []

    @contextmanager
    def __call__(self, description, total):
        bar = {"description": description, "total": total, "done": 0}
        self.bars.append(bar)
        yield lambda steps=1: bar.__setitem__("done", bar["done"] + steps)


def bits(stage):
    """The stage's answers as bytes, through its comparison with the reference (dp = candidate - reference)."""
    return [(q.key, q.candidate_argmax, q.dp.tobytes(), q.max_abs_dlogit) for q in stage.cumulative.questions]


def test_a_second_run_takes_an_evaluated_stage_from_the_cache_after_its_sample(reference, tmp_path):
    cache = StageCache(make_key({"reference": "r"}), tmp_path)
    steps = [(NOISY, {"scale": 0.01}, "reject")]
    bars = Bars()
    first, second = run(steps, reference, cache), run(steps, reference, cache, track=bars)
    assert all(bar["done"] == bar["total"] for bar in bars.bars)   # a cached stage's bar ends full too
    assert first.stages[1].eval_path.kind == "evaluated"
    path = second.stages[1].eval_path
    assert path.kind == "cached" and path.changed == ("model",) and path.rerun.requests == 2 and path.rerun.identical
    assert "from the stage cache" in path.describe()
    assert bits(second.stages[1]) == bits(first.stages[1])
    assert second.stages[1].incremental.metrics == first.stages[1].incremental.metrics
    assert [s.verdict for s in second.stages] == [s.verdict for s in first.stages]
    assert len(list((tmp_path / KIND).glob("*.entry"))) == 1   # stage 0 (float32 cast) is reused, not cached


def test_another_setting_or_lineage_is_evaluated(reference, tmp_path):
    cache = StageCache(make_key({"reference": "r"}), tmp_path)
    run([(NOISY, {"scale": 0.01}, "reject")], reference, cache)
    other = run([(NOISY, {"scale": 0.02}, "reject")], reference, cache)
    assert (other.stages[1].eval_path.kind, other.stages[1].eval_path.note) == ("evaluated", "")  # a miss, not a catch
    # The same pass and setting after another parent: another runtime, another entry.
    stacked = run([(NOISY, {"scale": 0.02}, "reject"), (NOISY, {"scale": 0.01, "seed": 1}, "reject")], reference,
                  cache)
    assert [(s.eval_path.kind, s.eval_path.note) for s in stacked.stages[1:]] == [("cached", ""), ("evaluated", "")]
    # Another reference key (checkpoint, suite, batch size, device...): nothing shared.
    elsewhere = run([(NOISY, {"scale": 0.01}, "reject")], reference, StageCache(make_key({"reference": "s"}), tmp_path))
    assert (elsewhere.stages[1].eval_path.kind, elsewhere.stages[1].eval_path.note) == ("evaluated", "")


def test_an_entry_that_answers_otherwise_is_evaluated_in_full_and_replaced(reference, tmp_path):
    cache = StageCache(make_key({"reference": "r"}), tmp_path)
    steps = [(NOISY, {"scale": 1e-9}, "reject")]   # accepted: its runtime is kept, so its key can be planted
    clean = run(steps, reference, cache)
    stage = clean.stages[1]
    assert stage.verdict == "accepted"
    # A planted entry under the right key (as a key missing a field would find): other answers.
    key = cache.key(stage.runtime)
    planted = dataclasses.replace(clean.reference_outputs, questions=tuple(
        dataclasses.replace(q, logits=q.logits + 1.0, probabilities=q.probabilities[::-1].copy())
        for q in clean.reference_outputs.questions))
    write_entry(entry_path(tmp_path, key, KIND), key, planted, 0.0)
    caught = run(steps, reference, cache)
    path = caught.stages[1].eval_path
    assert path.kind == "evaluated" and "answered otherwise on the re-run sample" in path.note
    assert path.rerun.identical and bits(caught.stages[1]) == bits(stage)
    assert caught.stages[1].incremental.metrics == stage.incremental.metrics
    assert run(steps, reference, cache).stages[1].eval_path.kind == "cached"   # the entry was replaced


def test_without_a_sample_to_check_a_hit_with_nothing_is_cached(reference, tmp_path):
    # rerun=0: stage 0 cannot be reused (nothing to check it with), so it is evaluated, and not cached either.
    cache = StageCache(make_key({"reference": "r"}), tmp_path)
    for _ in range(2):
        assert run([(NOISY, {"scale": 0.01}, "reject")], reference, cache, rerun=0).stages[0].eval_path.kind == \
            "evaluated"
    assert not (tmp_path / KIND).exists()


@dataclass(frozen=True)
class PlanConfig:
    plan_from: str = "tiny"


PLANNED = PassSpec(name="planned_noise", config_type=PlanConfig, exact=True, replaces=frozenset({"model"}),
                   needs={"plan_from": "requests"}, description="test: takes data, then adds scorer noise",
                   apply=lambda runtime, config, data: NOISY.apply(runtime, NOISY.config_type(1e-9), data))


def test_a_lineage_that_took_data_is_not_cached(reference, tmp_path):
    # The data's content is not in the key: the stage that took it and every stage after it are evaluated.
    cache = StageCache(make_key({"reference": "r"}), tmp_path)
    for _ in range(2):
        result = Pipeline([(PLANNED, {}, "reject"), (NOISY, {"scale": 0.02}, "reject")], candidate_dtype="float32",
                          rerun=2, resolve_data=lambda kind, name: REQUESTS).run(reference, REQUESTS, stage_cache=cache)
        assert [s.eval_path.kind for s in result.stages[1:]] == ["evaluated", "evaluated"]
        assert result.stages[1].verdict == "accepted"   # the stage after it derives from it
    assert not (tmp_path / KIND).exists()


PASS_NAMES = st.sampled_from(["noisy_scorer", "masks_once", "quantize_encoder"])
SETTINGS = st.dictionaries(st.sampled_from(["bits", "scale", "group_size"]), st.integers(1, 3), max_size=2)
LINEAGE = st.lists(st.tuples(PASS_NAMES, SETTINGS), max_size=3)


def identity(lineage, dtype):
    parts = [name + ("(" + ",".join(f"{k}={v}" for k, v in sorted(s.items())) + ")" if s else "")
             for name, s in lineage]
    return "+".join([f"0123456789abcdef:{dtype}"] + parts)


@settings(max_examples=200, deadline=None)
@given(LINEAGE, LINEAGE, st.sampled_from(["float32", "float16"]), st.sampled_from(["float32", "float16"]),
       st.sampled_from(["r", "s"]), st.sampled_from(["r", "s"]))
def test_keys_are_equal_exactly_when_lineage_dtype_and_reference_are(a, b, dtype_a, dtype_b, ref_a, ref_b):
    def key(lineage, dtype, ref):
        runtime = SimpleNamespace(identity=identity(lineage, dtype), dtype=f"mlx.core.{dtype}")
        return StageCache(make_key({"reference": ref})).key(runtime).digest

    same = (a, dtype_a, ref_a) == (b, dtype_b, ref_b)
    assert (key(a, dtype_a, ref_a) == key(b, dtype_b, ref_b)) == same


def test_keys_follow_the_package_and_the_mlx_and_laya_switches(monkeypatch):
    runtime = SimpleNamespace(identity="0123:float16+masks_once", dtype="mlx.core.float16")
    cache = StageCache(make_key({"reference": "r"}))
    base = cache.key(runtime).digest
    monkeypatch.setenv("HOME_OF_SOMETHING_ELSE", "x")
    assert cache.key(runtime).digest == base   # other variables do not split the cache
    for name in ("MLX_USE_CUDA_GRAPHS", "MLX_ENABLE_TF32", "LAYA_CUDA_AMP"):
        monkeypatch.setenv(name, "0")
        assert cache.key(runtime).digest != base
        monkeypatch.delenv(name)
    assert cache.key(runtime).digest == base
    monkeypatch.setattr(stagecache, "package_digest", lambda: "an edited kernel")
    assert cache.key(runtime).digest != base


def test_the_package_digest_covers_every_file_of_the_pass_and_fidelity_folders(tmp_path):
    folders = stagecache.package_folders()
    assert (folders["laya_opt.passes"] / "contract.py").is_file()
    assert (folders["laya_opt.fidelity"] / "gates.py").is_file()
    assert (folders["laya_opt"] / "runs" / "stagecache.py").is_file()
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "kernel.cu").write_text("a")
    base = stagecache.folder_digest({"p": root})
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "x.pyc").write_text("compiled")
    assert stagecache.folder_digest({"p": root}) == base   # byte code is not source
    (root / "gate_files").mkdir()
    (root / "gate_files" / "standin.yaml").write_text("thresholds")
    assert stagecache.folder_digest({"p": root}) == base   # gates judge outputs, they do not make them
    (root / "sub" / "gate_files.cu").write_text("a file, not the folder")
    assert stagecache.folder_digest({"p": root}) != base
    (root / "sub" / "gate_files.cu").unlink()
    (root / "ckpt" / "logs").mkdir(parents=True)
    (root / "ckpt" / "TRAINING.md").write_text("how it was trained")
    (root / "ckpt" / "logs" / "run.log").write_text("step 1000")
    assert stagecache.folder_digest({"p": root}) == base   # they explain, they do not make outputs
    (root / "ckpt" / "manifest.json").write_text("{}")
    assert stagecache.folder_digest({"p": root}) != base   # a checkpoint's data file counts
    (root / "ckpt" / "manifest.json").unlink()
    (root / "sub" / "notes.mdx").write_text("not Markdown by its suffix")
    assert stagecache.folder_digest({"p": root}) != base
    (root / "sub" / "notes.mdx").unlink()
    (root / "sub" / "kernel.cu").write_text("b")
    assert stagecache.folder_digest({"p": root}) != base
    (root / "sub" / "kernel.cu").write_text("a")
    (root / "sub" / "kernel.cu").rename(root / "sub" / "other.cu")
    assert stagecache.folder_digest({"p": root}) != base
