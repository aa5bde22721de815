"""The verifiable sampler is exactly its documented function (no model needed here)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from inference.sampling import (
    G_MAX,
    G_MIN,
    PlainSampler,
    _hash32,
    _mix32,
    gumbel_gap,
    gumbel_noise,
    gumbel_noise_reference,
    noise_base,
    sample_gumbel,
)


def brute_force(
    logits: np.ndarray, seed: int, sample: int, position: int, temperature: float, top_p: float = 1.0
) -> int:
    """The docstring's definition, computed over the whole vocabulary with the scalar reference noise."""
    if temperature == 0:
        return int(np.argmax(logits))
    x = logits.astype(np.float64) / temperature
    allowed = np.arange(len(logits))
    if top_p < 1.0:
        order = np.lexsort((np.arange(len(logits)), -logits))
        p = np.exp(x - x.max())
        p /= p.sum()
        cut = int(np.searchsorted(np.cumsum(p[order]), top_p)) + 1
        allowed = np.sort(order[:cut])
    scores = [x[v] + gumbel_noise_reference(seed, sample, position, int(v)) for v in allowed]
    return int(allowed[int(np.argmax(scores))])


def test_vectorised_noise_equals_the_reference() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        seed, sample, pos = int(rng.integers(0, 2**63)), int(rng.integers(0, 64)), int(rng.integers(0, 32768))
        tokens = rng.integers(0, 200_000, size=50)
        base = noise_base(seed, sample, pos)
        ints = [_mix32(base + (int(t) + 1) * 0x9E3779B9) for t in tokens]
        assert _hash32(base, tokens).tolist() == ints  # the integer part is bit-exact
        fast = gumbel_noise(base, tokens)
        ref = [gumbel_noise_reference(seed, sample, pos, int(t)) for t in tokens]
        # numpy's SIMD log and libm's may differ in the last bit; replay tolerates far larger gaps.
        assert np.allclose(fast, ref, rtol=0, atol=1e-12)


def test_noise_stays_within_its_bounds_and_differs_by_key() -> None:
    g = gumbel_noise(noise_base(1, 0, 0), np.arange(200_000))
    assert g.min() >= G_MIN and g.max() <= G_MAX
    assert abs(g.mean() - 0.5772) < 0.01  # Euler–Mascheroni: the mean of a standard Gumbel
    other = gumbel_noise(noise_base(1, 1, 0), np.arange(1000))
    assert not np.allclose(g[:1000], other)
    assert math.isclose(G_MAX, 33 * math.log(2), rel_tol=1e-6)


@pytest.mark.parametrize("temperature", [0.0, 0.3, 0.8, 1.0, 2.0])
def test_pruned_sampler_equals_brute_force(temperature: float) -> None:
    rng = np.random.default_rng(1)
    for trial in range(12):
        logits = (rng.normal(0, 3, size=3000) + rng.normal(0, 5) * (rng.random(3000) < 0.01)).astype(
            np.float32
        )
        got = sample_gumbel(logits, seed=trial, sample=trial % 4, position=trial * 7, temperature=temperature)
        assert got == brute_force(logits, trial, trial % 4, trial * 7, temperature)


@pytest.mark.parametrize("top_p", [0.5, 0.9, 0.99])
def test_top_p_nucleus_equals_brute_force(top_p: float) -> None:
    rng = np.random.default_rng(2)
    for trial in range(12):
        logits = rng.normal(0, 2, size=2000).astype(np.float32)
        got = sample_gumbel(logits, seed=99, sample=1, position=trial, temperature=0.7, top_p=top_p)
        assert got == brute_force(logits, 99, 1, trial, 0.7, top_p)


def test_sampled_frequencies_follow_the_softmax() -> None:
    logits = np.array([2.0, 1.0, 0.0, -1.0], dtype=np.float32)
    draws = (
        np.bincount(
            [sample_gumbel(logits, seed=5, sample=0, position=t, temperature=1.0) for t in range(20_000)],
            minlength=4,
        )
        / 20_000
    )
    expected = np.exp(logits) / np.exp(logits).sum()
    assert np.abs(draws - expected).max() < 0.015


def test_gap_is_zero_for_the_pick_and_positive_for_others() -> None:
    rng = np.random.default_rng(3)
    logits = rng.normal(0, 2, size=500).astype(np.float32)
    kw = dict(seed=11, sample=2, position=3, temperature=0.9)
    pick = sample_gumbel(logits, **kw)
    assert gumbel_gap(logits, pick, **kw) == 0.0
    other = (pick + 1) % 500
    assert gumbel_gap(logits, other, **kw) > 0.0
    assert gumbel_gap(logits, int(np.argmax(logits)), **{**kw, "temperature": 0.0}) == 0.0


def test_plain_sampler_top_k_one_is_greedy_and_seeded() -> None:
    logits = np.random.default_rng(4).normal(size=1000).astype(np.float32)
    assert PlainSampler(top_k=1, seed=1).sample(logits) == int(np.argmax(logits))
    a = [
        PlainSampler(seed=7, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0).sample(logits) for _ in range(3)
    ]
    assert len(set(a)) == 1
    spread = {
        PlainSampler(seed=s, temperature=1.5, top_k=0, top_p=1.0, min_p=0.0).sample(logits) for s in range(30)
    }
    assert len(spread) > 5


def test_far_tokens_that_draw_huge_noise_still_win() -> None:
    """The integer pre-filter must not drop a far token whose noise is large enough to win."""
    rng = np.random.default_rng(6)
    logits = rng.uniform(-2.0, 2.0, size=49152).astype(np.float32)
    logits[123] = 13.0  # one clear favourite, 11..15 above the rest: only huge noise beats it
    far_wins = 0
    for position in range(400):
        base = noise_base(77, 0, position)
        brute = int(np.argmax(logits.astype(np.float64) + gumbel_noise(base, np.arange(49152))))
        assert sample_gumbel(logits, seed=77, sample=0, position=position, temperature=1.0) == brute
        far_wins += brute != 123
    assert far_wins > 0  # the case under test really happened


def test_a_token_outside_the_nucleus_never_has_a_zero_gap() -> None:
    logits = np.array([5.0, 4.0, -3.0, -3.5] + [-20.0] * 100, dtype=np.float32)
    for position in range(50):
        kw = dict(seed=3, sample=0, position=position, temperature=1.0, top_p=0.5)
        assert sample_gumbel(logits, **kw) == 0  # the nucleus is token 0 alone
        assert gumbel_gap(logits, 2, **kw) > 0.0
        assert gumbel_gap(logits, 0, **kw) == 0.0


@pytest.mark.parametrize("top_p", [0.3, 0.8, 0.95])
def test_top_p_with_many_tied_logits_equals_brute_force(top_p: float) -> None:
    rng = np.random.default_rng(8)
    for trial in range(10):
        logits = (np.round(rng.normal(0, 1.5, size=1500) * 2) / 2).astype(np.float32)  # steps of 0.5: ties
        got = sample_gumbel(logits, seed=5, sample=2, position=trial, temperature=1.0, top_p=top_p)
        assert got == brute_force(logits, 5, 2, trial, 1.0, top_p)
