"""A cache of prepared question prefixes, with the misses of a request tokenized in one batch (exact, spec §7.5).

A question's prefix `[CLS] header [SEP] [MASK] opt ... [SEP]` depends only on the question and the
tokenizer, so repeated rubrics (the same questions over many states) are tokenized once. Keys hold
what the spec lists: tokenizer identity, CLS/SEP/mask ids and mask string, head_max_len, type,
rendered instructions and the tuple of rendered option texts (so noul label sets differ). Only ids
are cached, never encoder states or answers. Questions not in the cache are tokenized together
through `TextCodec.encode_many`, each piece on its own, so ids are byte-identical to the reference
preparer; the state is tokenized per request as before.
"""
from __future__ import annotations

import functools
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Sequence

from laya_opt.passes.contract import PassSpec
from laya_opt.core.prompt import QuestionPrefix, QuestionSpec, build_prefix, prefix_texts, prepare_request
from laya_opt.util.schema import checked

NAME = "prefix_cache"


@dataclass(frozen=True)
@checked
class PrefixCacheConfig:
    """Settings of prefix_cache.

    Attributes:
        capacity: prepared question prefixes kept; the least recently used goes first
    """
    capacity: int = field(default=128, metadata={"min": 1})   # prefixes kept (least recently used goes first)


@dataclass(frozen=True)
class _Pieces:
    """A codec stand-in whose `encode` answers from ids tokenized beforehand (and the real special ids)."""

    codec: object
    encoded: dict

    def __getattr__(self, name):
        return getattr(self.codec, name)

    def encode(self, text: str) -> list[int]:
        return self.encoded[text]


def cached_prefixes(capacity: int, stats: dict):
    cache: OrderedDict = OrderedDict()

    def prefixes(specs: Sequence[QuestionSpec], codec, head_max_len: int) -> list[QuestionPrefix]:
        tokenizer = (id(codec.tokenizer), codec.cls_id, codec.sep_id, codec.mask_id, codec.mask_token, head_max_len)
        keys = [(tokenizer, spec.key) for spec in specs]
        missing = {key: spec for key, spec in zip(keys, specs) if key not in cache}
        if missing:
            texts = sorted({text for spec in missing.values() for header, options in
                            [prefix_texts(spec, codec.mask_token)] for text in (header, *options)})
            pieces = _Pieces(codec, dict(zip(texts, codec.encode_many(texts))))
            for key, spec in missing.items():
                cache[key] = build_prefix(spec, pieces, head_max_len)
                if len(cache) > capacity:
                    cache.popitem(last=False)
                    stats["evictions"] += 1
        stats["misses"] += len(missing)
        stats["hits"] += len(keys) - len(missing)
        for key in keys:
            if key in cache:
                cache.move_to_end(key)
        return [cache[key] if key in cache else build_prefix(spec, codec, head_max_len)
                for key, spec in zip(keys, specs)]

    return prefixes


def apply(runtime, config: PrefixCacheConfig, data):
    stats = {"hits": 0, "misses": 0, "evictions": 0}  # live counters, read by reports
    preparer = functools.partial(prepare_request, prefixes=cached_prefixes(config.capacity, stats))
    return runtime.replace(preparer=preparer), {"capacity": config.capacity, "stats": stats}


PASS = PassSpec(name=NAME, config_type=PrefixCacheConfig, apply=apply, exact=True,
                description="prepared question prefixes cached (LRU), misses tokenized in one batch",
                replaces=frozenset({"preparer"}))
