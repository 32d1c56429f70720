"""The frontier of a sweep: Pareto front of speed-up against decision changes among passing trials, the best
passing trial, and the files that show them (frontier.json, frontier.md, frontier.png).

Rows are plain dicts (`sweep.trial_rows`): number, state, settings, passed, speedup, decision_changes,
accuracy_delta, max_abs_dp, failed_gates, cut, run_dir, note. A failing trial is on no front and is never best;
a trial the budget cut (state FAIL, `cut`) is neither passed nor failed and is listed apart, as is one whose
process crashed (state FAIL, `crashed`).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Sequence

from laya_opt.util.markdown import markdown_table
from laya_opt.util.staging import replace_file

FRONTIER_JSON, FRONTIER_MD, FRONTIER_PNG = "frontier.json", "frontier.md", "frontier.png"
CLOSEST = 3


def dominates(a: Mapping, b: Mapping) -> bool:
    """a is at least as fast with at most as many decision changes, and better in one of the two."""
    return (a["speedup"] >= b["speedup"] and a["decision_changes"] <= b["decision_changes"]
            and (a["speedup"] > b["speedup"] or a["decision_changes"] < b["decision_changes"]))


def _scored(rows: Sequence[Mapping]) -> list[Mapping]:
    return [row for row in rows if row.get("passed") and row.get("speedup") is not None
            and row.get("decision_changes") is not None]


def pareto_front(rows: Sequence[Mapping]) -> list[Mapping]:
    """The passing rows no other passing row dominates, fastest first."""
    candidates = _scored(rows)
    front = [row for row in candidates if not any(dominates(other, row) for other in candidates)]
    return sorted(front, key=lambda row: (-row["speedup"], row["decision_changes"], row["number"]))


def best_trial(rows: Sequence[Mapping]) -> Mapping | None:
    """The fastest passing trial (fewest decision changes, then lowest number, break ties); None if none passed."""
    front = pareto_front(rows)
    return front[0] if front else None


def closest_failing(rows: Sequence[Mapping], count: int = CLOSEST) -> list[Mapping]:
    """When nothing passes: the failing trials with the fewest failed gates and decision changes."""
    failing = [row for row in rows if row.get("state") == "COMPLETE" and not row.get("passed")]
    return sorted(failing, key=lambda row: (len(row.get("failed_gates") or ()), row.get("decision_changes") or 0,
                                            -(row.get("speedup") or 0.0), row["number"]))[:count]


def _cell(value, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def _settings(row: Mapping) -> str:
    return ", ".join(f"{key}={json.dumps(value)}" for key, value in (row.get("settings") or {}).items())


def _verdict(row: Mapping) -> str:
    if row.get("cut"):
        return "cut (budget)"
    if row.get("crashed"):
        return "crashed"
    if row.get("interrupted"):
        return "interrupted"
    if row.get("state") != "COMPLETE":
        return row.get("state", "?").lower()
    return "pass" if row.get("passed") else "FAIL"


def trials_table(rows: Sequence[Mapping]) -> str:
    body = [[str(row["number"]), _verdict(row), _settings(row), _cell(row.get("speedup"), ".3f"),
             _cell(row.get("decision_changes"), ".0f"), _cell(row.get("accuracy_delta"), "+.4f"),
             _cell(row.get("max_abs_dp"), ".2e"),
             "; ".join(row.get("failed_gates") or ()) or row.get("note") or "",
             Path(row["run_dir"]).name if row.get("run_dir") else "—"] for row in rows]
    return markdown_table(["trial", "verdict", "settings", "speed-up", "decision changes", "accuracy Δ",
                           "max |Δp|", "failed gates / note", "run"], body)


def frontier_data(sweep_name: str, rows: Sequence[Mapping], meta: Mapping) -> dict:
    best = best_trial(rows)
    return {"sweep": sweep_name, **meta,
            "counts": {"trials": len(rows), "complete": sum(r["state"] == "COMPLETE" for r in rows),
                       "passed": sum(bool(r.get("passed")) for r in rows),
                       "pruned": sum(r["state"] == "PRUNED" for r in rows),
                       "cut": sum(bool(r.get("cut")) for r in rows),
                       "crashed": sum(bool(r.get("crashed")) for r in rows)},
            "front": [row["number"] for row in pareto_front(rows)],
            "best": None if best is None else best["number"],
            "closest_failing": [] if best is not None else [row["number"] for row in closest_failing(rows)],
            "trials": list(rows)}


def render_markdown(data: Mapping) -> str:
    rows = {row["number"]: row for row in data["trials"]}
    counts = data["counts"]
    lines = [f"# Sweep {data['sweep']}", "",
             f"{counts['trials']} trials: {counts['complete']} run, {counts['passed']} passed the gates, "
             f"{counts['pruned']} pruned before any weight loaded. Speed-up: {data.get('speedup_label', '')} "
             "against the reference (below 1 is slower); decision changes: argmax changes against the reference "
             "on the gating suite.", ""]
    cut = [str(row["number"]) for row in data["trials"] if row.get("cut")]
    if cut:
        lines += [f"Cut by the budget before they finished (neither passed nor rejected; their settings were "
                  f"queued for the next `--resume`): trial{'s' if len(cut) > 1 else ''} {', '.join(cut)}.", ""]
    crashed = [str(row["number"]) for row in data["trials"] if row.get("crashed")]
    if crashed:
        lines += [f"Crashed (the trial's process died; never passed, never run again; its stderr is under "
                  f"`crashes/`): trial{'s' if len(crashed) > 1 else ''} {', '.join(crashed)}.", ""]
    if data["best"] is not None:
        best = rows[data["best"]]
        lines += [f"**Best passing trial: {best['number']}** ({_settings(best)}): speed-up "
                  f"{_cell(best['speedup'], '.3f')}, {best['decision_changes']:.0f} decision changes; "
                  "best.yaml reproduces it.", ""]
    else:
        closest = ", ".join(str(number) for number in data["closest_failing"])
        lines += ["**No trial passed the gates.** " + (f"The closest trials: {closest}." if closest else
                  "None was judged either: no trial finished (cut, crashed or pruned)."), ""]
    lines += ["## Pareto front (passing trials)", "", trials_table([rows[n] for n in data["front"]]) if data["front"]
              else "(empty: no trial passed)", "", "## All trials", "", trials_table(list(rows.values())), ""]
    return "\n".join(lines)


def draw(rows: Sequence[Mapping], path: Path, title: str) -> bool:
    from laya_opt.runs.plots import available, _pyplot

    if not available():
        return False
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(7, 4.5))
    scored = [row for row in rows if row.get("speedup") is not None and row.get("decision_changes") is not None]
    for passed, style in ((True, {"color": "tab:green", "marker": "o", "label": "passed"}),
                          (False, {"color": "tab:red", "marker": "x", "label": "failed gates"})):
        points = [row for row in scored if bool(row.get("passed")) == passed]
        if points:
            axis.scatter([r["decision_changes"] for r in points], [r["speedup"] for r in points], **style)
            for row in points:
                axis.annotate(str(row["number"]), (row["decision_changes"], row["speedup"]), fontsize=7,
                              xytext=(3, 3), textcoords="offset points")
    front = sorted(pareto_front(rows), key=lambda row: row["decision_changes"])
    if front:
        axis.step([r["decision_changes"] for r in front], [r["speedup"] for r in front], where="post",
                  color="tab:green", alpha=0.6, label="Pareto front")
    axis.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
    axis.set_xlabel("decision changes vs the reference (gating suite)")
    axis.set_ylabel("speed-up vs the reference (p50)")
    axis.set_title(title)
    if axis.get_legend_handles_labels()[0]:
        axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


def write_frontier(directory: Path, sweep_name: str, rows: Sequence[Mapping], meta: Mapping) -> dict:
    """frontier.json, frontier.md and (with matplotlib) frontier.png; each file replaced whole."""
    data = frontier_data(sweep_name, rows, meta)
    text = json.dumps(data, indent=2, ensure_ascii=False)
    replace_file(directory / FRONTIER_JSON, lambda partial: partial.write_text(text, encoding="utf-8"))
    markdown = render_markdown(data)
    replace_file(directory / FRONTIER_MD, lambda partial: partial.write_text(markdown, encoding="utf-8"))
    from laya_opt.runs.plots import available

    if available():   # without matplotlib an earlier picture stays as it was
        replace_file(directory / FRONTIER_PNG, lambda partial: draw(rows, partial, f"sweep {sweep_name}"))
    return data
