"""The inference engine: one model, one owner thread, k samples per task from one batched decode.

A group's prompt is evaluated once (sequence 0), its KV cells are copied to sequences 1..k-1 (each
sequence has its own KV stream, so its tokens attend only to its own cells), and the k sequences then
advance together, one token each per ``llama_decode``. Tokens come from the verifiable sampler
(``inference.sampling``) or, for chat, from plain temperature/top-k/top-p/min-p sampling.
"""

from __future__ import annotations

import codecs
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

import llama_cpp
import numpy as np

from inference.chat_template import render_chat
from inference.errors import ContextOverflowError, InferenceError
from inference.gguf import GgufInfo, read_gguf
from inference.native import GGML_TYPE_Q8_0, Batch, LlamaContext, LlamaModel, default_threads
from inference.sampling import PlainSampler, log_softmax_at, sample_gumbel
from inference.threads import ThreadAdvisor

__all__ = ["Engine", "GroupResult", "Sample", "Cancel", "FinishReason"]

log = logging.getLogger(__name__)

FinishReason = Literal["stop", "length", "cancelled"]
T = TypeVar("T")
_KV_ROUND = 256
_PREFILL_CHUNK = 128  # prompt tokens per llama_decode call: cancellation is checked between calls


class Cancel(Protocol):
    """Anything with ``is_set()``, e.g. a ``threading.Event``."""

    def is_set(self) -> bool: ...


@dataclass
class Sample:
    """One completion. ``token_ids``/``logprobs`` include a final end-of-generation token when the model
    chose to stop; ``text`` never shows it, and ends before any stop string."""

    index: int
    text: str
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: FinishReason


@dataclass
class GroupResult:
    samples: list[Sample]
    prompt_tokens: int
    completion_tokens: int
    prompt_eval_s: float
    decode_s: float
    prompt_token_ids: list[int] = field(default_factory=list)
    prompt_tokens_evaluated: int = 0  # tokens llama.cpp ran for the prompt: prompt_tokens, not k times it

    @property
    def tokens_per_s(self) -> float:
        """Completion tokens per second of decoding, all samples together."""
        return self.completion_tokens / self.decode_s if self.decode_s > 0 else 0.0


class _Seq:
    """Book-keeping for one sequence while it is being generated."""

    __slots__ = ("index", "tokens", "logprobs", "raw", "text", "sent", "finish", "decoder")

    def __init__(self, index: int) -> None:
        self.index = index
        self.tokens: list[int] = []
        self.logprobs: list[float] = []
        self.text = ""
        self.sent = 0
        self.finish: FinishReason | None = None
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")


class Engine:
    """A loaded GGUF model. Every llama.cpp call runs on one owner thread; public methods may be called
    from any thread and block until their work is done.

    ``n_ctx`` is the context of one sequence (prompt plus completion). The KV cache is sized on demand:
    k streams of (prompt + max_tokens) cells for a group, at most ``n_ctx * max_group`` cells.
    """

    def __init__(
        self,
        model_path: Path | str,
        *,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        n_gpu_layers: int | None = None,
        max_group: int = 16,
        chat_template: str | None = None,
    ) -> None:
        self.model_path = Path(model_path)
        self.n_ctx = n_ctx
        self.max_group = max_group
        self.n_threads = n_threads or default_threads()
        # An explicit count (argument or TRACEMILL_THREADS) is kept; otherwise the count follows the cores
        # other programs leave free (inference.threads).
        adaptive = n_threads is None and not os.environ.get("TRACEMILL_THREADS", "").strip()
        self._threads = ThreadAdvisor(self.n_threads) if adaptive else None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tracemill-model")
        self._owner: threading.Thread | None = None
        self._model: LlamaModel | None = None
        self._ctx: LlamaContext | None = None
        self._batch: Batch | None = None
        self._template_override = chat_template
        try:
            self.info: GgufInfo = self._call(self._load, n_gpu_layers)
        except BaseException:
            self._executor.shutdown(wait=True)
            raise

    # -- owner thread -------------------------------------------------------------------------------------
    def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if threading.current_thread() is self._owner:
            return fn(*args, **kwargs)
        return self._executor.submit(self._on_owner, fn, *args, **kwargs).result()

    def _on_owner(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        self._owner = threading.current_thread()
        return fn(*args, **kwargs)

    def _load(self, n_gpu_layers: int | None) -> GgufInfo:
        info = read_gguf(self.model_path)
        from inference.hardware import check_fits, choose_gpu_layers

        check_fits(info, n_ctx=self.n_ctx)
        layers = choose_gpu_layers(info, n_ctx=self.n_ctx) if n_gpu_layers is None else n_gpu_layers
        self._model = LlamaModel(self.model_path, n_gpu_layers=layers, info=info)
        self.n_gpu_layers = layers
        if self.n_ctx > self._model.n_ctx_train:
            log.info("n_ctx %d exceeds the model's training context %d", self.n_ctx, self._model.n_ctx_train)
        self._template = self._template_override or self._model.chat_template()
        return info

    def switch_model(
        self, model_path: Path | str, *, n_gpu_layers: int | None = None, chat_template: str | None = None
    ) -> GgufInfo:
        """Unload the current model and load another, on the same owner thread.

        The new file is checked (GGUF header, size, fit) before the old model is freed, so a bad file
        leaves the engine as it was.
        """
        return self._call(self._switch, Path(model_path), n_gpu_layers, chat_template)

    def _switch(self, path: Path, n_gpu_layers: int | None, chat_template: str | None) -> GgufInfo:
        from inference.hardware import check_fits

        check_fits(read_gguf(path), n_ctx=self.n_ctx)
        self._free()
        self.model_path = path
        self._template_override = chat_template
        self.info = self._load(n_gpu_layers)
        return self.info

    def close(self) -> None:
        """Free the context and the model, and stop the owner thread. Safe to call twice."""
        if self._executor is None:
            return
        try:
            self._call(self._free)
        finally:
            self._executor.shutdown(wait=True)
            self._executor = None  # type: ignore[assignment]

    def _free(self) -> None:
        for obj in (self._batch, self._ctx, self._model):
            if obj is not None:
                obj.close()
        self._batch = self._ctx = self._model = None

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- prompts ------------------------------------------------------------------------------------------
    def render(self, messages: Sequence[Mapping[str, Any]]) -> str:
        """The prompt text the model's chat template makes of ``messages``."""
        m = self._require_model()
        return render_chat(
            self._template, messages, bos_token=m.token_text(m.bos_id), eos_token=m.token_text(m.eos_id)
        )

    def tokenize_prompt(self, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """Token ids of the rendered chat prompt (a BOS is added only when the model wants one and the
        template did not already write it)."""
        return self._call(self._tokenize_prompt, messages)

    def _tokenize_prompt(self, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        m = self._require_model()
        text = self.render(messages)
        bos = m.token_text(m.bos_id)
        add_bos = m.add_bos and not (bos and text.startswith(bos))
        tokens = m.tokenize(text, add_special=add_bos, parse_special=True)
        if not tokens:
            raise InferenceError("The prompt is empty.")
        return tokens

    def _require_model(self) -> LlamaModel:
        if self._model is None:
            raise InferenceError("The model has been unloaded.")
        return self._model

    # -- generation ---------------------------------------------------------------------------------------
    def generate_group(
        self,
        messages: Sequence[Mapping[str, Any]],
        k: int,
        *,
        seed: int,
        temperature: float,
        top_p: float = 1.0,
        max_tokens: int = 256,
        stop: Sequence[str] | None = None,
        on_text: Callable[[int, str], None] | None = None,
        cancel: Cancel | None = None,
    ) -> GroupResult:
        """k samples of one chat prompt with the verifiable seeded sampler (replayable by the network).

        ``on_text(sample_index, new_text)`` streams text as it is decided (on the owner thread);
        ``cancel.is_set()`` is checked before every decode step, so a cancel stops within one step and the
        unfinished samples end with ``"cancelled"``. Raises ContextOverflowError when the prompt does not
        fit, or when the context fills mid-generation (with ``partial`` holding the samples so far).
        """
        if not 1 <= k <= self.max_group:
            raise InferenceError(f"Group size {k} is outside 1..{self.max_group}.")

        def pick(row: np.ndarray, i: int, t: int) -> int:
            return sample_gumbel(row, seed=seed, sample=i, position=t, temperature=temperature, top_p=top_p)

        return self._call(
            self._generate, messages, None, k, pick, temperature, max_tokens, stop, on_text, cancel
        )

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        temperature: float = 0.7,
        top_k: int = 40,
        top_p: float = 0.95,
        min_p: float = 0.05,
        max_tokens: int = 512,
        seed: int | None = None,
        stop: Sequence[str] | None = None,
        on_text: Callable[[int, str], None] | None = None,
        cancel: Cancel | None = None,
    ) -> Sample:
        """One reply for the chat tab, with plain temperature/top-k/top-p/min-p sampling."""
        sampler = PlainSampler(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p, seed=seed)

        def pick(row: np.ndarray, i: int, t: int) -> int:
            return sampler.sample(row)

        result = self._call(
            self._generate, messages, None, 1, pick, temperature, max_tokens, stop, on_text, cancel
        )
        return result.samples[0]

    def generate_tokens(
        self,
        prompt_tokens: Sequence[int],
        k: int,
        *,
        seed: int,
        temperature: float,
        top_p: float = 1.0,
        max_tokens: int = 256,
        stop: Sequence[str] | None = None,
        cancel: Cancel | None = None,
    ) -> GroupResult:
        """Like ``generate_group`` but from prompt token ids (benchmarks, replays, raw prompts)."""

        def pick(row: np.ndarray, i: int, t: int) -> int:
            return sample_gumbel(row, seed=seed, sample=i, position=t, temperature=temperature, top_p=top_p)

        return self._call(
            self._generate, None, list(prompt_tokens), k, pick, temperature, max_tokens, stop, None, cancel
        )

    def _ensure_context(self, per_seq: int, k: int) -> LlamaContext:
        """A cleared context with at least ``k`` sequences of ``per_seq`` cells each.

        The context is kept while it is big enough; otherwise it is made again at what this call needs
        (rounded up), so memory follows the work rather than the largest request ever seen.
        """
        m = self._require_model()
        per_seq = min(-(-per_seq // _KV_ROUND) * _KV_ROUND, self.n_ctx)
        if self._ctx is None or self._ctx.n_seq < k or self._ctx.n_ctx_seq < per_seq:
            if self._ctx is not None:
                self._ctx.close()
                self._ctx = None
            self._ctx = LlamaContext(
                m, n_ctx=k * per_seq, n_seq=k, n_threads=self.n_threads, n_batch=512, **self._kv_settings()
            )
            log.debug("context: %d sequences of %d KV cells", k, self._ctx.n_ctx_seq)
        if self._batch is None:
            self._batch = Batch(max(512, self.max_group))
        self._ctx.clear()
        self._adapt_threads()
        return self._ctx

    def _adapt_threads(self) -> None:
        """Decode with the threads other programs leave room for (checked every couple of seconds)."""
        if self._threads is not None and self._ctx is not None:
            self._ctx.set_threads(self._threads.threads())

    @property
    def threads_in_use(self) -> int:
        """The decode threads of the current context (fewer than ``n_threads`` while the CPU is busy)."""
        return self._ctx.n_threads if self._ctx is not None else self.n_threads

    def _kv_settings(self) -> dict[str, int]:
        """Attention and KV cache settings. On the CPU: flash attention, which makes prefill and decode
        agree bit for bit, over an 8-bit KV cache, whose attention kernel costs about half as much per
        cell as the 16-bit one from a few hundred tokens on (docs/sampling.md has the figures). GPU
        backends choose their own attention and keep a 16-bit cache."""
        if self.n_gpu_layers == 0:
            return {"flash_attn": llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED, "kv_type": GGML_TYPE_Q8_0}
        return {"flash_attn": llama_cpp.LLAMA_FLASH_ATTN_TYPE_AUTO}

    def _generate(
        self,
        messages: Sequence[Mapping[str, Any]] | None,
        prompt: list[int] | None,
        k: int,
        pick: Callable[[np.ndarray, int, int], int],
        temperature: float,
        max_tokens: int,
        stop: Sequence[str] | None,
        on_text: Callable[[int, str], None] | None,
        cancel: Cancel | None,
    ) -> GroupResult:
        m = self._require_model()
        tokens = prompt if prompt is not None else self._tokenize_prompt(messages or [])
        n_prompt = len(tokens)
        if n_prompt >= self.n_ctx:
            raise ContextOverflowError(
                f"The prompt is {n_prompt} tokens but the context holds {self.n_ctx}; shorten the prompt "
                "or use a larger context."
            )
        max_new = max(1, max_tokens)
        ctx = self._ensure_context(n_prompt + max_new, k)
        batch = self._batch
        assert batch is not None
        seqs = [_Seq(i) for i in range(k)]
        stops = [s for s in (stop or []) if s]
        hold = max((len(s) for s in stops), default=1) - 1

        t0 = time.perf_counter()
        for start in range(0, n_prompt, _PREFILL_CHUNK):
            if cancel is not None and cancel.is_set():
                return self._finish(
                    seqs, "cancelled", tokens, 0, time.perf_counter() - t0, 0.0, on_text, hold
                )
            batch.clear()
            for pos in range(start, min(start + _PREFILL_CHUNK, n_prompt)):
                batch.add(tokens[pos], pos, 0, pos == n_prompt - 1)
            ctx.decode(batch)
        for i in range(1, k):
            ctx.copy_seq(0, i)
        first = np.array(ctx.logits_row(-1), copy=True)
        prompt_s = time.perf_counter() - t0

        t1 = time.perf_counter()
        active = list(range(k))
        rows: Any = [first] * k
        step = 0
        while True:
            for j, i in enumerate(active):
                self._advance(
                    m, seqs[i], rows[j], pick(rows[j], i, step), temperature, stops, hold, max_new, on_text
                )
            active = [i for i in active if seqs[i].finish is None]
            if not active:
                break
            if cancel is not None and cancel.is_set():
                break
            if n_prompt + step + 1 >= self.n_ctx:
                partial = self._finish(
                    seqs, "length", tokens, n_prompt, prompt_s, time.perf_counter() - t1, on_text, hold
                )
                raise ContextOverflowError(
                    f"The context of {self.n_ctx} tokens filled up after {step + 1} generated tokens.",
                    partial=partial,
                )
            self._adapt_threads()
            batch.clear()
            for i in active:
                batch.add(seqs[i].tokens[-1], n_prompt + step, i, True)
            try:
                ctx.decode(batch)
            except ContextOverflowError as exc:
                partial = self._finish(
                    seqs, "length", tokens, n_prompt, prompt_s, time.perf_counter() - t1, on_text, hold
                )
                raise ContextOverflowError(str(exc), partial=partial) from None
            rows = ctx.logits(len(active))
            step += 1
        return self._finish(
            seqs, "cancelled", tokens, n_prompt, prompt_s, time.perf_counter() - t1, on_text, hold
        )

    @staticmethod
    def _advance(
        m: LlamaModel,
        seq: _Seq,
        row: np.ndarray,
        token: int,
        temperature: float,
        stops: list[str],
        hold: int,
        max_new: int,
        on_text: Callable[[int, str], None] | None,
    ) -> None:
        """Record one sampled token: logprob, text, stop strings, end of generation, length."""
        seq.tokens.append(token)
        seq.logprobs.append(log_softmax_at(row, token, temperature))
        if m.is_eog(token):
            seq.finish = "stop"
        else:
            before = len(seq.text)
            seq.text += seq.decoder.decode(m.piece(token))
            hits = [at for s in stops if (at := seq.text.find(s, max(0, before - len(s) + 1))) >= 0]
            if hits:
                seq.text = seq.text[: min(hits)]
                seq.finish = "stop"
            if seq.finish is None and len(seq.tokens) >= max_new:
                seq.finish = "length"
        if on_text is not None:
            upto = len(seq.text) if seq.finish is not None else max(seq.sent, len(seq.text) - hold)
            if upto > seq.sent:
                on_text(seq.index, seq.text[seq.sent : upto])
                seq.sent = upto

    @staticmethod
    def _finish(
        seqs: list[_Seq],
        reason: FinishReason,
        prompt: list[int],
        n_eval: int,
        prompt_s: float,
        decode_s: float,
        on_text: Callable[[int, str], None] | None,
        hold: int,
    ) -> GroupResult:
        samples = []
        for s in seqs:
            if s.finish is None:
                s.finish = reason
                s.text += s.decoder.decode(b"", final=True)
                if on_text is not None and len(s.text) > s.sent:
                    on_text(s.index, s.text[s.sent :])
            samples.append(Sample(s.index, s.text, s.tokens, s.logprobs, s.finish))
        n_completion = sum(len(s.tokens) for s in seqs)
        return GroupResult(
            samples=samples,
            prompt_tokens=len(prompt),
            completion_tokens=n_completion,
            prompt_eval_s=prompt_s,
            decode_s=decode_s,
            prompt_token_ids=list(prompt),
            prompt_tokens_evaluated=n_eval,
        )

    # -- scoring ------------------------------------------------------------------------------------------
    def scan_logits(self, tokens: Sequence[int], first: int, fn: Callable[[int, np.ndarray], None]) -> None:
        """Run ``tokens`` through one prefill and call ``fn(p, logits)`` for each position ``p >= first``,
        where ``logits`` (a view, valid only during the call) predicts token ``p + 1``. Used by replay."""
        self._call(self._scan_logits, list(tokens), first, fn)

    def _scan_logits(self, tokens: list[int], first: int, fn: Callable[[int, np.ndarray], None]) -> None:
        if len(tokens) > self.n_ctx:
            raise ContextOverflowError(f"{len(tokens)} tokens do not fit in the context of {self.n_ctx}.")
        ctx = self._ensure_context(len(tokens), 1)
        batch = self._batch
        assert batch is not None
        for start in range(0, len(tokens), batch.capacity):
            batch.clear()
            end = min(start + batch.capacity, len(tokens))
            for pos in range(start, end):
                batch.add(tokens[pos], pos, 0, pos >= first)
            ctx.decode(batch)
            lo = max(start, first)
            if lo < end:
                rows = ctx.logits(end - lo)
                for j, pos in enumerate(range(lo, end)):
                    fn(pos, rows[j])
