"""A wheel works outside the checkout: built, installed in a fresh venv, run from an unrelated directory."""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import site
import subprocess
import sys
from importlib import metadata
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
def built(tmp_path_factory):
    """(the wheel, what its build printed), built once per test run. The xdist workers that run this module's
    tests share one build under a lock: two builds of one source tree at once race in its build/ folder
    (both workers' builds failed when this module and another ran alone on 2 workers)."""
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "packaging-wheel"
    shared.mkdir(exist_ok=True)
    log = shared / "build.log"
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not log.exists():   # written only after a build that succeeded
            done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(shared / "dist"),
                                   str(ROOT)], check=True, capture_output=True, text=True)
            log.write_text(done.stdout + done.stderr)
    (wheel,) = (shared / "dist").glob("laya_opt-*.whl")
    return wheel, log.read_text()


@pytest.fixture(scope="module")
def installed(tmp_path_factory, built):
    """(bin dir, environment) of a fresh venv holding only the wheel; dependencies come from this interpreter."""
    tmp = tmp_path_factory.mktemp("wheel")
    wheel, _ = built
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


def test_the_wheel_holds_every_data_file_and_its_build_warns_of_no_package_left_out(built):
    import zipfile
    wheel, log = built
    names = set(zipfile.ZipFile(wheel).namelist())
    tracked = subprocess.run(["git", "ls-files", "laya_opt/core/cuda", "laya_opt/suites/data", "fidelity/gate_files",
                              "checkpoints"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    data = [path for path in tracked if not path.endswith(".py") and "/logs/" not in path]   # logs stay home
    assert len(data) > 20
    # installed paths: passes/, fidelity/ and checkpoints/ live under laya_opt/
    missing = [path for path in data if (path if path.startswith("laya_opt/") else f"laya_opt/{path}") not in names]
    assert not missing
    assert "is absent from the `packages` configuration" not in log


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


def pyproject() -> dict:
    try:
        import tomllib
    except ImportError:  # Python 3.10: pytest brings tomli
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_metadata_is_static_with_no_install_time_switch():
    project = pyproject()["project"]
    assert "dependencies" not in project.get("dynamic", []) and not (ROOT / "setup.py").exists()
    assert "LAYA_OPT_MLX" not in (ROOT / "pyproject.toml").read_text()


def test_the_base_install_takes_plain_mlx_and_the_backends_are_mlxs_own_extras():
    from packaging.requirements import Requirement

    project = pyproject()["project"]
    mlx = [Requirement(r) for r in project["dependencies"] if Requirement(r).name == "mlx"]
    assert [(r.extras, r.marker) for r in mlx] == [(set(), None)]  # no backend: cpu and cuda would clash
    extras = project["optional-dependencies"]
    mlx_extras = set(metadata.metadata("mlx").get_all("Provides-Extra"))
    for backend in ("cpu", "cuda12", "cuda13"):
        (requirement,) = [Requirement(r) for r in extras[backend] if Requirement(r).name == "mlx"]
        assert requirement.extras == {backend} and backend in mlx_extras  # named as mlx names them
    assert any(Requirement(r).name == "ray" for r in extras["ray"])


@pytest.mark.parametrize("system, machine, wanted", [("linux", "x86_64", True), ("linux", "aarch64", False),
                                                     ("darwin", "arm64", False)])
def test_the_cpu_extra_brings_mkl_on_x86_64_linux_only(system, machine, wanted):
    from packaging.requirements import Requirement

    (mkl,) = [Requirement(r) for r in pyproject()["project"]["optional-dependencies"]["cpu"]
              if Requirement(r).name == "mkl"]
    assert mkl.marker.evaluate({"sys_platform": system, "platform_machine": machine}) is wanted


def test_the_installed_metadata_matches_pyproject():
    requires = metadata.requires("laya-opt")
    assert "mlx>=0.30" in requires and 'mlx[cpu]>=0.30; extra == "cpu"' in requires
    assert 'mlx[cuda13]>=0.30; extra == "cuda13"' in requires and 'mlx[cuda12]>=0.30; extra == "cuda12"' in requires


def test_the_wheel_declares_the_backend_extras(installed):
    bin_dir, _ = installed
    done = subprocess.run([str(bin_dir / "python"), "-c", "from importlib.metadata import requires, metadata; "
                           "print('\\n'.join(requires('laya-opt'))); "
                           "print('\\n'.join(metadata('laya-opt').get_all('Provides-Extra')))"],
                          capture_output=True, text=True)
    from packaging.requirements import Requirement

    lines = done.stdout.splitlines()
    assert "mlx>=0.30" in lines and {"cpu", "cuda12", "cuda13", "ray", "dev"} <= set(lines)
    (mkl,) = [Requirement(line) for line in lines if line.startswith("mkl")]
    linux = {"sys_platform": "linux", "platform_machine": "x86_64"}
    assert mkl.marker.evaluate({**linux, "extra": "cpu"}) and not mkl.marker.evaluate({**linux, "extra": "cuda13"})


def test_the_reference_cache_hashes_the_installed_model_source(installed, tmp_path):
    bin_dir, _ = installed
    done = run(installed, tmp_path, bin_dir / "python", "-c",
               "from laya_opt.runs.refcache import source_files; files = source_files();"
               "print(files['laya_opt.core.model'], files['laya_opt.fidelity.checker'], len(files))")
    assert done.returncode == 0, done.stderr
    model, checker, count = done.stdout.split()
    assert str(bin_dir.parent) in model and str(bin_dir.parent) in checker and int(count) >= 10
