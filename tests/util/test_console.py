"""Terminal output: tables that keep ids whole on a narrow console, progress bars with an ETA, --version."""
from __future__ import annotations

import io

from click.testing import CliRunner
from rich.console import Console

import laya_opt
from laya_opt.timing.bench import thin_tails, tail_warning
from laya_opt.cli import main
from laya_opt.util.console import min_table_width, print_table, progress_printer
from laya_opt.util.progress import bar_tracker, silent
from laya_opt.runs.report import ReportRow, SpeedupCell, console_table

LONG_STAGE = "7 quantize_encoder_mixed_precision_recipe"


def printed(table: dict, width: int, id_columns: int = 1) -> str:
    out = io.StringIO()
    print_table(Console(file=out, width=width, color_system=None), table, id_columns)
    return out.getvalue()


def stage_table(stage: str) -> dict:
    row = ReportRow(stage=stage, kind="approx", argmax_agreement=0.99, max_abs_dp=0.01,
                    max_abs_dp_incremental=0.01, accuracy=0.9, speedups=(SpeedupCell("short-1", 1.02, 0.98, 1.07),),
                    verdict="accepted", wall_s=1.5)
    return console_table([row], ["short-1"], title="run")


def test_the_stage_table_keeps_stage_names_and_numbers_whole_however_narrow():
    wide = printed(stage_table(LONG_STAGE), width=240, id_columns=2)
    assert "┃ stage" in wide and LONG_STAGE in wide and "1.020× (0.980–1.070)" in wide
    narrow = printed(stage_table(LONG_STAGE), width=60, id_columns=2)
    assert "┃" not in narrow and LONG_STAGE in narrow  # too narrow for a table: one record per row, words whole
    narrow = " ".join(narrow.split())
    assert f"{LONG_STAGE} approx: argmax agree 0.9900;" in narrow and "1.020× (0.980–1.070)" in narrow
    assert "verdict accepted" in narrow


def test_generic_tables_keep_their_id_columns_whole():
    layer = "encoder.layers.11.attn.Wqkv"
    table = {"title": "t", "columns": ["layer", "flips", "max Δp", "note"],
             "rows": [[layer, 3, 0.25, "a long explanation " * 4]]}
    fitting = printed(table, width=60)
    assert "┃ layer" in fitting and layer in fitting  # the note column folds instead
    assert min_table_width(table) <= 60 < min_table_width(table) + len("explanation ") * 4


def test_tail_percentiles_need_enough_samples():
    assert thin_tails(4) == ("p95", "p99") and thin_tails(20) == ("p99",) and thin_tails(100) == ()
    assert tail_warning(100) is None and "p99 rest on 50 samples (p99 needs >= 100)" in tail_warning(50)


def test_a_progress_bar_shows_an_eta_on_a_terminal():
    out = io.StringIO()
    console = Console(file=out, width=100, force_terminal=True, color_system=None)
    with bar_tracker(console)("stage 1 quantize_encoder", 4) as advance:
        for _ in range(4):
            advance(1)
            console.file.flush()
    with silent("nothing", 3) as advance:
        advance(1)
    assert "stage 1 quantize_encoder" in out.getvalue() and "ETA" in out.getvalue()


def test_version():
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"laya-opt, version {laya_opt.__version__}"


def test_progress_lines_print_brackets_as_text_and_quiet_prints_nothing():
    out = io.StringIO()
    console = Console(file=out, width=120, force_terminal=False)
    progress_printer(console)("loading /tmp/[run]/ckpt with exclude ['encoder.layers.0']")
    progress_printer(console, quiet=True)("never shown")
    assert out.getvalue() == "· loading /tmp/[run]/ckpt with exclude ['encoder.layers.0']\n"
