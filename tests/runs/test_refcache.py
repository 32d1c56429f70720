"""The reference cache: exact round trip, hits, a miss for every changed key component, bad entries recomputed."""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from fake_passes import LABELS, REQUESTS
from processes import signal_once_marked

from laya_opt.runs import refcache
from laya_opt.timing.bench import prepared_digest
from laya_opt.fidelity.checker import evaluate
from laya_opt.fidelity.metrics import compare
from laya_opt.runs.refcache import cached_reference, entry_path, read_entry, reference_key, write_entry
from laya_opt.core.runtime import load_runtime

from conftest import write_tiny_checkpoint


def key_for(runtime, checkpoint_dir, requests, platform):
    tokens = prepared_digest([runtime.prepare(r.state, r.questions) for r in requests])
    return reference_key(runtime, requests, checkpoint_dir, tokens, platform)


class Counter:
    """compute() for cached_reference that counts its calls."""

    def __init__(self, runtime, requests):
        self.runtime, self.requests, self.calls = runtime, requests, 0

    def __call__(self):
        self.calls += 1
        return evaluate(self.runtime, self.requests)


def assert_same_outputs(first, second):
    assert first.identity == second.identity and first.repeat == second.repeat and first.keys == second.keys
    for a, b in zip(first.questions, second.questions):
        for name in ("probabilities", "logits", "action"):
            left, right = getattr(a, name), getattr(b, name)
            assert left.dtype == right.dtype and left.tobytes() == right.tobytes(), (a.key, name)
        for field in dataclasses.fields(a):
            if field.name not in ("probabilities", "logits", "action"):
                left, right = getattr(a, field.name), getattr(b, field.name)
                assert left == right or (left != left and right != right), (a.key, field.name)  # NaN == NaN here


def test_an_entry_round_trips_bit_for_bit(reference, tiny_checkpoint_dir, platform, tmp_path):
    outputs = evaluate(reference, REQUESTS)
    key = key_for(reference, tiny_checkpoint_dir, REQUESTS, platform)
    path = tmp_path / "entry"
    write_entry(path, key, outputs, compute_s=1.5)
    restored, header = read_entry(path, key)
    assert_same_outputs(outputs, restored)
    assert header["compute_s"] == 1.5 and header["key"] == key.digest
    report = compare(outputs, restored)
    assert report.metrics["max_abs_dp"] == 0.0 and report.metrics["token_identity"] == 1.0


def test_non_finite_values_survive_the_round_trip(reference, tiny_checkpoint_dir, platform, tmp_path):
    outputs = evaluate(reference, REQUESTS[:1])
    first = outputs.questions[0]
    broken = dataclasses.replace(first, probabilities=np.full(first.k, np.nan), finite=False,
                                 logits=np.array([-0.0, np.inf, np.nan], dtype=np.float32)[: first.k])
    outputs = dataclasses.replace(outputs, questions=(broken,) + outputs.questions[1:])
    key = key_for(reference, tiny_checkpoint_dir, REQUESTS[:1], platform)
    write_entry(tmp_path / "entry", key, outputs, 0.0)
    assert_same_outputs(outputs, read_entry(tmp_path / "entry", key)[0])


def test_the_second_lookup_is_a_hit_and_does_not_evaluate(reference, tiny_checkpoint_dir, platform, tmp_path):
    key = key_for(reference, tiny_checkpoint_dir, REQUESTS, platform)
    compute = Counter(reference, REQUESTS)
    first = cached_reference(key, compute, tmp_path)
    second = cached_reference(key, compute, tmp_path)
    assert (first.status, second.status, compute.calls) == ("computed", "hit", 1)
    assert second.path == entry_path(tmp_path, key) and second.saved_s == pytest.approx(first.seconds)
    assert f"cache hit (key {key.digest[:12]}" in second.describe() and "computed in" in first.describe()
    assert_same_outputs(first.outputs, second.outputs)
    off = cached_reference(None, compute, tmp_path)
    assert off.status == "off" and compute.calls == 2 and "cache off" in off.describe()


def _changed_checkpoint_weights(tmp_path, **_):
    return write_tiny_checkpoint(tmp_path / "other-seed", seed=8)


def _changed_checkpoint_config(tmp_path, **_):
    # same weights, other temperatures: every probability moves, the weights hash does not
    return write_tiny_checkpoint(tmp_path / "other-temps", agent_overrides={"temperature": [1.0, 1.0, 1.0]})


@pytest.mark.parametrize("change", [_changed_checkpoint_weights, _changed_checkpoint_config])
def test_a_changed_checkpoint_never_reuses_an_entry(change, reference, tiny_checkpoint_dir, platform, tmp_path):
    key = key_for(reference, tiny_checkpoint_dir, REQUESTS, platform)
    cached_reference(key, Counter(reference, REQUESTS), tmp_path)
    other_dir = change(tmp_path)
    other = load_runtime(other_dir, "float32")
    other_key = key_for(other, other_dir, REQUESTS, platform)
    assert other_key.digest != key.digest
    result = cached_reference(other_key, Counter(other, REQUESTS), tmp_path)
    assert result.status == "computed"
    assert compare(evaluate(other, REQUESTS), result.outputs).metrics["max_abs_dp"] == 0.0


def test_a_changed_suite_or_token_tensor_never_reuses_an_entry(reference, tiny_checkpoint_dir, platform):
    base = key_for(reference, tiny_checkpoint_dir, REQUESTS, platform)
    relabelled = tuple(dataclasses.replace(r, labels={**LABELS, "topic": "b"}) for r in REQUESTS)
    retexted = (dataclasses.replace(REQUESTS[0], state=REQUESTS[0].state + " hello"),) + REQUESTS[1:]
    fewer = REQUESTS[:-1]
    digests = {key_for(reference, tiny_checkpoint_dir, requests, platform).digest
               for requests in (relabelled, retexted, fewer)}
    assert base.digest not in digests and len(digests) == 3
    tokens = key_for(reference, tiny_checkpoint_dir, retexted, platform).components["tokens"]
    assert tokens != base.components["tokens"]


def test_a_changed_dtype_or_batch_size_never_reuses_an_entry(reference, tiny_checkpoint_dir, platform):
    base = key_for(reference, tiny_checkpoint_dir, REQUESTS, platform)
    half = load_runtime(tiny_checkpoint_dir, "float16")
    smaller_batches = load_runtime(tiny_checkpoint_dir, "float32", batch_size=2)
    for other in (half, smaller_batches):
        assert key_for(other, tiny_checkpoint_dir, REQUESTS, platform).digest != base.digest


@pytest.mark.parametrize("change", [("versions", "mlx", "0.0.1"), ("backend", None, "metal"),
                                    ("device", None, "Device(gpu, 0)"), ("blas", "library", "/lib/libblas.so.3"),
                                    ("device_info", "device_name", "NVIDIA H200"),
                                    ("device_info", "architecture", "sm_90")])
def test_a_changed_mlx_version_backend_device_or_blas_never_reuses_an_entry(change, reference, tiny_checkpoint_dir,
                                                                           platform):
    """The device model counts too: "Device(gpu, 0)" is the same string on an H100 and an H200."""
    section, name, value = change
    other = json.loads(json.dumps(platform))
    if name is None:
        other[section] = value
    else:
        other[section][name] = value
    assert key_for(reference, tiny_checkpoint_dir, REQUESTS, other).digest != \
        key_for(reference, tiny_checkpoint_dir, REQUESTS, platform).digest


def test_device_facts_that_change_no_output_keep_the_key(reference, tiny_checkpoint_dir, platform):
    """Only the device's name and architecture enter the key: a memory size or a free-memory reading must not
    make every run a miss."""
    other = json.loads(json.dumps(platform))
    other["device_info"] = {**other["device_info"], "memory_size": 1 << 40, "free_memory": 12345}
    assert key_for(reference, tiny_checkpoint_dir, REQUESTS, other).digest == \
        key_for(reference, tiny_checkpoint_dir, REQUESTS, platform).digest


def test_a_changed_blas_thread_count_never_reuses_an_entry(reference, tiny_checkpoint_dir, platform, monkeypatch):
    # OpenBLAS splits a matmul by thread count: the stand-in's smoke outputs differ in their last bits between
    # 1 and 2 threads, and a reused entry then fails the bit-exact re-run of stage 0 (Ray workers run 1 thread)
    digests = set()
    for threads in (1, 2):
        monkeypatch.setattr(refcache, "blas_threads", lambda threads=threads: threads)
        key = key_for(reference, tiny_checkpoint_dir, REQUESTS, platform)
        assert key.components["blas_threads"] == (threads if platform["backend"] == "cpu" else None)
        digests.add(key.digest)
    assert len(digests) == (2 if platform["backend"] == "cpu" else 1)


def test_blas_threads_reads_the_thread_count_of_the_loaded_blas():
    from laya_opt.util import blas

    if not blas.LOADED:
        pytest.skip("no BLAS (the MKL wheel or OpenBLAS) is preloaded in this process")
    script = "import laya_opt\nfrom laya_opt.runs.refcache import blas_threads\nprint(blas_threads())"
    for threads in ("1", "2"):
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                              env={**os.environ, "OPENBLAS_NUM_THREADS": threads, "MKL_NUM_THREADS": threads})
        assert done.stdout.strip() == threads


def test_the_source_digest_covers_the_model_code_and_sees_an_edit(reference, tiny_checkpoint_dir, platform,
                                                                  tmp_path, monkeypatch):
    files = refcache.source_files()
    for module in ("laya_opt.core.model", "laya_opt.core.runtime", "laya_opt.core.batching", "laya_opt.core.prompt",
                   "laya_opt.core.decode", "laya_opt.core.checkpoint", "laya_opt.core.tokens",
                   "laya_opt.fidelity.checker", "laya_opt.runs.refcache"):
        assert module in files, module
    assert "laya_opt.cli" not in files and "laya_opt.runs.report" not in files  # what the forward does not import
    key = key_for(reference, tiny_checkpoint_dir, REQUESTS, platform)
    cached_reference(key, Counter(reference, REQUESTS), tmp_path)
    edited = tmp_path / "model.py"
    edited.write_text(files["laya_opt.core.model"].read_text() + "\n# an edit\n")
    real = refcache._module_file
    monkeypatch.setattr(refcache, "_module_file", lambda name: edited if name == "laya_opt.core.model" else real(name))
    edited_key = key_for(reference, tiny_checkpoint_dir, REQUESTS, platform)
    assert edited_key.components["source"] != key.components["source"]
    assert cached_reference(edited_key, Counter(reference, REQUESTS), tmp_path).status == "computed"


def _flip_a_payload_byte(data: bytes) -> bytes:
    return data[:-20] + bytes([data[-20] ^ 0xFF]) + data[-19:]


def _truncate(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _foreign_components(data: bytes) -> bytes:
    line, _, payload = data.partition(b"\n")
    header = json.loads(line)
    header["components"]["checkpoint"] = "0" * 64
    return json.dumps(header, sort_keys=True).encode() + b"\n" + payload


@pytest.mark.parametrize("damage", [_flip_a_payload_byte, _truncate, _foreign_components, lambda data: b""])
def test_a_damaged_entry_is_detected_recomputed_and_replaced(damage, reference, tiny_checkpoint_dir, platform,
                                                             tmp_path):
    key = key_for(reference, tiny_checkpoint_dir, REQUESTS, platform)
    compute = Counter(reference, REQUESTS)
    cached_reference(key, compute, tmp_path)
    path = entry_path(tmp_path, key)
    path.write_bytes(damage(path.read_bytes()))
    again = cached_reference(key, compute, tmp_path)
    assert again.status == "recomputed" and compute.calls == 2 and "was bad" in again.note
    assert_same_outputs(evaluate(reference, REQUESTS), again.outputs)
    assert cached_reference(key, compute, tmp_path).status == "hit"  # the replacement is whole


def test_an_unwritable_cache_costs_nothing_but_the_entry(reference, tiny_checkpoint_dir, platform, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache folder should be")
    key = key_for(reference, tiny_checkpoint_dir, REQUESTS, platform)
    result = cached_reference(key, Counter(reference, REQUESTS), blocker)
    assert result.status == "computed" and result.path is None and "not stored" in result.note
    assert [p.name for p in tmp_path.iterdir()] == ["not-a-dir"]  # no temporary file left behind


def test_the_cache_keeps_within_its_size_limit_removing_the_least_recently_used(reference, tiny_checkpoint_dir,
                                                                               platform, tmp_path, monkeypatch):
    import os

    keys = [key_for(reference, tiny_checkpoint_dir, REQUESTS[:count], platform) for count in (1, 2, 3)]
    first = cached_reference(keys[0], Counter(reference, REQUESTS[:1]), tmp_path)
    second = cached_reference(keys[1], Counter(reference, REQUESTS[:2]), tmp_path)
    os.utime(first.path, (1, 1))
    os.utime(second.path, (2, 2))  # both old; the first older
    assert cached_reference(keys[0], Counter(reference, REQUESTS[:1]), tmp_path).status == "hit"  # now the newest
    # A limit that holds the first and the third but not all three: storing the third removes the least
    # recently used, the second (the first was just hit).
    third_size = len(entry_bytes(reference, tiny_checkpoint_dir, REQUESTS[:3], platform, tmp_path / "probe"))
    room = first.path.stat().st_size + third_size + second.path.stat().st_size // 2  # headers vary by a few bytes
    monkeypatch.setenv("LAYA_OPT_CACHE_MAX_MB", str(room / 2 ** 20))
    third = cached_reference(keys[2], Counter(reference, REQUESTS[:3]), tmp_path)
    assert third.status == "computed" and "removed (LAYA_OPT_CACHE_MAX_MB limit)" in third.note
    assert first.path.is_file() and third.path.is_file() and not second.path.exists()
    assert "stored; 1 least recently used entry removed" in third.describe()
    # The entry just written stays even when it alone exceeds the limit.
    monkeypatch.setenv("LAYA_OPT_CACHE_MAX_MB", "0.000001")
    fourth = cached_reference(keys[1], Counter(reference, REQUESTS[:2]), tmp_path)
    assert fourth.path.is_file() and sorted(tmp_path.glob("reference/*.entry")) == [fourth.path]


def entry_bytes(reference, checkpoint_dir, requests, platform, directory):
    """The size an entry for these requests takes (written in a scratch cache)."""
    result = cached_reference(key_for(reference, checkpoint_dir, requests, platform), Counter(reference, requests),
                              directory)
    return result.path.read_bytes()


@pytest.mark.parametrize("value", ["lots", "0", "-5", "nan", "inf"])
def test_a_bad_cache_limit_is_refused_before_anything_is_computed(value, reference, tiny_checkpoint_dir, platform,
                                                                  tmp_path, monkeypatch):
    from laya_opt.util.errors import InputError

    monkeypatch.setenv("LAYA_OPT_CACHE_MAX_MB", value)
    counter = Counter(reference, REQUESTS[:1])
    with pytest.raises(InputError,
                       match=f"LAYA_OPT_CACHE_MAX_MB must be a positive number of megabytes, got '{value}'"):
        cached_reference(key_for(reference, tiny_checkpoint_dir, REQUESTS[:1], platform), counter, tmp_path)
    assert counter.calls == 0


def test_concurrent_lookups_of_one_key_compute_it_once(reference, tiny_checkpoint_dir, platform, tmp_path):
    """Sweep trials (or Ray workers) asking for one entry at once: the per-entry lock makes the others wait and hit."""
    import threading

    key = key_for(reference, tiny_checkpoint_dir, REQUESTS, platform)
    outputs = evaluate(reference, REQUESTS)
    calls = []

    def slow_compute():
        calls.append(1)
        time.sleep(0.3)  # the others arrive while this one computes
        return outputs

    results = []
    threads = [threading.Thread(target=lambda: results.append(cached_reference(key, slow_compute, tmp_path)))
               for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1
    assert sorted(result.status for result in results) == ["computed", "hit", "hit"]


KILLED_HOLDER = """
import sys, time
from pathlib import Path
import laya_opt
from laya_opt.runs import refcache

def compute():
    Path(sys.argv[2]).write_text("computing")  # holds the entry's lock from here on
    time.sleep(120)

refcache.cached_reference(refcache.make_key({"test": "killed holder"}), compute, Path(sys.argv[1]))
"""


def test_a_process_killed_while_computing_an_entry_leaves_it_unlocked_and_whole(reference, tmp_path):
    """A Ray worker SIGKILLed mid-trial: the kernel drops its lock; the next process computes and stores the entry."""
    marker = tmp_path / "computing"
    holder = subprocess.Popen([sys.executable, "-c", KILLED_HOLDER, str(tmp_path), str(marker)],
                              stderr=subprocess.PIPE, text=True)
    signal_once_marked(holder, marker, 60, "the holder starting to compute")
    key = refcache.make_key({"test": "killed holder"})
    counter = Counter(reference, REQUESTS)
    result = cached_reference(key, counter, tmp_path)  # would wait forever on a lock the dead process kept
    assert result.status == "computed" and counter.calls == 1
    assert cached_reference(key, counter, tmp_path).status == "hit" and counter.calls == 1
    assert [path.name for path in (tmp_path / "reference").iterdir() if not path.name.endswith(".lock")] == \
        [entry_path(tmp_path, key).name]  # no partial entry left behind
