"""A thin, owned wrapper over llama-cpp-python's low-level C API: model, context, batch, vocabulary.

Only inference/ touches llama.cpp, and only through this module and ``engine``/``replay``. Every pointer
made here is freed by ``close()``; nothing is left to the garbage collector.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import llama_cpp
import numpy as np
import numpy.typing as npt

from inference.errors import ContextOverflowError, InferenceError, ModelLoadError
from inference.gguf import GgufInfo, read_gguf

__all__ = ["LlamaModel", "LlamaContext", "Batch", "ensure_backend", "default_threads", "GGML_TYPE_Q8_0"]

log = logging.getLogger(__name__)
_native_log = logging.getLogger("inference.llama_cpp")
_backend_lock = threading.Lock()
_backend_ready = False
# ggml's levels: 1 debug, 2 info, 3 warn, 4 error, 5 continuation of the previous line.
_LEVELS = {1: logging.DEBUG, 2: logging.DEBUG, 3: logging.WARNING, 4: logging.ERROR}
_last_errors: list[str] = []
UBATCH = 32
GGML_TYPE_Q8_0 = 8  # ggml_type of the 8-bit KV cache


@llama_cpp.llama_log_callback
def _log_callback(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
    msg = text.decode("utf-8", errors="replace").rstrip()
    if not msg:
        return
    if level in (3, 4):
        _last_errors.append(msg)
        del _last_errors[:-5]
    _native_log.log(_LEVELS.get(level, logging.DEBUG), "%s", msg)


def ensure_backend() -> None:
    """Initialise llama.cpp once per process and route its log lines into Python logging."""
    global _backend_ready
    with _backend_lock:
        if not _backend_ready:
            llama_cpp.llama_log_set(_log_callback, ctypes.c_void_p(0))
            llama_cpp.llama_backend_init()
            _backend_ready = True


def default_threads() -> int:
    """Threads for decoding: ``TRACEMILL_THREADS`` if set, else the cores this process may use.

    llama.cpp's threads meet at spinning barriers after every op, so more threads than free cores is
    catastrophic (a descheduled thread stalls the rest for a whole time slice): on a machine shared with
    other busy processes the engine therefore uses fewer (``inference.threads``) unless
    ``TRACEMILL_THREADS`` fixes the count.
    """
    override = os.environ.get("TRACEMILL_THREADS", "").strip()
    if override.isdigit() and int(override) > 0:
        return int(override)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return max(1, os.cpu_count() or 1)


class LlamaModel:
    """A loaded GGUF model and its vocabulary. Checked by ``inference.gguf`` before llama.cpp sees it."""

    def __init__(self, path: Path, *, n_gpu_layers: int = 0, info: GgufInfo | None = None) -> None:
        self.path = Path(path)
        self.info = info or read_gguf(self.path)
        ensure_backend()
        params = llama_cpp.llama_model_default_params()
        params.n_gpu_layers = n_gpu_layers
        # No repacked "extra" weight buffers: the AMX one crashes (SIGILL on tilezero) on CPUs whose
        # hypervisor advertises AMX without really supporting it, and it buys nothing for decoding.
        params.use_extra_bufts = False
        _last_errors.clear()
        model = llama_cpp.llama_model_load_from_file(str(self.path).encode(), params)
        if not model:
            detail = _last_errors[-1] if _last_errors else "llama.cpp could not load it"
            raise ModelLoadError(f"Could not load {self.path.name}: {detail}. Try another model file.")
        self.ptr = model
        self.vocab = llama_cpp.llama_model_get_vocab(model)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self.vocab)
        self.n_ctx_train = llama_cpp.llama_model_n_ctx_train(model)
        self.add_bos = bool(llama_cpp.llama_vocab_get_add_bos(self.vocab))
        self.bos_id = int(llama_cpp.llama_vocab_bos(self.vocab))
        self.eos_id = int(llama_cpp.llama_vocab_eos(self.vocab))
        self._pieces: dict[int, bytes] = {}
        self._eog = np.array([bool(llama_cpp.llama_vocab_is_eog(self.vocab, t)) for t in range(self.n_vocab)])

    def chat_template(self) -> str | None:
        raw = llama_cpp.llama_model_chat_template(self.ptr, None)
        return raw.decode("utf-8", errors="replace") if raw else None

    def token_text(self, token: int) -> str:
        """The vocabulary's text for a token (special tokens included), e.g. to render a template."""
        if token < 0:
            return ""
        return self.piece(token, special=True).decode("utf-8", errors="replace")

    def is_eog(self, token: int) -> bool:
        return bool(self._eog[token])

    def tokenize(self, text: str, *, add_special: bool, parse_special: bool = True) -> list[int]:
        data = text.encode("utf-8")
        cap = len(data) + 8
        buf = (llama_cpp.llama_token * cap)()
        n = llama_cpp.llama_tokenize(self.vocab, data, len(data), buf, cap, add_special, parse_special)
        if n < 0:
            cap = -n
            buf = (llama_cpp.llama_token * cap)()
            n = llama_cpp.llama_tokenize(self.vocab, data, len(data), buf, cap, add_special, parse_special)
        if n < 0:
            raise InferenceError("The prompt could not be tokenized.")
        return list(buf[:n])

    def piece(self, token: int, *, special: bool = False) -> bytes:
        """The bytes a token stands for (cached: called once per generated token)."""
        key = token if not special else -2 - token
        cached = self._pieces.get(key)
        if cached is not None:
            return cached
        buf = ctypes.create_string_buffer(64)
        n = llama_cpp.llama_token_to_piece(self.vocab, token, buf, 64, 0, special)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = llama_cpp.llama_token_to_piece(self.vocab, token, buf, -n, 0, special)
        data = buf.raw[: max(n, 0)]
        self._pieces[key] = data
        return data

    def detokenize(self, tokens: Sequence[int]) -> str:
        return b"".join(self.piece(t) for t in tokens).decode("utf-8", errors="replace")

    def close(self) -> None:
        if getattr(self, "ptr", None):
            llama_cpp.llama_model_free(self.ptr)
            self.ptr = None


class Batch:
    """A ``llama_batch`` with room for ``capacity`` tokens, each in one sequence."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.raw = llama_cpp.llama_batch_init(capacity, 0, 1)
        self.n = 0

    def clear(self) -> None:
        self.n = 0

    def add(self, token: int, pos: int, seq: int, logits: bool) -> None:
        i = self.n
        raw = self.raw
        raw.token[i] = token
        raw.pos[i] = pos
        raw.n_seq_id[i] = 1
        raw.seq_id[i][0] = seq
        raw.logits[i] = logits
        self.n = i + 1

    def close(self) -> None:
        if self.raw is not None:
            self.raw.n_tokens = self.capacity  # free() reads only the pointers
            llama_cpp.llama_batch_free(self.raw)
            self.raw = None


class LlamaContext:
    """A llama.cpp context for up to ``n_seq`` sequences.

    By default each sequence has its own KV stream of ``n_ctx / n_seq`` cells (``kv_unified=False``), so a
    token attends only to its own sequence's cells; a unified cache makes every token of a group step scan
    the cells of all the group's sequences (measured in docs/sampling.md: a step of 8 sequences costs
    about 1.6 times as much). ``copy_seq`` between streams copies the KV data.
    """

    def __init__(
        self,
        model: LlamaModel,
        *,
        n_ctx: int,
        n_seq: int,
        n_threads: int,
        n_batch: int = 512,
        flash_attn: int = llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED,
        kv_unified: bool = False,
        kv_type: int | None = None,
    ) -> None:
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = n_batch
        # Physical batches under 64 tokens with flash attention make llama.cpp's CPU backend compute
        # every token bit-for-bit as a one-token decode does (64 and more take another kernel path), so a
        # replay by prefill sees exactly the logits the sampler saw. See docs/sampling.md.
        params.n_ubatch = min(n_batch, UBATCH)
        params.n_seq_max = n_seq
        params.n_threads = n_threads
        params.n_threads_batch = n_threads
        params.kv_unified = kv_unified
        params.no_perf = True
        params.flash_attn_type = flash_attn
        if kv_type is not None:  # a ggml type for both K and V (a quantized V needs flash attention)
            params.type_k = params.type_v = kv_type
        _last_errors.clear()
        ctx = llama_cpp.llama_init_from_model(model.ptr, params)
        if not ctx:
            detail = _last_errors[-1] if _last_errors else "not enough memory"
            raise ModelLoadError(
                f"Could not create a context of {n_ctx} tokens: {detail}. Use a shorter context."
            )
        self.ptr = ctx
        self.model = model
        self.n_ctx = llama_cpp.llama_n_ctx(ctx)
        self.n_ctx_seq = llama_cpp.llama_n_ctx_seq(ctx)  # the cells one sequence can use
        self.n_seq = n_seq
        self.n_batch = n_batch
        self.n_threads = n_threads
        self.mem = llama_cpp.llama_get_memory(ctx)
        self._n_vocab = model.n_vocab

    def set_threads(self, n_threads: int) -> None:
        if n_threads != self.n_threads:
            llama_cpp.llama_set_n_threads(self.ptr, n_threads, n_threads)
            self.n_threads = n_threads

    def clear(self) -> None:
        llama_cpp.llama_memory_clear(self.mem, False)

    def copy_seq(self, src: int, dst: int) -> None:
        llama_cpp.llama_memory_seq_cp(self.mem, src, dst, -1, -1)

    def drop_seq(self, seq: int) -> None:
        llama_cpp.llama_memory_seq_rm(self.mem, seq, -1, -1)

    def decode(self, batch: Batch) -> None:
        """Run one batch; raise ContextOverflowError when the KV cache has no room for it."""
        batch.raw.n_tokens = batch.n
        rc = llama_cpp.llama_decode(self.ptr, batch.raw)
        if rc == 1:
            raise ContextOverflowError(f"The context of {self.n_ctx} tokens is full.")
        if rc != 0:
            raise InferenceError(f"llama_decode failed with code {rc}.")

    def logits(self, n_rows: int) -> npt.NDArray[np.float32]:
        """The last batch's output rows (in batch order of the tokens that asked for logits); a view."""
        ptr = llama_cpp.llama_get_logits(self.ptr)
        return np.ctypeslib.as_array(ptr, shape=(n_rows, self._n_vocab))

    def logits_row(self, i: int) -> npt.NDArray[np.float32]:
        ptr = llama_cpp.llama_get_logits_ith(self.ptr, i)
        return np.ctypeslib.as_array(ptr, shape=(self._n_vocab,))

    def close(self) -> None:
        if getattr(self, "ptr", None):
            llama_cpp.llama_free(self.ptr)
            self.ptr = None
