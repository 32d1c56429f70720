"""The sweep frontier: a passing point is on the Pareto front iff no other passing point dominates it."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from laya_opt.runs.frontier import best_trial, closest_failing, dominates, pareto_front, render_markdown, frontier_data

rows_strategy = st.lists(st.tuples(st.sampled_from([0.5, 0.8, 1.0, 1.2, 2.0]), st.integers(0, 4), st.booleans()),
                         max_size=12).map(lambda items: [
                             {"number": n, "state": "COMPLETE", "speedup": s, "decision_changes": c, "passed": p,
                              "settings": {"x": n}, "failed_gates": [] if p else ["cumulative: flips"]}
                             for n, (s, c, p) in enumerate(items)])


@settings(max_examples=200, deadline=None)
@given(rows_strategy)
def test_on_the_front_iff_no_passing_point_dominates_it(rows):
    front = {row["number"] for row in pareto_front(rows)}
    passing = [row for row in rows if row["passed"]]
    for row in rows:
        expected = row["passed"] and not any(dominates(other, row) for other in passing)
        assert (row["number"] in front) == expected
    best = best_trial(rows)
    if passing:
        assert best["passed"] and best["speedup"] == max(row["speedup"] for row in passing)
    else:
        assert best is None and front == set()


@settings(max_examples=50, deadline=None)
@given(rows_strategy)
def test_a_failing_trial_is_never_best_and_the_report_renders(rows):
    best = best_trial(rows)
    assert best is None or best["passed"]
    text = render_markdown(frontier_data("s", rows, {"speedup_label": "p50"}))
    assert text.startswith("# Sweep s")
    if best is None:
        assert "No trial passed" in text
        assert len(closest_failing(rows)) == min(3, sum(not row["passed"] for row in rows))
