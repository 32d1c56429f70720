"""Compare two checker Outputs question by question (pure numpy): agreement, drift, token identity, quality.

Aggregate names are fixed: gates refer to them. Means use math.fsum so that aggregates do not depend on
question order. A non-finite question makes the drift aggregates NaN (and NaN fails every gate).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from laya_opt.core.prompt import QTYPES

from laya_opt.fidelity.checker import Outputs, QuestionOutput

JS_FLOOR = 1e-12          # probabilities clipped before logs, as the decoder's entropy floor
ECE_BINS = 10
# A flip between options whose reference probabilities are closer than this is a near tie: any numerical
# path may break it, and under the FP16 tolerance (max |dp| <= 0.02) the top-two gap can move by 0.04.
NEAR_TIE_MARGIN = 0.05
DRIFT_METRICS = ("argmax_agreement", "argmax_flips", "decisive_agreement", "decisive_flips", "near_tie_flips",
                 "max_abs_dp", "mean_abs_dp", "js_max", "js_mean",
                 "score_drift_max", "act_probability_drift_max", "finite", "token_identity", "labelled")
# Logit-level drift, measured on the raw float32 option logits the checker records: saturated calibrated
# probabilities (p = 1.00) hide how far the logits moved; these do not. Absent when a side has no logits.
LOGIT_METRICS = ("max_abs_dlogit", "kl_logits_max", "kl_logits_mean")
# Set by the pipeline: for a pass that captures runtime parts (fidelity.capture_probe), and for an exact
# pass that replaces kernels (fidelity.kernel_probe).
PROBE_METRICS = ("capture_max_abs_dlogit", "kernel_rounding_error")
# Set by the pipeline on every stage's incremental comparison: how much farther from the reference the stage's
# answers sit than its parent's (its cumulative p99 |dp| minus the parent's; its max |dp| minus the larger of the
# parent's and the dtype cast's, stage 0's). A kernel that rounds once where the ops it replaces round after each
# step moves answers from its parent's by about what the cast to the half dtype does, yet no farther from the
# float32 reference: the p99 tells the two apart (fidelity.gates). The max has the cast as a floor, and is only
# reported for such passes, because one question's distance is a draw: a kernel that rounds elsewhere, no worse,
# moves its worst question about as far as the cast moves any (docs/gates.md, "The worst question").
REFERENCE_EXCESS_METRICS = ("ref_excess_p99_abs_dp", "ref_excess_max_abs_dp")
LABEL_METRICS = ("accuracy_reference", "accuracy_candidate", "accuracy_delta", "ece_reference", "ece_candidate",
                 "ece_delta")
PER_TYPE_METRICS = ("argmax_agreement", "max_abs_dp")
# The drift diagnostics of approximate passes: a high percentile of the per-question drift, not its maximum.
# A maximum over N questions grows with N (a bigger suite finds a worse outlier), so a bound measured as one
# suite's maximum fails on a bigger one; the 99th percentile of 1,000 questions rests on its 10 worst, and
# stays comparable between suites of different sizes. (On 30 questions it is close to the maximum.)
DRIFT_PERCENTILE = 99.0
PERCENTILE_METRICS = ("p99_abs_dp", "p99_abs_dlogit", "p99_kl_logits")
# Decision changes (fidelity.decisions): counts by label outcome and by reference margin, McNemar's p on
# right->wrong vs wrong->right, and the 95% upper bound on the rate of changed decisions.
DECISION_METRICS = ("decision_changes", "near_ties", "right_to_wrong", "wrong_to_right", "wrong_to_other_wrong",
                    "unlabelled_changes", "decisive_right_to_wrong", "decisive_wrong_to_right",
                    "near_tie_right_to_wrong", "near_tie_wrong_to_right", "mcnemar_p", "change_rate_upper")
# Every name a gate may refer to; per-type entries are "<metric>.<type>".
METRIC_NAMES = frozenset(DRIFT_METRICS + LOGIT_METRICS + PERCENTILE_METRICS + DECISION_METRICS + PROBE_METRICS
                         + REFERENCE_EXCESS_METRICS
                         + ("deterministic",) + LABEL_METRICS
                         + tuple(f"{name}.{qtype}" for name in PER_TYPE_METRICS for qtype in QTYPES))


@dataclass(frozen=True, eq=False)  # holds numpy arrays: compare fields, not objects
class QuestionComparison:
    key: str
    type_name: str
    tags: Mapping
    reference_argmax: int
    candidate_argmax: int
    reference_margin: float         # reference top-1 minus top-2 probability (1.0 with one option)
    dp: np.ndarray                  # candidate - reference, per option
    max_abs_dp: float
    mean_abs_dp: float
    js: float
    max_abs_dlogit: float | None    # option logit drift with the shift shared by every option removed
    kl_logits: float | None         # KL(softmax(reference logits) || softmax(candidate logits)), nats
    score_drift: float | None       # score questions only
    act_probability_drift: float
    token_identical: bool
    token_mismatch: str | None      # what differs, for the first-mismatch report

    @property
    def agrees(self) -> bool:
        return self.reference_argmax == self.candidate_argmax and self.reference_argmax >= 0


@dataclass(frozen=True, eq=False)  # holds numpy arrays: compare fields, not objects
class FidelityReport:
    reference_identity: str
    candidate_identity: str
    metrics: dict[str, float]
    per_type: dict[str, dict[str, float]]        # type -> {count, argmax_agreement, max_abs_dp}
    questions: tuple[QuestionComparison, ...] = field(repr=False)
    first_token_mismatch: str | None = None      # key of the first question whose model input differs
    first_token_mismatch_detail: str | None = None
    decisions: Any = None    # fidelity.decisions.DecisionChanges, attached by fidelity.decisions.compare

    def worst(self, n: int) -> tuple[QuestionComparison, ...]:
        """The n questions with the largest max |dp|; non-finite (NaN) questions rank first."""
        return tuple(sorted(self.questions, key=lambda q: -math.inf if math.isnan(q.max_abs_dp)
                            else -q.max_abs_dp)[:n])


# ---------------------------------------------------------------------------------------------------------------------
# Elementary measures


def top_two_margin(probabilities: np.ndarray) -> float:
    top = np.sort(probabilities)[::-1]
    return float(top[0] - top[1]) if top.size > 1 else 1.0


def is_near_tie(probabilities) -> bool:
    """The top-two probability gap is below NEAR_TIE_MARGIN; a NaN gap counts as decisive (`NaN < x` is false)."""
    return bool(top_two_margin(probabilities) < NEAR_TIE_MARGIN)


def js_divergence(p: np.ndarray, q: np.ndarray) -> float:
    """Jensen-Shannon divergence in nats, probabilities clipped at 1e-12; in [0, ln 2], exactly 0 when p == q."""
    p = np.clip(np.asarray(p, dtype=np.float64), JS_FLOOR, 1.0)
    q = np.clip(np.asarray(q, dtype=np.float64), JS_FLOOR, 1.0)
    if p.shape != q.shape:
        raise ValueError(f"js_divergence needs equal shapes, got {p.shape} and {q.shape}")
    m = (p + q) / 2
    value = 0.5 * (float(np.sum(p * np.log(p / m))) + float(np.sum(q * np.log(q / m))))
    return float(np.clip(value, 0.0, math.log(2))) if not math.isnan(value) else value


def logit_drift(reference_logits: np.ndarray, candidate_logits: np.ndarray) -> tuple[float, float]:
    """(max |Δ logit| after removing the mean shift, KL(softmax(ref) || softmax(cand))) in float64.

    A shift shared by every option changes no probability (softmax ignores it), so it is not drift. The KL
    uses log-softmax in float64, so it needs no probability floor; it is 0 for one option.
    """
    reference = np.asarray(reference_logits, dtype=np.float64)
    candidate = np.asarray(candidate_logits, dtype=np.float64)
    if reference.shape != candidate.shape or reference.ndim != 1 or reference.size == 0:
        raise ValueError(f"logit_drift needs two equal non-empty 1-D rows, got {reference.shape} and "
                         f"{candidate.shape}")
    delta = candidate - reference
    max_abs = float(np.max(np.abs(delta - np.mean(delta))))
    with np.errstate(invalid="ignore"):  # NaN logits give NaN drift, which fails every gate
        log_p = reference - np.logaddexp.reduce(reference)
        log_q = candidate - np.logaddexp.reduce(candidate)
        kl = float(np.sum(np.exp(log_p) * (log_p - log_q)))
    return max_abs, (max(kl, 0.0) if not math.isnan(kl) else kl)  # rounding can leave -1e-17


def ece(confidences: Sequence[float], correct: Sequence[bool], bins: int = ECE_BINS) -> float:
    """Expected calibration error: sum over equal-width bins of (n_b / N) |accuracy_b - confidence_b|.

    Bin b holds confidences in [b/bins, (b+1)/bins); 1.0 goes into the last bin. NaN if any confidence is NaN.
    """
    conf = np.asarray(confidences, dtype=np.float64)
    hits = np.asarray(correct, dtype=bool)
    if conf.shape != hits.shape or conf.ndim != 1:
        raise ValueError(f"ece needs two equal-length 1-D sequences, got {conf.shape} and {hits.shape}")
    if conf.size == 0:
        raise ValueError("ece needs at least one prediction")
    if np.any(np.isnan(conf)):
        return float("nan")
    if np.any((conf < 0) | (conf > 1)):
        raise ValueError(f"ece confidences must lie in [0, 1], got min {conf.min()} max {conf.max()}")
    index = np.minimum((conf * bins).astype(int), bins - 1)
    total = []
    for b in range(bins):
        members = index == b
        if members.any():
            count = int(members.sum())
            gap = abs(int(hits[members].sum()) / count - math.fsum(conf[members]) / count)
            total.append(count / conf.size * gap)
    return math.fsum(total)


def accuracy(questions: Sequence[QuestionOutput]) -> float:
    """Fraction of labelled questions whose predicted option is the label (non-finite counts as wrong)."""
    labelled = [q for q in questions if q.label_index is not None]
    if not labelled:
        raise ValueError("accuracy needs at least one labelled question")
    return sum(q.correct for q in labelled) / len(labelled)


def outputs_ece(questions: Sequence[QuestionOutput], bins: int = ECE_BINS) -> float:
    """ECE on answer_confidence over the labelled questions."""
    labelled = [q for q in questions if q.label_index is not None]
    return ece([q.answer_confidence for q in labelled], [q.correct for q in labelled], bins)


def _token_mismatch(reference: QuestionOutput, candidate: QuestionOutput) -> str | None:
    a, b = reference.model_input, candidate.model_input
    if a is None or b is None:
        return "model input not traced"
    if a.qtype != b.qtype:
        return f"qtype {a.qtype} vs {b.qtype}"
    if a.markers != b.markers:
        return f"markers {a.markers} vs {b.markers}"
    if a.ids != b.ids:
        position = next((i for i, (x, y) in enumerate(zip(a.ids, b.ids)) if x != y), min(len(a.ids), len(b.ids)))
        return (f"ids differ at position {position} (lengths {len(a.ids)} vs {len(b.ids)}): "
                f"{a.ids[position:position + 1]} vs {b.ids[position:position + 1]}")
    return None


def compare_question(reference: QuestionOutput, candidate: QuestionOutput) -> QuestionComparison:
    if reference.type_name != candidate.type_name or reference.k != candidate.k:
        raise ValueError(f"question {reference.key}: reference is {reference.type_name} with {reference.k} options, "
                         f"candidate {candidate.type_name} with {candidate.k}")
    if reference.label_index != candidate.label_index:
        raise ValueError(f"question {reference.key}: labels differ ({reference.label!r} vs {candidate.label!r})")
    dp = candidate.probabilities - reference.probabilities
    abs_dp = np.abs(dp)
    margin = top_two_margin(reference.probabilities)
    score_drift = None
    if reference.type_name == "score":
        score_drift = abs(candidate.score_expectation - reference.score_expectation)
    mismatch = _token_mismatch(reference, candidate)
    has_logits = reference.logits.size == reference.k and candidate.logits.size == candidate.k
    max_abs_dlogit, kl_logits = logit_drift(reference.logits, candidate.logits) if has_logits else (None, None)
    return QuestionComparison(
        key=reference.key, type_name=reference.type_name, tags=reference.tags,
        reference_argmax=reference.argmax, candidate_argmax=candidate.argmax, reference_margin=margin, dp=dp,
        max_abs_dp=float(np.max(abs_dp)), mean_abs_dp=math.fsum(abs_dp) / abs_dp.size,
        js=js_divergence(reference.probabilities, candidate.probabilities), max_abs_dlogit=max_abs_dlogit,
        kl_logits=kl_logits, score_drift=score_drift,
        act_probability_drift=abs(candidate.act_probability - reference.act_probability),
        token_identical=mismatch is None, token_mismatch=mismatch)


# ---------------------------------------------------------------------------------------------------------------------
# Aggregation


def check_same_questions(reference: Outputs, candidate: Outputs) -> None:
    """Both sides must hold the same keys in the same order; the error names the first difference."""
    ref_keys, cand_keys = reference.keys, candidate.keys
    for index, (a, b) in enumerate(zip(ref_keys, cand_keys)):
        if a != b:
            raise ValueError(f"question {index} differs: reference {a!r}, candidate {b!r}")
    if len(ref_keys) != len(cand_keys):
        longer, name = (ref_keys, "reference") if len(ref_keys) > len(cand_keys) else (cand_keys, "candidate")
        raise ValueError(f"only the {name} has question {longer[min(len(ref_keys), len(cand_keys))]!r} "
                         f"({len(ref_keys)} vs {len(cand_keys)} questions)")
    if not ref_keys:
        raise ValueError("nothing to compare: both outputs are empty")


def _max(values: Sequence[float]) -> float:
    # NaN-propagating max; 0.0 for an empty selection (nothing drifted).
    return float(np.max(values)) if len(values) else 0.0


def _percentile(values: Sequence[float]) -> float:
    # NaN-propagating (a NaN question fails the gate as it does the maximum); 0.0 for an empty selection.
    if not len(values):
        return 0.0
    array = np.asarray(values, dtype=np.float64)
    return float("nan") if np.any(np.isnan(array)) else float(np.percentile(array, DRIFT_PERCENTILE))


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if len(values) else 0.0


def drift_metrics(comparisons: Sequence[QuestionComparison]) -> dict[str, float]:
    agree = [c.agrees for c in comparisons]
    near_tie = [c.reference_margin < NEAR_TIE_MARGIN for c in comparisons]  # NaN margins count as decisive
    decisive = [c.agrees for c, tie in zip(comparisons, near_tie) if not tie]
    all_abs_dp = np.concatenate([np.abs(c.dp) for c in comparisons])
    score = [c.score_drift for c in comparisons if c.score_drift is not None]
    metrics = {
        "argmax_agreement": sum(agree) / len(agree),
        "argmax_flips": float(len(agree) - sum(agree)),
        # Agreement where the reference decided clearly; flips inside near ties are counted separately.
        "decisive_agreement": sum(decisive) / len(decisive) if decisive else 1.0,
        "decisive_flips": float(len(decisive) - sum(decisive)),
        "near_tie_flips": float(sum(not c.agrees for c, tie in zip(comparisons, near_tie) if tie)),
        "max_abs_dp": _max([c.max_abs_dp for c in comparisons]),
        "p99_abs_dp": _percentile([c.max_abs_dp for c in comparisons]),
        "mean_abs_dp": _mean(all_abs_dp),
        "js_max": _max([c.js for c in comparisons]),
        "js_mean": _mean([c.js for c in comparisons]),
        "score_drift_max": _max(score),
        "act_probability_drift_max": _max([c.act_probability_drift for c in comparisons]),
        "token_identity": sum(c.token_identical for c in comparisons) / len(comparisons),
    }
    if all(c.max_abs_dlogit is not None for c in comparisons):
        kl = [c.kl_logits for c in comparisons]
        metrics.update(max_abs_dlogit=_max([c.max_abs_dlogit for c in comparisons]), kl_logits_max=_max(kl),
                       kl_logits_mean=_mean(kl), p99_abs_dlogit=_percentile([c.max_abs_dlogit for c in comparisons]),
                       p99_kl_logits=_percentile(kl))
    return metrics


def reference_excess(stage: Mapping[str, float], parent: Mapping[str, float] | None,
                     cast: Mapping[str, float] | None = None) -> dict[str, float]:
    """REFERENCE_EXCESS_METRICS from the cumulative metrics of a stage, of its parent and of the dtype cast (stage
    0; None for either: the reference, at distance 0). The p99 is judged against the parent's; the max against
    the larger of the parent's and the cast's. A side without the metric gives NaN, which fails any gate on it."""
    def value(side: Mapping[str, float] | None, base: str) -> float:
        return 0.0 if side is None else side.get(base, math.nan)

    parent_max, cast_max = value(parent, "max_abs_dp"), value(cast, "max_abs_dp")
    max_floor = math.nan if math.isnan(parent_max) or math.isnan(cast_max) else max(parent_max, cast_max)
    return {"ref_excess_p99_abs_dp": float(stage.get("p99_abs_dp", math.nan) - value(parent, "p99_abs_dp")),
            "ref_excess_max_abs_dp": float(stage.get("max_abs_dp", math.nan) - max_floor)}


def label_metrics(reference: Outputs, candidate: Outputs) -> dict[str, float]:
    """Accuracy and ECE of both sides on the labelled questions; empty when there are none."""
    if not reference.labelled():
        return {}
    acc_ref, acc_cand = accuracy(reference.questions), accuracy(candidate.questions)
    ece_ref, ece_cand = outputs_ece(reference.questions), outputs_ece(candidate.questions)
    return {"accuracy_reference": acc_ref, "accuracy_candidate": acc_cand, "accuracy_delta": acc_cand - acc_ref,
            "ece_reference": ece_ref, "ece_candidate": ece_cand, "ece_delta": ece_cand - ece_ref}


def per_type_metrics(comparisons: Sequence[QuestionComparison]) -> dict[str, dict[str, float]]:
    table = {}
    for qtype in QTYPES:
        members = [c for c in comparisons if c.type_name == qtype]
        if members:
            table[qtype] = {"count": float(len(members)),
                            "argmax_agreement": sum(c.agrees for c in members) / len(members),
                            "max_abs_dp": _max([c.max_abs_dp for c in members])}
    return table


def compare(reference: Outputs, candidate: Outputs) -> FidelityReport:
    """Per-question comparison and the fixed-name aggregates the gates read."""
    check_same_questions(reference, candidate)
    comparisons = tuple(compare_question(a, b) for a, b in zip(reference.questions, candidate.questions))
    metrics = drift_metrics(comparisons)
    metrics["finite"] = 1.0 if reference.finite and candidate.finite else 0.0
    if candidate.deterministic is not None:  # absent (a gate on it fails) unless measured: repeat >= 2 or a rerun
        metrics["deterministic"] = 1.0 if candidate.deterministic else 0.0
    metrics["labelled"] = float(len(reference.labelled()))
    metrics.update(label_metrics(reference, candidate))
    per_type = per_type_metrics(comparisons)
    for qtype, row in per_type.items():
        for name in PER_TYPE_METRICS:
            metrics[f"{name}.{qtype}"] = row[name]
    first = next((c for c in comparisons if not c.token_identical), None)
    return FidelityReport(reference_identity=reference.identity, candidate_identity=candidate.identity,
                          metrics=metrics, per_type=per_type, questions=comparisons,
                          first_token_mismatch=first.key if first else None,
                          first_token_mismatch_detail=first.token_mismatch if first else None)


# ---------------------------------------------------------------------------------------------------------------------
# Quality tables (the stand-in's training report reads these)


@dataclass(frozen=True)
class AccuracyRow:
    grouping: str         # "all" or the tag the row groups by
    value: str
    count: int
    accuracy: float
    ece: float


def group_value(question: QuestionOutput, name: str) -> str:
    """A tag value; type and options fall back to what the checker saw."""
    if name in question.tags:
        return str(question.tags[name])
    if name == "type":
        return question.type_name
    if name == "options":
        return str(question.k)
    return "unknown"


def _row(name: str, value: str, questions: Sequence[QuestionOutput]) -> AccuracyRow:
    return AccuracyRow(grouping=name, value=value, count=len(questions), accuracy=accuracy(questions),
                       ece=outputs_ece(questions))


def accuracy_table(outputs: Outputs, by: Sequence[str] = ("type", "language", "options")) -> tuple[AccuracyRow, ...]:
    """An 'all' row, then one row per value of each field in `by` (separate breakdowns, not a cross product)."""
    labelled = outputs.labelled()
    if not labelled:
        raise ValueError(f"outputs of {outputs.identity} hold no labelled questions")
    rows = [_row("all", "all", labelled)]
    for name in by:
        groups: dict[str, list[QuestionOutput]] = {}
        for question in labelled:
            groups.setdefault(group_value(question, name), []).append(question)
        rows += [_row(name, value, groups[value]) for value in sorted(groups, key=_natural_key)]
    return tuple(rows)


def _natural_key(value: str) -> tuple:
    # "2" < "10" for option counts; words sort alphabetically after numbers.
    return (0, int(value), "") if value.isdigit() else (1, 0, value)
