"""Replay a trace: check that its tokens are the ones the documented sampler picks from the claimed model.

One prefill over prompt + completion gives the model's logits at every completion position; at each one
the verifiable sampler's scores are recomputed with the trace's seed and sample index, and the *gap*
(best perturbed score minus the submitted token's) is recorded. An honest trace has gap 0 at almost every
position and small gaps elsewhere, because prefill-time and decode-time logits differ slightly (about 0.3
on the top logits here); a wrong seed or a forced answer gives large gaps. See ``docs/sampling.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from inference.sampling import gumbel_gap, log_softmax_at
from protocol import task_seed  # re-exported: the per-task seed a trace is sampled and replayed with

if TYPE_CHECKING:
    from inference.engine import Engine
    from protocol.models import Task

__all__ = [
    "ReplayResult",
    "replay_tokens",
    "task_messages",
    "task_seed",
    "DEFAULT_MAX_GAP",
    "DEFAULT_MIN_MATCH",
]

# Thresholds measured on SmolLM2-135M Q4_1 on a CPU (see docs/sampling.md): honest traces stay well inside.
DEFAULT_MAX_GAP = 1.0
DEFAULT_MIN_MATCH = 0.95


@dataclass
class ReplayResult:
    gaps: list[float]
    logprobs: list[float]  # prefill-time log softmax(logits / T) of each submitted token (T=1 for greedy)

    @property
    def positions(self) -> int:
        return len(self.gaps)

    @property
    def max_gap(self) -> float:
        return max(self.gaps, default=0.0)

    @property
    def match_rate(self) -> float:
        """Share of positions where the submitted token is the sampler's pick (gap exactly 0)."""
        return sum(1 for g in self.gaps if g == 0.0) / len(self.gaps) if self.gaps else 1.0

    def honest(self, *, max_gap: float = DEFAULT_MAX_GAP, min_match: float = DEFAULT_MIN_MATCH) -> bool:
        """The node's acceptance rule: the sampler's pick almost everywhere, and close everywhere."""
        return self.match_rate >= min_match and self.max_gap <= max_gap


def replay_tokens(
    engine: Engine,
    prompt_tokens: Sequence[int],
    token_ids: Sequence[int],
    *,
    seed: int,
    sample: int,
    temperature: float,
    top_p: float = 1.0,
) -> ReplayResult:
    """Gaps and recomputed logprobs of ``token_ids`` after ``prompt_tokens``, from one prefill."""
    prompt = list(prompt_tokens)
    completion = list(token_ids)
    if not completion:
        return ReplayResult(gaps=[], logprobs=[])
    n_prompt = len(prompt)
    gaps = np.zeros(len(completion))
    logprobs = np.zeros(len(completion))

    def at(pos: int, row: np.ndarray) -> None:
        t = pos - (n_prompt - 1)
        token = completion[t]
        gaps[t] = gumbel_gap(
            row, token, seed=seed, sample=sample, position=t, temperature=temperature, top_p=top_p
        )
        logprobs[t] = log_softmax_at(row, token, temperature)

    # The last completion token is never an input: nothing is predicted after it.
    engine.scan_logits(prompt + completion[:-1], n_prompt - 1, at)
    return ReplayResult(gaps=gaps.tolist(), logprobs=logprobs.tolist())


def task_messages(task: Task) -> list[dict[str, str]]:
    """The chat messages a task is sampled from (client and node must build them the same way)."""
    messages = [{"role": "system", "content": task.system_prompt}] if task.system_prompt else []
    messages.append({"role": "user", "content": task.prompt})
    return messages
