"""Question validation, prompt rendering and piecewise tokenization (spec §6-§7)."""
from __future__ import annotations

from dataclasses import dataclass

QTYPES = ("choice", "score", "noul")


@dataclass(frozen=True)
class PreparedQuestion:
    """Everything the model and the decoder need for one question; ids are unpadded."""

    qid: str
    type_name: str          # "choice" | "score" | "noul"
    qtype: int              # 0 choice, 1 score, 2 noul
    ids: tuple[int, ...]    # [CLS] header [SEP] [MASK] opt ... [SEP] state [SEP], <= max_len
    markers: tuple[int, ...]  # position of each option marker in ids, one per option
    option_keys: tuple[str, ...]  # answer keys: str(label) (choice), "0".."k-1" (score), ("false", "true") (noul)
    legend: tuple = ()      # score only: raw criterion values, level 0 first

    @property
    def length(self) -> int:
        return len(self.ids)
