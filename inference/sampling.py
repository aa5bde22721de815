"""Token samplers: the verifiable seeded Gumbel-max sampler (for traces) and plain sampling (for chat).

The verifiable sampler is a pure function of (logits, seed, sample index, position, temperature, top_p),
so the network can replay a trace with one prefill and check that every token is the one this function
picks (see ``inference.replay`` and ``docs/sampling.md``). It is exactly this, in IEEE float64:

    GAMMA = 0x9E3779B97F4A7C15                        64-bit arithmetic is modulo 2**64
    mix64(z): z ^= z >> 30; z *= 0xBF58476D1CE4E5B9
              z ^= z >> 27; z *= 0x94D049BB133111EB
              z ^= z >> 31                           (the SplitMix64 finalizer)
    key(seed, i, t) = mix64(mix64(mix64(seed + GAMMA) ^ ((i + 1) * GAMMA)) ^ ((t + 1) * GAMMA)) >> 32
    mix32(x): x ^= x >> 16; x *= 0x7FEB352D
              x ^= x >> 15; x *= 0x846CA68B
              x ^= x >> 16                           (32-bit arithmetic, modulo 2**32: "lowbias32")
    u(seed, i, t, v) = (mix32(key(seed, i, t) + (v + 1) * 0x9E3779B9) + 0.5) / 2**32
    g(seed, i, t, v) = -log(-log(u))                 Gumbel noise, in [G_MIN, G_MAX] = [-3.1300, 22.8738]

``seed`` is the lease's seed, ``i`` the sample's index in its group (0..k-1), ``t`` the position of the
token in the completion (0 for the first generated token; the prompt is not counted), ``v`` a token id.
With ``x_v = float64(logit_v) / temperature`` (logits as llama.cpp returns them, float32), the token is

    argmax over v in N of  x_v + g(seed, i, t, v)        (ties: the smallest token id)

where N is the whole vocabulary when top_p >= 1, otherwise the nucleus: tokens sorted by logit
descending (ties by id ascending), the shortest prefix whose softmax(x) mass reaches top_p.
temperature == 0 is greedy: argmax of the logits, smallest id on ties, no noise.

Because g never exceeds G_MAX, a token whose x_v is more than G_MAX below the best score found so far
cannot win; the sampler hashes only tokens within that reach, and computes the float noise only for the
few that can still win (see ``_candidates``). That is exact, not an approximation. The per-token hash is
32-bit so that numpy runs it in SIMD lanes; the 64-bit key keeps (seed, sample, position) streams apart.
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
# Tokens more than _NEAR below the best score need noise above _NEAR to win: u > exp(-exp(-_NEAR)).
# _LUCKY is that bound on the 32-bit integer, lowered by 2 so that rounding can only let more through.
_NEAR = 8.0
_HEAD = 64  # the nucleus is first looked for among this many most likely tokens
_LUCKY = np.uint32(int(math.exp(-math.exp(-_NEAR)) * 2**32) - 2)

FloatArray = npt.NDArray[np.floating]


def _mix(z: int) -> int:
    z &= _MASK
    z = ((z ^ (z >> 30)) * _M1) & _MASK
    z = ((z ^ (z >> 27)) * _M2) & _MASK
    return z ^ (z >> 31)


def noise_base(seed: int, sample: int, position: int) -> int:
    """``key(seed, i, t)``: the 32-bit key of one (seed, sample, position) noise stream."""
    k = _mix(seed + _GAMMA)
    k = _mix(k ^ (((sample + 1) * _GAMMA) & _MASK))
    return _mix(k ^ (((position + 1) * _GAMMA) & _MASK)) >> 32


def _mix32(x: int) -> int:
    x &= 0xFFFFFFFF
    x = ((x ^ (x >> 16)) * 0x7FEB352D) & 0xFFFFFFFF
    x = ((x ^ (x >> 15)) * 0x846CA68B) & 0xFFFFFFFF
    return x ^ (x >> 16)


def gumbel_noise_reference(seed: int, sample: int, position: int, token: int) -> float:
    """The documented noise for one token, in plain Python integers (the specification)."""
    h = _mix32(noise_base(seed, sample, position) + (token + 1) * 0x9E3779B9)
    return -math.log(-math.log((h + 0.5) * _U_SCALE))


_PHI32 = np.uint32(0x9E3779B9)
_A32 = np.uint32(0x7FEB352D)
_B32 = np.uint32(0x846CA68B)
_S15, _S16 = np.uint32(15), np.uint32(16)


_TOKEN_TERMS: dict[int, npt.NDArray[np.uint32]] = {}


def _token_terms(n: int) -> npt.NDArray[np.uint32]:
    """``(v + 1) * 0x9E3779B9`` (mod 2**32) for v < n, computed once per vocabulary size."""
    terms = _TOKEN_TERMS.get(n)
    if terms is None:
        terms = np.arange(1, n + 1, dtype=np.uint32)
        terms *= _PHI32
        terms.flags.writeable = False
        _TOKEN_TERMS[n] = terms
    return terms


def _hash32(base: int, tokens: npt.NDArray[np.integer], n_vocab: int | None = None) -> npt.NDArray[np.uint32]:
    """``mix32(key + (v + 1) * 0x9E3779B9)`` for many tokens (uint32 arithmetic wraps).

    With ``n_vocab`` (every token below it), the per-token term comes from a table instead of two passes.
    """
    if n_vocab is not None:
        x = _token_terms(n_vocab)[tokens]
    else:
        x = tokens.astype(np.uint32)
        x += np.uint32(1)
        x *= _PHI32
    x += np.uint32(base)
    x ^= x >> _S16
    x *= _A32
    x ^= x >> _S15
    x *= _B32
    x ^= x >> _S16
    return x


def gumbel_noise(base: int, tokens: npt.NDArray[np.integer]) -> npt.NDArray[np.float64]:
    """Vectorised ``g`` for many token ids sharing one key (``noise_base``)."""
    u = (_hash32(base, tokens).astype(np.float64) + 0.5) * _U_SCALE
    return -np.log(-np.log(u))


def log_softmax_at(
    logits: FloatArray, token: int, temperature: float = 1.0, *, top: float | None = None
) -> float:
    """log softmax(logits / temperature)[token], computed stably (temperature 0 counts as 1).

    ``top`` may pass the row's largest logit when the caller already knows it. The normaliser is a float32
    pairwise sum of at most 2**17 terms in (0, 1], accurate to about 1e-6 relative: a logprob to ~1e-6.
    """
    inv_t = 1.0 / temperature if temperature > 0 else 1.0
    m = float(logits.max()) if top is None else top
    scaled = np.subtract(logits, np.float32(m), dtype=np.float32)
    if inv_t != 1.0:
        scaled *= np.float32(inv_t)
    np.exp(scaled, out=scaled)
    z = float(scaled.sum())
    return (float(logits[token]) - m) * inv_t - math.log(z)


def _nucleus(
    logits: FloatArray, band: npt.NDArray[np.intp], inv_t: float, top_p: float
) -> npt.NDArray[np.intp]:
    """The tokens of ``band`` (every token above some logit) that lie in the top-p nucleus.

    Usually the nucleus ends within the 64 most likely tokens; then only those are sorted. When it does
    not, or a tie straddles that boundary, the whole band is sorted: the answer is the same either way.
    """
    x = logits.astype(np.float64) * inv_t
    m = float(x.max())
    total = float(np.exp(x - m).sum())
    head = _HEAD if band.size > _HEAD else band.size
    if head < band.size:
        part = band[np.argpartition(-logits[band], head - 1)[:head]]
        order = part[np.lexsort((part, -logits[part]))]  # logit descending, then id ascending
        cut = int(np.searchsorted(np.cumsum(np.exp(x[order] - m) / total), top_p)) + 1
        if cut < head and logits[order[cut - 1]] > logits[order[head - 1]]:
            return np.sort(order[:cut])
    order = band[np.argsort(-logits[band], kind="stable")]
    cut = int(np.searchsorted(np.cumsum(np.exp(x[order] - m) / total), top_p)) + 1
    return np.sort(order[:cut])


def _scores(
    logits: FloatArray, cand: npt.NDArray[np.intp], inv_t: float, base: int
) -> npt.NDArray[np.float64]:
    return logits[cand].astype(np.float64) * inv_t + gumbel_noise(base, cand)


def _candidates(logits: FloatArray, inv_t: float, base: int, top_p: float) -> npt.NDArray[np.intp]:
    """Every token that can still win, found without the float noise of the whole vocabulary.

    With S the top-logit token's score, a token can win only if x_v + g_v >= S, so only the *band*
    x_v >= S - G_MAX is looked at. Inside it, a token with x_v < S - _NEAR can win only if its noise
    exceeds _NEAR, i.e. only if its hash's 32 bits exceed _LUCKY: an integer test. The near tokens and the
    few lucky ones get the full score. Exact: no token that could win is left out. Returned in id order.
    """
    top = int(np.argmax(logits))
    best = float(logits[top]) * inv_t - math.log(
        -math.log((_mix32(base + (top + 1) * 0x9E3779B9) + 0.5) * _U_SCALE)
    )
    band = np.flatnonzero(logits >= np.float32((best - G_MAX - _PRUNE_MARGIN) / inv_t - 1e-4))
    if top_p < 1.0:
        band = _nucleus(logits, band, inv_t, top_p)
    keep = _hash32(base, band, logits.shape[0]) > _LUCKY
    keep |= logits[band] >= np.float32((best - _NEAR - _PRUNE_MARGIN) / inv_t - 1e-4)
    return band[keep]


def sample_gumbel(
    logits: FloatArray, *, seed: int, sample: int, position: int, temperature: float, top_p: float = 1.0
) -> int:
    """The token the documented verifiable sampler picks from one row of float32 logits."""
    if temperature <= 0:
        return int(np.argmax(logits))
    inv_t = 1.0 / temperature
    base = noise_base(seed, sample, position)
    cand = _candidates(logits, inv_t, base, top_p)
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

    For greedy (temperature 0) it is the logit gap to the argmax. With top_p < 1, a token outside the
    nucleus also adds how far (in x units) it lies below the nucleus' smallest member, so that a token
    the sampler could never pick cannot pass for an exact match.
    """
    if temperature <= 0:
        return float(logits.max()) - float(logits[token])
    inv_t = 1.0 / temperature
    base = noise_base(seed, sample, position)
    cand = _candidates(logits, inv_t, base, top_p)
    best = float(_scores(logits, cand, inv_t, base).max())
    own = float(_scores(logits, np.array([token], dtype=np.intp), inv_t, base)[0])
    gap = max(0.0, best - own)
    if top_p < 1.0 and token not in cand:
        band = np.flatnonzero(logits >= logits[token])
        members = _nucleus(logits, band, inv_t, top_p)
        if token not in members:
            floor = float(logits[members].min()) if members.size else float(logits.max())
            gap += max(float(np.finfo(np.float32).eps), (floor - float(logits[token])) * inv_t)
    return gap


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
