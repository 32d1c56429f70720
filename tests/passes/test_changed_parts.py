"""passes.contract.changed_parts: a one-field change of a Runtime is reported as exactly that field (or nothing,
for the bookkeeping fields and for equal rebuilt values); the pipeline's reuse rests on it."""
from __future__ import annotations

import dataclasses

import mlx.core as mx
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from laya_opt.core.runtime import Runtime, clone_model, load_runtime
from laya_opt.passes.contract import BOOKKEEPING, changed_parts


@pytest.fixture(scope="module")
def runtime(tiny_checkpoint_dir):
    return load_runtime(tiny_checkpoint_dir, "float32")


def wrap(function):
    """A new callable that behaves like `function`: still a change (behaviour is not compared)."""
    return lambda *args, **kwargs: function(*args, **kwargs)


# field -> (a changed value, an equal value built anew or None when only the same object is equal)
CHANGES = {
    "model": (lambda r: clone_model(r.model), None),
    "codec": (lambda r: dataclasses.replace(r.codec, pad_id=r.codec.pad_id + 1), None),
    "encoder_config": (lambda r: dataclasses.replace(r.encoder_config, norm_eps=r.encoder_config.norm_eps * 2),
                       lambda r: dataclasses.replace(r.encoder_config)),
    "agent_config": (lambda r: dataclasses.replace(r.agent_config, max_len=r.agent_config.max_len - 1),
                     lambda r: dataclasses.replace(r.agent_config)),
    "calibration": (lambda r: dataclasses.replace(r.calibration, temperature=(2.0, 1.0, 1.0)),
                    lambda r: dataclasses.replace(r.calibration)),
    "dtype": (lambda r: mx.float16, lambda r: mx.float32),
    "kernels": (lambda r: dataclasses.replace(r.kernels, self_attention=wrap(r.kernels.self_attention)),
                lambda r: dataclasses.replace(r.kernels)),
    "preparer": (lambda r: wrap(r.preparer), None),
    "planner": (lambda r: wrap(r.planner), None),
    "forward": (lambda r: wrap(r.forward), None),
}
BOOKKEEPING_CHANGES = {"identity": lambda r: r.identity + "+x", "applied": lambda r: r.applied + ("x",),
                       "info": lambda r: {**r.info, "x": {}}, "kernel_owners": lambda r: {"self_attention": ("x",)}}


def test_every_runtime_field_is_covered():
    # A field added to Runtime must be added here: changed_parts compares it, and so must this test.
    assert set(CHANGES) | set(BOOKKEEPING_CHANGES) == {f.name for f in dataclasses.fields(Runtime)}
    assert set(BOOKKEEPING_CHANGES) == set(BOOKKEEPING)


def test_the_same_runtime_changed_nothing(runtime):
    assert changed_parts(runtime, runtime) == frozenset()
    assert changed_parts(runtime, runtime.replace()) == frozenset()


@given(name=st.sampled_from(sorted(CHANGES)), equal=st.booleans())
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_one_field_change_is_that_field_and_an_equal_value_is_none(runtime, name, equal):
    changed, rebuilt = CHANGES[name]
    if equal and rebuilt is not None:
        assert changed_parts(runtime, runtime.replace(**{name: rebuilt(runtime)})) == frozenset()
    else:
        assert changed_parts(runtime, runtime.replace(**{name: changed(runtime)})) == {name}


@given(name=st.sampled_from(sorted(BOOKKEEPING_CHANGES)))
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_bookkeeping_never_counts(runtime, name):
    assert changed_parts(runtime, runtime.replace(**{name: BOOKKEEPING_CHANGES[name](runtime)})) == frozenset()


@given(names=st.sets(st.sampled_from(sorted(CHANGES)), min_size=1))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_several_changes_are_all_reported(runtime, names):
    after = runtime.replace(**{name: CHANGES[name][0](runtime) for name in names})
    assert changed_parts(runtime, after) == names


def test_a_field_left_out_of_equality_counts_when_it_is_another_object(runtime):
    config = runtime.encoder_config
    other = dataclasses.replace(config, raw={**config.raw, "extra": 1})
    assert other == config and changed_parts(runtime, runtime.replace(encoder_config=other)) == {"encoder_config"}
