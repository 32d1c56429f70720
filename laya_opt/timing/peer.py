"""The upstream PyTorch runtime (`laya`) as a peer for head-to-head timing: optional, never required.

`UpstreamPeer` wraps one upstream `Agent` and offers what the benchmark harness and the profiler
ask of a runtime: an end-to-end call (`agent.predict`), a forward-only call on batches collated
beforehand from upstream's own token ids (`agent._infer`, synchronised), the prepared token ids
(to check that both runtimes feed the model the same tokens) and a phase split it cannot make
(upstream has no clock; only the total is given). torch is imported only when a peer is built.
"""
from __future__ import annotations

import importlib.util
import os
import time
from dataclasses import dataclass
from typing import Any, Callable

from laya_opt.util.system import package_version

UPSTREAM = "laya"
BACKENDS = ("eager", "compile")


def upstream_problem() -> str | None:
    """Why the upstream runtime cannot be used here (None when it can)."""
    if importlib.util.find_spec(UPSTREAM) is None:
        return "the upstream `laya` package is not installed (pip install laya; it needs torch and transformers)"
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed"
    import torch

    if not torch.cuda.is_available():
        return "torch sees no CUDA device (upstream's compile backend is CUDA-only)"
    return None


def upstream_version() -> str | None:
    return package_version(UPSTREAM)


@dataclass(frozen=True, eq=False)
class UpstreamPeer:
    agent: Any
    backend: str
    load_s: float                  # load time, compile warm-up included

    def predict(self, state: Any, questions: dict) -> dict:
        return self.agent.predict(state, questions)

    def items(self, state: Any, questions: dict) -> list[dict]:
        """Upstream's own prepared rows: {"ids", "markers", "qtype", ...} per question, in order."""
        ids = list(questions)
        internal = {qid: self.agent._to_internal(questions[qid]) for qid in ids}
        return self.agent._encode_state(state, ids, internal)

    def model_inputs(self, state: Any, questions: dict) -> list[tuple[tuple[int, ...], tuple[int, ...], int]]:
        return [(tuple(item["ids"]), tuple(item["markers"]), int(item["qtype"]))
                for item in self.items(state, questions)]

    def _batch(self, state: Any, questions: dict) -> dict:
        from laya.common import collate_items
        import torch

        batch = collate_items([self.items(state, questions)], self.agent.tok.pad_token_id)  # a list of groups
        return {key: value.to(self.agent.device) if isinstance(value, torch.Tensor) else value
                for key, value in batch.items()}

    def bench_call(self, mode: str, workload) -> Callable[[int], int]:
        """Request i of the workload, end to end or forward-only on a pre-collated, on-device batch."""
        import torch

        requests = workload.requests
        if mode == "end_to_end":
            def call(index: int) -> int:
                state, questions = requests[index % len(requests)]
                return len(self.agent.predict(state, questions)["answers"])

            return call
        batches = [(self._batch(state, questions), len(questions)) for state, questions in requests]

        def forward(index: int) -> int:
            batch, count = batches[index % len(batches)]
            with torch.no_grad():
                self.agent._infer(batch)
            torch.cuda.synchronize()
            return count

        return forward

    def phase_split(self, workload, requests: int = 50) -> dict:
        call = self.bench_call("end_to_end", workload)
        call(0)
        samples = []
        for index in range(requests):
            started = time.perf_counter()
            call(index)
            samples.append(time.perf_counter() - started)
        samples.sort()
        return {"requests": requests, "phases_ms": {}, "total_p50_ms": samples[len(samples) // 2] * 1e3,
                "note": "upstream runs as one call; no phase split"}


def load_upstream(checkpoint_dir, backend: str) -> UpstreamPeer:
    """An upstream agent on CUDA with `backend` (eager or compile, whose warm-up runs at load)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    os.environ.setdefault("LAYA_CUDA_AMP", "fp16")
    import laya

    started = time.perf_counter()
    agent = laya.load(str(checkpoint_dir), device="cuda", backend=backend)
    return UpstreamPeer(agent=agent, backend=backend, load_s=time.perf_counter() - started)
