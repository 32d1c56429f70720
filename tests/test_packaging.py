"""A wheel works outside the checkout: built, installed in a fresh venv, run from an unrelated directory."""
from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = {"callback": {"type": "noul", "instructions": "The customer wants a call back."},
             "urgency": {"type": "score", "instructions": "How urgent is this?",
                         "criteria": ["minor", "serious", "critical"]}}
EXPERIMENT = """name: wheel-smoke
checkpoint: ckpt
candidate_dtype: float32
suites: [smoke]
passes:
  - {name: head_prune_final}
output_dir: out
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(bin dir, environment) of a fresh venv holding only the wheel; dependencies come from this interpreter."""
    tmp = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp / "dist"), str(ROOT)],
                   check=True, capture_output=True)
    (wheel,) = (tmp / "dist").glob("laya_opt-*.whl")
    # No pip inside the venv (ensurepip takes 5 s): this interpreter's pip installs into it (pip >= 22.3).
    outer_pip = tuple(int(part) for part in version("pip").split(".")[:2]) >= (22, 3)
    subprocess.run([sys.executable, "-m", "venv", *(["--without-pip"] if outer_pip else []), str(tmp / "venv")],
                   check=True)
    bin_dir = tmp / "venv" / "bin"
    pip = [sys.executable, "-m", "pip", "--python", str(bin_dir / "python")] if outer_pip else [str(bin_dir / "pip")]
    subprocess.run([*pip, "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True, capture_output=True)
    # mlx, numpy, tokenizers, ... from this environment's site-packages; its editable laya_opt hook is a .pth,
    # which PYTHONPATH entries never run, so only the wheel's laya_opt is importable.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(site.getsitepackages()))
    return bin_dir, env


def run(installed, cwd, *args):
    bin_dir, env = installed
    return subprocess.run([str(arg) for arg in args], cwd=cwd, env=env, capture_output=True, text=True)


def test_the_wheel_imports_under_laya_opt_only(installed, tmp_path):
    bin_dir, _ = installed
    done = run(installed, tmp_path, bin_dir / "python", "-c",
               "import importlib.util as u, laya_opt, laya_opt.passes, laya_opt.suites.suite_file;"
               "from laya_opt.util.resources import standin_checkpoint, suite_names;"
               "print(laya_opt.__file__, standin_checkpoint(), suite_names(),"
               "      u.find_spec('passes'), u.find_spec('fidelity'))")
    assert done.returncode == 0, done.stderr
    module, checkpoint, *rest = done.stdout.split()
    assert str(bin_dir.parent) in module and str(ROOT) not in module
    assert (Path(checkpoint) / "model.safetensors").is_file() and str(bin_dir.parent) in checkpoint
    assert "'heldout'," in done.stdout and done.stdout.rstrip().endswith("None None")


def test_predict_and_a_smoke_experiment_run_from_an_unrelated_directory(installed, tmp_path, tiny_checkpoint_dir):
    """predict on the bundled stand-in; the experiment on a tiny checkpoint by relative path (the stand-in's
    smoke run takes 18 s on the CPU) with the bundled smoke suite."""
    bin_dir, _ = installed
    shutil.copytree(tiny_checkpoint_dir, tmp_path / "ckpt")
    (tmp_path / "q.json").write_text(json.dumps(QUESTIONS))
    predicted = run(installed, tmp_path, bin_dir / "laya-opt", "predict", "--state",
                    "It is a minor issue. Please do not call me back.", "--questions", "q.json", "--json")
    assert predicted.returncode == 0, predicted.stderr
    assert list(json.loads(predicted.stdout)["answers"]) == ["callback", "urgency"]
    (tmp_path / "smoke.yaml").write_text(EXPERIMENT)
    ran = run(installed, tmp_path, bin_dir / "laya-opt", "run", "smoke.yaml", "--quiet")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    (results,) = (tmp_path / "out").iterdir()  # relative output_dir: under the working directory
    assert {p.name for p in results.iterdir()} == {"manifest.json", "stages.jsonl", "report.md", "timings.json"}
    assert [json.loads(line)["verdict"] for line in (results / "stages.jsonl").read_text().splitlines()] == \
        ["accepted", "accepted"]


def setup_module_requirements(environ):
    import importlib.util

    spec = importlib.util.spec_from_file_location("laya_setup", ROOT / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.requirements(environ)


@pytest.mark.parametrize("backend, requirement", [(None, "mlx[cpu]"), ("cuda13", "mlx[cuda13]"),
                                                  ("cuda12", "mlx[cuda12]")])
def test_the_linux_mlx_backend_is_chosen_at_install_time(backend, requirement):
    environ = {"LAYA_OPT_MLX": backend} if backend else {}
    linux = [r for r in setup_module_requirements(environ) if r.startswith("mlx") and "linux" in r]
    assert linux == [f"{requirement}>=0.30; sys_platform == 'linux'"]
    with pytest.raises(SystemExit, match="LAYA_OPT_MLX='rocm': choose one of cpu, cuda12, cuda13"):
        setup_module_requirements({"LAYA_OPT_MLX": "rocm"})


def test_the_default_wheel_requires_the_cpu_backend_on_linux(installed):
    bin_dir, _ = installed
    done = subprocess.run([str(bin_dir / "python"), "-c", "from importlib.metadata import requires; "
                           "print('\\n'.join(requires('laya-opt')))"], capture_output=True, text=True)
    assert "mlx[cpu]>=0.30; sys_platform == \"linux\"" in done.stdout.splitlines()


def test_the_reference_cache_hashes_the_installed_model_source(installed, tmp_path):
    bin_dir, _ = installed
    done = run(installed, tmp_path, bin_dir / "python", "-c",
               "from laya_opt.runs.refcache import source_files; files = source_files();"
               "print(files['laya_opt.core.model'], files['laya_opt.fidelity.checker'], len(files))")
    assert done.returncode == 0, done.stderr
    model, checker, count = done.stdout.split()
    assert str(bin_dir.parent) in model and str(bin_dir.parent) in checker and int(count) >= 10
