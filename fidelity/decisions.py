"""Decision changes: which answers a candidate changed, and what the changes prove (pure numpy, float64).

An approximate pass is judged by the decisions it changes, not by how far its probabilities drift: a
drift bound accepts a pass that flips a decisive answer whose drift stays small, and rejects one that
drifts on saturated answers without changing any. Per question, a change is a different predicted option;
it is counted by what the label says (right -> wrong, wrong -> right, wrong -> another wrong, unlabelled)
and by the reference's top-two probability gap (decisive, or a near tie below metrics.NEAR_TIE_MARGIN,
which any numerical path may break). Two statistics summarise the counts:

* McNemar's exact test, one-sided: with right->wrong = b and wrong->right = c, under "no loss" each of the
  b + c discordant questions is equally likely to go either way, so p = P(X >= b), X ~ Binomial(b + c, 1/2).
  p < 0.05 is a significant loss. Unlike an accuracy delta, it does not let gains hide losses' size: it asks
  whether the losses could be chance.
* The one-sided 95% Clopper-Pearson upper bound on the rate of changed decisions: what a pass proves on N
  questions. With no change in N questions it is 1 - 0.05^(1/N), e.g. 0.00299 for N = 1000.

The near-tie allowance compares two counts on the same near ties: the n a pass changed and the c the
reference's own noise (the FP16 cast) changed. A count is one draw: the FP16 cast's 3 could as well have been 6,
so "at most c" rejects passes as noisy as the cast about half the time. Under "the pass breaks near ties no
more often than the noise", n given n + c is at most Binomial(n + c, 1/2) (two Poisson counts, equal rates), and
the allowance is the largest n that this exact one-sided test does not reject at 0.05: 4 for c = 0, 9 for c = 3.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from laya_opt.core.prompt import QTYPES

from laya_opt.fidelity.checker import Outputs, QuestionOutput
from laya_opt.fidelity.metrics import DECISION_METRICS, FidelityReport, is_near_tie
from laya_opt.fidelity.metrics import compare as compare_drift

CONFIDENCE = 0.95       # Clopper-Pearson: the one-sided level of the upper bound
_BISECTION_STEPS = 200  # halves [0, 1] far below float64 resolution; the loop stops once the interval stops shrinking


# ---------------------------------------------------------------------------------------------------------------------
# Statistics


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed in float64 from log terms (exact enough for n up to ~10^6)."""
    if n < 0 or not 0.0 <= p <= 1.0:
        raise ValueError(f"binomial_cdf needs n >= 0 and p in [0, 1], got n={n}, p={p}")
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    if p == 0.0:
        return 1.0
    if p == 1.0:
        return 0.0
    i = np.arange(k + 1, dtype=np.float64)
    log_choose = math.lgamma(n + 1) - np.array([math.lgamma(x + 1) + math.lgamma(n - x + 1) for x in i])
    log_terms = log_choose + i * math.log(p) + (n - i) * math.log1p(-p)
    return min(1.0, math.fsum(np.exp(log_terms)))


def mcnemar_p(right_to_wrong: int, wrong_to_right: int) -> float:
    """One-sided exact McNemar p-value for a loss: P(X >= right_to_wrong), X ~ Binomial(discordant, 1/2).

    1.0 when nothing changed between right and wrong (no evidence of a loss).
    """
    if right_to_wrong < 0 or wrong_to_right < 0:
        raise ValueError(f"mcnemar_p needs counts >= 0, got {right_to_wrong} and {wrong_to_right}")
    discordant = right_to_wrong + wrong_to_right
    # P(X >= b) = P(X <= n - b) at p = 1/2: summed directly, with no 1 - (almost 1) cancellation.
    return binomial_cdf(discordant - right_to_wrong, discordant, 0.5)


def clopper_pearson_upper(changes: int, questions: int, confidence: float = CONFIDENCE) -> float:
    """One-sided upper confidence bound on a rate seen `changes` times in `questions` trials (Clopper-Pearson).

    The p at which P(X <= changes) = 1 - confidence: the beta quantile Beta(confidence; changes + 1,
    questions - changes), found by bisection on the binomial CDF (which falls as p rises).
    """
    if questions < 1 or not 0 <= changes <= questions:
        raise ValueError(f"clopper_pearson_upper needs 0 <= changes <= questions and questions >= 1, "
                         f"got {changes} in {questions}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    if changes == questions:
        return 1.0
    tail = 1.0 - confidence
    low, high = changes / questions, 1.0
    for _ in range(_BISECTION_STEPS):
        middle = (low + high) / 2
        if middle in (low, high):
            break
        if binomial_cdf(changes, questions, middle) > tail:
            low = middle
        else:
            high = middle
    return high


def near_tie_allowance(noise_changes: int, level: float = 0.05) -> int:
    """The most near-tie changes a pass may make before the exact conditional test says it breaks near ties
    more often than the reference's noise, which changed `noise_changes` of the same near ties: the largest n
    with P(X >= n) >= level, X ~ Binomial(n + noise_changes, 1/2)."""
    if isinstance(noise_changes, bool) or not isinstance(noise_changes, int) or noise_changes < 0:
        raise ValueError(f"near_tie_allowance needs a count of changes >= 0, got {noise_changes!r}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    allowed = 0
    # P(X >= n) = P(X <= c) for X ~ Binomial(n + c, 1/2) by symmetry; it falls as n grows.
    while binomial_cdf(noise_changes, allowed + 1 + noise_changes, 0.5) >= level:
        allowed += 1
    return allowed


# ---------------------------------------------------------------------------------------------------------------------
# Counting


OUTCOMES = ("right_to_wrong", "wrong_to_right", "wrong_to_other_wrong", "unlabelled")


@dataclass(frozen=True)
class ChangeCounts:
    """Questions of one kind (decisive or near tie) and how many of their decisions changed, by label outcome."""

    questions: int = 0
    labelled: int = 0
    right_to_wrong: int = 0
    wrong_to_right: int = 0
    wrong_to_other_wrong: int = 0
    unlabelled: int = 0

    @property
    def changes(self) -> int:
        return self.right_to_wrong + self.wrong_to_right + self.wrong_to_other_wrong + self.unlabelled

    def __add__(self, other: "ChangeCounts") -> "ChangeCounts":
        return ChangeCounts(*(a + b for a, b in zip(_values(self), _values(other))))


def _values(counts: ChangeCounts) -> tuple[int, ...]:
    return (counts.questions, counts.labelled, counts.right_to_wrong, counts.wrong_to_right,
            counts.wrong_to_other_wrong, counts.unlabelled)


@dataclass(frozen=True)
class Split:
    """Decisive and near-tie counts of one group of questions (all, or one question type)."""

    decisive: ChangeCounts = ChangeCounts()
    near_tie: ChangeCounts = ChangeCounts()

    @property
    def total(self) -> ChangeCounts:
        return self.decisive + self.near_tie

    @property
    def mcnemar_p(self) -> float:
        return mcnemar_p(self.total.right_to_wrong, self.total.wrong_to_right)

    @property
    def change_rate_upper(self) -> float:
        """95% upper bound on the rate of changed decisions (1.0 with no question)."""
        total = self.total
        return clopper_pearson_upper(total.changes, total.questions) if total.questions else 1.0


@dataclass(frozen=True)
class DecisionChanges:
    """Every changed decision of a candidate against a reference, split by margin and by question type."""

    overall: Split
    by_type: Mapping[str, Split] = field(default_factory=dict)
    changed_keys: tuple[str, ...] = ()     # the questions whose decision changed, in suite order

    def metrics(self) -> dict[str, float]:
        """The fixed-name aggregates gates read (metrics.DECISION_METRICS)."""
        split, total = self.overall, self.overall.total
        values = {"decision_changes": total.changes, "near_ties": split.near_tie.questions,
                  "right_to_wrong": total.right_to_wrong, "wrong_to_right": total.wrong_to_right,
                  "wrong_to_other_wrong": total.wrong_to_other_wrong, "unlabelled_changes": total.unlabelled,
                  "decisive_right_to_wrong": split.decisive.right_to_wrong,
                  "decisive_wrong_to_right": split.decisive.wrong_to_right,
                  "near_tie_right_to_wrong": split.near_tie.right_to_wrong,
                  "near_tie_wrong_to_right": split.near_tie.wrong_to_right,
                  "mcnemar_p": split.mcnemar_p, "change_rate_upper": split.change_rate_upper}
        return {name: float(values[name]) for name in DECISION_METRICS}

    def summary(self) -> dict:
        """Plain data for stages.jsonl: the counts (all questions and per type), McNemar's p, the bound, the proof."""
        def split(value: Split) -> dict:
            return {"decisive": asdict(value.decisive), "near_tie": asdict(value.near_tie),
                    "mcnemar_p": value.mcnemar_p, "change_rate_upper": value.change_rate_upper}

        return {**split(self.overall), "by_type": {qtype: split(value) for qtype, value in self.by_type.items()},
                "changed": list(self.changed_keys), "proof": self.proof()}

    def proof(self) -> str:
        """What the comparison proves about the rate of changed decisions, in one sentence."""
        total = self.overall.total
        if total.changes == 0:
            return (f"no decision changed in {total.questions} questions: the change rate is below "
                    f"{self.overall.change_rate_upper:.3g} at 95%")
        return (f"{total.changes} decision(s) changed in {total.questions} questions: the change rate is below "
                f"{self.overall.change_rate_upper:.3g} at 95%")


def reference_near_tie(reference: QuestionOutput) -> bool:
    """The reference decided by a top-two gap below NEAR_TIE_MARGIN (NaN gaps count as decisive, as in metrics)."""
    return is_near_tie(reference.probabilities)


def outcome(reference: QuestionOutput, candidate: QuestionOutput) -> str | None:
    """None when the decision stayed; else which of OUTCOMES the change was."""
    if reference.argmax == candidate.argmax and reference.argmax >= 0:
        return None
    label = reference.label_index
    if label is None:
        return "unlabelled"
    if reference.argmax == label:
        return "right_to_wrong"
    if candidate.argmax == label:
        return "wrong_to_right"
    return "wrong_to_other_wrong"


def _count(pairs: list[tuple[QuestionOutput, QuestionOutput]]) -> Split:
    tallies = {kind: dict.fromkeys(("questions", "labelled") + OUTCOMES, 0) for kind in ("decisive", "near_tie")}
    for reference, candidate in pairs:
        tally = tallies["near_tie" if reference_near_tie(reference) else "decisive"]
        tally["questions"] += 1
        tally["labelled"] += reference.label_index is not None
        change = outcome(reference, candidate)
        if change is not None:
            tally[change] += 1
    return Split(**{kind: ChangeCounts(**tally) for kind, tally in tallies.items()})


def decision_changes(reference: Outputs, candidate: Outputs) -> DecisionChanges:
    """Count every changed decision; the two sides must hold the same questions in the same order."""
    if reference.keys != candidate.keys:
        raise ValueError(f"decision_changes needs the same questions on both sides ({reference.identity} has "
                         f"{len(reference.keys)}, {candidate.identity} {len(candidate.keys)}, or their order differs)")
    pairs = list(zip(reference.questions, candidate.questions))
    for ref, cand in pairs:
        if ref.label_index != cand.label_index:
            raise ValueError(f"question {ref.key}: labels differ ({ref.label!r} vs {cand.label!r})")
    by_type = {qtype: _count([pair for pair in pairs if pair[0].type_name == qtype]) for qtype in QTYPES
               if any(pair[0].type_name == qtype for pair in pairs)}
    changed = tuple(ref.key for ref, cand in pairs if outcome(ref, cand) is not None)
    return DecisionChanges(overall=_count(pairs), by_type=by_type, changed_keys=changed)


def compare(reference: Outputs, candidate: Outputs) -> FidelityReport:
    """metrics.compare (drift, agreement, labels) with the decision changes and their metrics added."""
    report = compare_drift(reference, candidate)
    changes = decision_changes(reference, candidate)
    return replace(report, metrics={**report.metrics, **changes.metrics()}, decisions=changes)
