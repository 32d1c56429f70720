"""The word matcher's terms per language: what a training-only wording must not say, so that its answer is
carried by free words, not by a cue the lexical baseline (or a model that learnt its cues) already reads."""
from __future__ import annotations

from laya_opt.suites.synthetic import lexicon as lx


def lexical_terms(lang: str) -> list[str]:
    cues = [cue for pool in (lx.DEPARTMENTS, lx.PRODUCTS) for concept in pool.values() for cue in concept[lang].cues]
    return cues + list(lx.URGENCY[lang]) + list(lx.MOOD[lang])
