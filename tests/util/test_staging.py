import fcntl
import os
import time

import pytest

from laya_opt.util.errors import InputError
from laya_opt.util.staging import OWNER, PREFIX, UNLOCKED_GRACE_S, check_creatable, publish, staging_dir, sweep


def test_a_failed_build_removes_its_staging_dir_and_the_parents_it_created(tmp_path):
    parent = tmp_path / "a" / "b"
    with pytest.raises(KeyboardInterrupt):
        with staging_dir(parent, "x") as staging:
            (staging / "half-written").write_text("...")
            raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def test_a_published_dir_has_normal_permissions_and_no_owner_file(tmp_path):
    previous = os.umask(0o027)
    try:
        with staging_dir(tmp_path / "out", "x") as staging:
            (staging / "result").write_text("done")
            publish(staging, tmp_path / "out" / "final")
    finally:
        os.umask(previous)
    final = tmp_path / "out" / "final"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["final"]
    assert [p.name for p in final.iterdir()] == ["result"]
    assert oct(final.stat().st_mode & 0o777) == "0o750"


def test_publish_never_replaces_a_directory_with_content(tmp_path):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "keep").write_text("mine")
    with pytest.raises(OSError):
        with staging_dir(tmp_path, "x") as staging:
            publish(staging, tmp_path / "taken")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_sweep_removes_only_staging_dirs_whose_owner_is_gone(tmp_path):
    dead, young, old = (tmp_path / f"{PREFIX}{name}" for name in ("dead", "young", "old"))
    for path in (dead, young, old):
        path.mkdir()
    (dead / OWNER).write_text("")
    stamp = time.time() - UNLOCKED_GRACE_S - 10
    os.utime(old, (stamp, stamp))
    (tmp_path / "results-of-someone").mkdir()
    with staging_dir(tmp_path, "live") as live:
        with open(live / OWNER) as handle:  # a second lock on a live dir fails, even in the same process
            with pytest.raises(OSError):
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, young.name, "results-of-someone"])
        assert sweep(tmp_path) == []


def test_an_uncreatable_directory_is_refused_before_any_work(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match=f"output directory {tmp_path}/file/out: {tmp_path}/file is not a directory"):
        check_creatable(tmp_path / "file" / "out", "output directory")
    check_creatable(tmp_path / "new" / "deeper", "output directory")
    assert not (tmp_path / "new").exists()
