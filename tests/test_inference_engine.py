"""The engine with the real default model: group sampling, logprobs, replay, cancellation, bad input."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from inference.engine import Engine, GroupResult
from inference.errors import ContextOverflowError, InferenceError, ModelLoadError
from inference.replay import DEFAULT_MAX_GAP, replay_tokens

pytestmark = pytest.mark.model

MSGS = [{"role": "user", "content": "What is 17 * 23? Think step by step."}]
# Decode-time and prefill-time logprobs of the same token: equal bit for bit on this CPU backend (32-token
# physical batches, flash attention); on other backends they differ by up to about 0.3 nats.
LOGPROB_TOLERANCE = 0.35


@pytest.fixture(scope="module")
def engine(default_model_path: Path) -> Iterator[Engine]:
    with Engine(default_model_path, n_ctx=1024, max_group=8) as e:
        yield e


@pytest.fixture(scope="module")
def group(engine: Engine) -> GroupResult:
    return engine.generate_group(MSGS, 4, seed=1234, temperature=0.8, top_p=1.0, max_tokens=48)


def test_group_has_k_samples_with_tokens_logprobs_and_text(engine: Engine, group: GroupResult) -> None:
    assert [s.index for s in group.samples] == [0, 1, 2, 3]
    assert group.prompt_tokens == len(engine.tokenize_prompt(MSGS))
    assert group.prompt_tokens_evaluated == group.prompt_tokens  # evaluated once, not k times
    assert group.completion_tokens == sum(len(s.token_ids) for s in group.samples)
    assert group.decode_s > 0 and group.tokens_per_s > 0
    for s in group.samples:
        assert 0 < len(s.token_ids) == len(s.logprobs) <= 48
        assert all(lp <= 0.0 for lp in s.logprobs)
        assert s.finish_reason in ("stop", "length")
        assert s.text.strip()
    assert len({tuple(s.token_ids) for s in group.samples}) > 1  # different samples, not copies


def test_uses_the_models_own_chat_template(engine: Engine) -> None:
    text = engine.render(MSGS)
    assert text.startswith("<|im_start|>system\n")  # SmolLM2's template adds its default system turn
    assert text.endswith("<|im_start|>assistant\n")


def test_equal_seeds_give_equal_traces(engine: Engine, group: GroupResult) -> None:
    again = engine.generate_group(MSGS, 4, seed=1234, temperature=0.8, top_p=1.0, max_tokens=48)
    assert [s.token_ids for s in again.samples] == [s.token_ids for s in group.samples]
    assert [s.logprobs for s in again.samples] == [s.logprobs for s in group.samples]
    other = engine.generate_group(MSGS, 4, seed=4321, temperature=0.8, top_p=1.0, max_tokens=48)
    assert [s.token_ids for s in other.samples] != [s.token_ids for s in group.samples]


def test_logprobs_match_a_separate_recomputation(engine: Engine, group: GroupResult) -> None:
    diffs = []
    for s in group.samples:
        replay = replay_tokens(
            engine, group.prompt_token_ids, s.token_ids, seed=1234, sample=s.index, temperature=0.8
        )
        diffs += [abs(a - b) for a, b in zip(s.logprobs, replay.logprobs, strict=True)]
    assert max(diffs) <= LOGPROB_TOLERANCE
    assert float(np.mean(diffs)) <= 0.05


def test_replay_with_the_same_seed_accepts_and_a_wrong_seed_does_not(
    engine: Engine, group: GroupResult
) -> None:
    honest_gaps: list[float] = []
    wrong_gaps: list[float] = []
    for s in group.samples:
        kw = dict(sample=s.index, temperature=0.8)
        honest = replay_tokens(engine, group.prompt_token_ids, s.token_ids, seed=1234, **kw)
        assert honest.honest()
        honest_gaps += honest.gaps
        wrong_gaps += replay_tokens(engine, group.prompt_token_ids, s.token_ids, seed=1235, **kw).gaps
    assert np.mean(np.array(honest_gaps) == 0.0) >= 0.95
    assert max(honest_gaps) <= DEFAULT_MAX_GAP
    assert np.mean(np.array(wrong_gaps) == 0.0) < 0.9
    assert max(wrong_gaps) > DEFAULT_MAX_GAP


def test_replay_rejects_a_forced_answer(engine: Engine, group: GroupResult) -> None:
    forced = engine.tokenize_prompt([{"role": "user", "content": "x"}])[-3:] + [28, 1234, 9812, 2]
    result = replay_tokens(engine, group.prompt_token_ids, forced, seed=1234, sample=0, temperature=0.8)
    assert not result.honest()


def test_greedy_is_deterministic_and_the_same_for_every_sample(engine: Engine) -> None:
    r = engine.generate_group(MSGS, 3, seed=1, temperature=0.0, max_tokens=16)
    assert r.samples[0].token_ids == r.samples[1].token_ids == r.samples[2].token_ids
    again = engine.generate_group(MSGS, 1, seed=99, temperature=0.0, max_tokens=16)
    assert again.samples[0].token_ids == r.samples[0].token_ids


def test_stop_strings_cut_the_text_and_streaming_adds_up(engine: Engine) -> None:
    streamed: dict[int, str] = {}

    def on_text(i: int, text: str) -> None:
        streamed[i] = streamed.get(i, "") + text

    r = engine.generate_group(
        MSGS, 3, seed=7, temperature=0.8, max_tokens=64, stop=["\n", "."], on_text=on_text
    )
    for s in r.samples:
        assert "\n" not in s.text and "." not in s.text
        assert streamed.get(s.index, "") == s.text
        if s.finish_reason == "stop" and not engine._model.is_eog(s.token_ids[-1]):  # type: ignore[union-attr]
            assert len(s.token_ids) < 64


class _CancelAfter:
    """A cancel flag that turns on after the engine has asked it ``n`` times (once per decode step)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.asked = 0

    def is_set(self) -> bool:
        self.asked += 1
        return self.asked > self.n


def test_cancellation_stops_within_one_step(engine: Engine) -> None:
    cancel = _CancelAfter(3)
    r = engine.generate_group(MSGS, 4, seed=3, temperature=1.0, max_tokens=200, cancel=cancel)
    for s in r.samples:
        assert len(s.token_ids) <= 4  # the step that saw the flag was the last
        assert s.finish_reason in ("cancelled", "stop")
    assert any(s.finish_reason == "cancelled" for s in r.samples)


def test_cancellation_from_another_thread(engine: Engine) -> None:
    cancel = threading.Event()
    seen_at_cancel: dict[int, int] = {}
    counts: dict[int, int] = {}

    def on_text(i: int, text: str) -> None:
        counts[i] = counts.get(i, 0) + 1
        if counts[i] == 5 and not cancel.is_set():
            seen_at_cancel.update(counts)
            threading.Thread(target=cancel.set).start()

    r = engine.generate_group(
        MSGS, 2, seed=5, temperature=1.0, max_tokens=500, on_text=on_text, cancel=cancel
    )
    assert cancel.is_set()
    assert all(s.finish_reason in ("cancelled", "stop") for s in r.samples)
    assert max(len(s.token_ids) for s in r.samples) < 500


def test_prompt_longer_than_the_context_is_a_clear_error(engine: Engine) -> None:
    long = [{"role": "user", "content": "word " * 2000}]
    with pytest.raises(ContextOverflowError, match="shorten the prompt"):
        engine.generate_group(long, 2, seed=1, temperature=0.8, max_tokens=8)
    assert engine.generate_group(MSGS, 1, seed=1, temperature=0.8, max_tokens=4).samples[0].token_ids


def test_context_overflow_mid_generation_keeps_the_partial_result(default_model_path: Path) -> None:
    with Engine(default_model_path, n_ctx=64, max_group=2) as small:
        n_prompt = len(small.tokenize_prompt(MSGS))
        with pytest.raises(ContextOverflowError) as info:
            small.generate_group(MSGS, 2, seed=2, temperature=1.5, max_tokens=500)
        partial = info.value.partial
        assert partial is not None
        assert all(n_prompt + len(s.token_ids) <= 64 for s in partial.samples)
        assert any(s.finish_reason == "length" for s in partial.samples)


def test_group_larger_than_max_group_is_refused(engine: Engine) -> None:
    with pytest.raises(InferenceError):
        engine.generate_group(MSGS, 9, seed=1, temperature=0.8, max_tokens=4)


def test_chat_uses_plain_sampling(engine: Engine) -> None:
    reply = engine.chat(MSGS, max_tokens=12, seed=3)
    assert reply.text and len(reply.token_ids) <= 12


def test_two_threads_share_the_one_owner_thread(engine: Engine) -> None:
    results: list[GroupResult] = []

    def work(seed: int) -> None:
        results.append(engine.generate_group(MSGS, 2, seed=seed, temperature=0.8, max_tokens=8))

    threads = [threading.Thread(target=work, args=(s,)) for s in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 2


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "does not exist"), (b"hello, not a model", "not a GGUF"), ("head", "truncated")],
)
def test_bad_model_files_raise_model_load_error(
    tmp_path: Path, default_model_path: Path, content: bytes | str | None, message: str
) -> None:
    bad = tmp_path / "bad.gguf"
    if content == "head":
        with default_model_path.open("rb") as f:
            bad.write_bytes(f.read(4 * 1024 * 1024))  # the header and some tensors, not all
    elif isinstance(content, bytes):
        bad.write_bytes(content)
    with pytest.raises(ModelLoadError, match=message):
        Engine(bad)


def test_a_model_larger_than_memory_is_refused(
    default_model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A machine with 64 MB of RAM cannot be had here; the probe's answer is replaced, the rest is real.
    import inference.hardware as hw

    small = hw.Hardware(
        backends=("CPU",),
        gpu_offload=False,
        gpus=(),
        ram_total=64_000_000,
        ram_available=64_000_000,
        cpu_threads=2,
    )
    monkeypatch.setattr(hw, "probe_hardware", lambda: small)
    with pytest.raises(ModelLoadError, match="choose a smaller model"):
        Engine(default_model_path)


def _rss() -> int:
    """Resident memory, after asking glibc to return its free lists (else its caching looks like a leak)."""
    import ctypes
    import ctypes.util

    libc_name = ctypes.util.find_library("c")
    if libc_name:
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(libc_name).malloc_trim(0)
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads RSS from /proc")
def test_loading_and_unloading_does_not_leak(default_model_path: Path) -> None:
    loaded: list[int] = []

    def cycle() -> None:
        with Engine(default_model_path, n_ctx=256, max_group=2) as e:
            e.generate_group(MSGS, 2, seed=1, temperature=0.8, max_tokens=4)
            loaded.append(_rss())

    cycle()
    cycle()  # the allocator's arenas for the owner thread settle in the first cycles
    before = _rss()
    for _ in range(4):
        cycle()
    after = _rss()
    mb = 1024 * 1024
    figures = f"RSS before {before // mb} MB, loaded {[x // mb for x in loaded]} MB, after {after // mb} MB"
    assert after - before < 30 * mb, figures  # four loads of a 98 MB model leave no trace
    assert loaded[-1] - after > 60 * mb, figures  # closing gives the model's memory back


def test_switching_models_keeps_the_engine_usable(default_model_path: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 100)
    other = tmp_path / "copy.gguf"
    other.symlink_to(default_model_path)
    with Engine(default_model_path, n_ctx=256, max_group=2) as e:
        with pytest.raises(ModelLoadError):
            e.switch_model(bad)
        assert e.model_path == default_model_path  # a bad file leaves the loaded model in place
        e.switch_model(other)
        assert e.model_path == other
        assert e.generate_group(MSGS, 2, seed=1, temperature=0.8, max_tokens=4).samples[1].token_ids
