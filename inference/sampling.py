"""Token samplers: the verifiable seeded Gumbel-max sampler (for traces) and plain sampling (for chat).

The verifiable sampler is a pure function of (logits, seed, sample index, position, temperature, top_p),
so the network can replay a trace with one prefill and check that every token is the one this function
picks (see ``inference.replay`` and ``docs/sampling.md``). It is exactly this, in IEEE float64:

    GAMMA = 0x9E3779B97F4A7C15                       all integer arithmetic is modulo 2**64
    mix(z):  z ^= z >> 30; z *= 0xBF58476D1CE4E5B9
             z ^= z >> 27; z *= 0x94D049BB133111EB
             z ^= z >> 31                           (the SplitMix64 finalizer)
    base(seed, i, t) = mix(mix(mix(seed + GAMMA) ^ ((i + 1) * GAMMA)) ^ ((t + 1) * GAMMA))
    u(seed, i, t, v) = ((mix(base(seed, i, t) + (v + 1) * GAMMA) >> 32) + 0.5) / 2**32
    g(seed, i, t, v) = -log(-log(u))                 Gumbel noise, in [G_MIN, G_MAX] = [-3.1300, 22.8738]

``seed`` is the lease's seed, ``i`` the sample's index in its group (0..k-1), ``t`` the position of the
token in the completion (0 for the first generated token; the prompt is not counted), ``v`` a token id.
With ``x_v = float64(logit_v) / temperature`` (logits as llama.cpp returns them, float32), the token is

    argmax over v in N of  x_v + g(seed, i, t, v)        (ties: the smallest token id)

where N is the whole vocabulary when top_p >= 1, otherwise the nucleus: tokens sorted by logit
descending (ties by id ascending), the shortest prefix whose softmax(x) mass reaches top_p.
temperature == 0 is greedy: argmax of the logits, smallest id on ties, no noise.

Because g never exceeds G_MAX, a token whose x_v is more than G_MAX below the best score found so far
cannot win; the sampler draws noise only for tokens within that reach, which is exact, not approximate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = [
    "G_MAX",
    "G_MIN",
    "gumbel_noise",
    "gumbel_noise_reference",
    "noise_base",
    "sample_gumbel",
    "gumbel_gap",
    "log_softmax_at",
    "PlainSampler",
]

_MASK = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
_U_SCALE = 2.0**-32
G_MAX = -math.log(-math.log((2**32 - 0.5) * _U_SCALE))
G_MIN = -math.log(-math.log(0.5 * _U_SCALE))
# Guard against the last-ulp differences of vectorised log: prune only tokens clearly out of reach.
_PRUNE_MARGIN = 1e-6

FloatArray = npt.NDArray[np.floating]


def _mix(z: int) -> int:
    z &= _MASK
    z = ((z ^ (z >> 30)) * _M1) & _MASK
    z = ((z ^ (z >> 27)) * _M2) & _MASK
    return z ^ (z >> 31)


def noise_base(seed: int, sample: int, position: int) -> int:
    """The per-(seed, sample, position) key of the noise stream."""
    k = _mix(seed + _GAMMA)
    k = _mix(k ^ (((sample + 1) * _GAMMA) & _MASK))
    return _mix(k ^ (((position + 1) * _GAMMA) & _MASK))


def gumbel_noise_reference(seed: int, sample: int, position: int, token: int) -> float:
    """The documented noise for one token, in plain Python integers (the specification)."""
    h = _mix(noise_base(seed, sample, position) + (token + 1) * _GAMMA)
    u = ((h >> 32) + 0.5) * _U_SCALE
    return -math.log(-math.log(u))


_GAMMA_U = np.uint64(_GAMMA)
_M1_U = np.uint64(_M1)
_M2_U = np.uint64(_M2)
_S30, _S27, _S31, _S32 = (np.uint64(s) for s in (30, 27, 31, 32))


def gumbel_noise(base: int, tokens: npt.NDArray[np.integer]) -> npt.NDArray[np.float64]:
    """Vectorised ``g`` for many token ids sharing one ``noise_base`` (uint64 arithmetic wraps)."""
    z = (tokens.astype(np.uint64) + np.uint64(1)) * _GAMMA_U + np.uint64(base)
    z ^= z >> _S30
    z *= _M1_U
    z ^= z >> _S27
    z *= _M2_U
    z ^= z >> _S31
    u = ((z >> _S32).astype(np.float64) + 0.5) * _U_SCALE
    return -np.log(-np.log(u))


def log_softmax_at(logits: FloatArray, token: int, temperature: float = 1.0) -> float:
    """log softmax(logits / temperature)[token], computed stably (temperature 0 counts as 1)."""
    inv_t = 1.0 / temperature if temperature > 0 else 1.0
    m = float(logits.max())
    z = float(np.exp((logits - np.float32(m)) * np.float32(inv_t)).sum(dtype=np.float64))
    return (float(logits[token]) - m) * inv_t - math.log(z)


def _nucleus(
    logits: FloatArray, cand: npt.NDArray[np.intp], inv_t: float, top_p: float
) -> npt.NDArray[np.intp]:
    """The candidates that lie in the top-p nucleus (candidates always contain the nucleus' head)."""
    x = logits.astype(np.float64) * inv_t
    m = float(x.max())
    total = float(np.exp(x - m).sum())
    order = cand[np.argsort(-logits[cand], kind="stable")]
    probs = np.exp(x[order] - m) / total
    cut = int(np.searchsorted(np.cumsum(probs), top_p)) + 1
    return np.sort(order[:cut])


def _scores(
    logits: FloatArray, cand: npt.NDArray[np.intp], inv_t: float, base: int
) -> npt.NDArray[np.float64]:
    return logits[cand].astype(np.float64) * inv_t + gumbel_noise(base, cand)


def _candidates(logits: FloatArray, inv_t: float, base: int) -> npt.NDArray[np.intp]:
    top = int(np.argmax(logits))
    best = float(np.float64(logits[top]) * inv_t + gumbel_noise(base, np.array([top]))[0])
    threshold = (best - G_MAX - _PRUNE_MARGIN) / inv_t
    return np.flatnonzero(logits >= np.float32(threshold) - np.float32(1e-4))


def sample_gumbel(
    logits: FloatArray, *, seed: int, sample: int, position: int, temperature: float, top_p: float = 1.0
) -> int:
    """The token the documented verifiable sampler picks from one row of float32 logits."""
    if temperature <= 0:
        return int(np.argmax(logits))
    inv_t = 1.0 / temperature
    base = noise_base(seed, sample, position)
    cand = _candidates(logits, inv_t, base)
    if top_p < 1.0:
        cand = _nucleus(logits, cand, inv_t, top_p)
    return int(cand[int(np.argmax(_scores(logits, cand, inv_t, base)))])


def gumbel_gap(
    logits: FloatArray,
    token: int,
    *,
    seed: int,
    sample: int,
    position: int,
    temperature: float,
    top_p: float = 1.0,
) -> float:
    """Best perturbed score minus ``token``'s, under the documented sampler (0.0 when ``token`` wins).

    For greedy (temperature 0) it is the logit gap to the argmax.
    """
    if temperature <= 0:
        return float(logits.max()) - float(logits[token])
    inv_t = 1.0 / temperature
    base = noise_base(seed, sample, position)
    cand = _candidates(logits, inv_t, base)
    if top_p < 1.0:
        cand = _nucleus(logits, cand, inv_t, top_p)
    best = float(_scores(logits, cand, inv_t, base).max())
    own = float(_scores(logits, np.array([token], dtype=np.intp), inv_t, base)[0])
    return max(0.0, best - own)


@dataclass
class PlainSampler:
    """Ordinary temperature / top-k / top-p / min-p sampling for chat (not replayable by the network)."""

    temperature: float = 0.8
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    seed: int | None = None

    def __post_init__(self) -> None:
        self._rng = np.random.default_rng(self.seed)

    def sample(self, logits: FloatArray) -> int:
        """Draw one token id from one row of logits."""
        if self.temperature <= 0:
            return int(np.argmax(logits))
        k = self.top_k if 0 < self.top_k < logits.shape[0] else logits.shape[0]
        idx = np.argpartition(-logits, k - 1)[:k] if k < logits.shape[0] else np.arange(logits.shape[0])
        idx = idx[np.argsort(-logits[idx], kind="stable")]
        x = logits[idx].astype(np.float64) / self.temperature
        p = np.exp(x - x[0])
        p /= p.sum()
        keep = p >= self.min_p * p[0]
        if self.top_p < 1.0:
            keep &= np.concatenate(([True], np.cumsum(p)[:-1] < self.top_p))
        p = np.where(keep, p, 0.0)
        return int(idx[self._rng.choice(len(idx), p=p / p.sum())])
