"""Length-sorted batching under a question cap and a padded-token budget (spec §12.4).

Replaces the batch planner: questions are sorted by prepared length (stable, so equal lengths keep the
caller's order) and cut into consecutive groups of at most `max_questions` rows and `token_budget`
padded tokens (B · L, L the longest row). The runtime scatters every row back to its caller index, and
the model is padding-invariant per row, so answers and model inputs are unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from laya_opt.core.batching import Planner
from laya_opt.passes.contract import PassSpec
from laya_opt.util.schema import checked
from laya_opt.core.prompt import PreparedQuestion

NAME = "length_sorted_batching"


@dataclass(frozen=True)
@checked
class LengthSortedBatchingConfig:
    """Settings of length_sorted_batching.

    Attributes:
        max_questions: questions (rows) per forward
        token_budget: padded tokens (rows x padded length) per forward; a longer single question runs alone
    """
    max_questions: int = field(default=16, metadata={"min": 1})    # rows per forward
    # padded tokens (B · L) per forward; a longer single question runs alone
    token_budget: int = field(default=8192, metadata={"min": 1})


def sorted_groups(lengths: Sequence[int], max_questions: int, token_budget: int) -> list[tuple[int, ...]]:
    """Indices sorted by length (stable), grouped greedily; ascending order makes the newest row the longest."""
    order = sorted(range(len(lengths)), key=lambda index: lengths[index])
    groups: list[tuple[int, ...]] = []
    current: list[int] = []
    for index in order:
        rows = len(current) + 1
        if current and (rows > max_questions or rows * lengths[index] > token_budget):
            groups.append(tuple(current))
            current = []
        current.append(index)
    if current:
        groups.append(tuple(current))
    return groups


def length_sorted_planner(config: LengthSortedBatchingConfig) -> Planner:
    def plan(items: Sequence[PreparedQuestion]) -> list[tuple[int, ...]]:
        return sorted_groups([item.length for item in items], config.max_questions, config.token_budget)

    plan.description = (f"length-sorted, max_questions={config.max_questions}, "
                        f"token_budget={config.token_budget}")
    return plan


def apply(runtime, config: LengthSortedBatchingConfig, data):
    report = {"max_questions": config.max_questions, "token_budget": config.token_budget,
              "replaced_planner": getattr(runtime.planner, "description", repr(runtime.planner))}
    return runtime.replace(planner=length_sorted_planner(config)), report


PASS = PassSpec(name=NAME, config_type=LengthSortedBatchingConfig, apply=apply, exact=True,
                description="batches questions by sorted length under a question cap and a padded-token budget",
                replaces=frozenset({"planner"}))
