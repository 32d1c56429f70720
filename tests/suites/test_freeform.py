"""The hand-written `freeform` suite: the shipped file is what the module builds, and every label is valid."""
from __future__ import annotations

from laya_opt.suites import freeform
from laya_opt.suites.suite_file import load_suite
from laya_opt.util.resources import suite_path


def test_the_shipped_file_is_the_build_and_a_changed_one_is_stale(tmp_path, capsys):
    assert freeform.main(["--check"]) == 0
    assert freeform.main(["--out", str(tmp_path)]) == 0
    written = tmp_path / "freeform.jsonl"
    assert written.read_bytes() == suite_path("freeform").read_bytes()
    written.write_bytes(written.read_bytes().replace(b"courier", b"carrier", 1))
    assert freeform.main(["--check", "--out", str(tmp_path)]) == 1
    assert "stale suite file" in capsys.readouterr().err


def test_every_ticket_is_labelled_with_an_option_of_its_own_questions():
    suite = load_suite(suite_path("freeform"))
    assert len(suite.records) == len(freeform.TICKETS) >= 30
    for record in suite.records:
        language = record.tags["department"].language
        assert record.questions == freeform.QUESTIONS[language]
        assert record.labels["department"] in record.questions["department"]["criteria"]
        assert record.labels["urgency"] in (0, 1, 2) and isinstance(record.labels["callback"], bool)
    # each department, urgency and call-back answer occurs in every language
    for language in freeform.QUESTIONS:
        rows = [t for t in freeform.TICKETS if t[0] == language]
        assert {t[2] for t in rows} == {"billing", "account", "shipping"} and {t[4] for t in rows} == {True, False}
