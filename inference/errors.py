"""The exceptions inference/ raises. Each carries a one-line message a user can act on."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from inference.engine import GroupResult

__all__ = [
    "InferenceError",
    "ModelLoadError",
    "ContextOverflowError",
    "GenerationCancelled",
    "DownloadError",
    "ChecksumMismatchError",
    "BackendError",
]


class InferenceError(Exception):
    """Base of every error inference/ raises on purpose."""


class ModelLoadError(InferenceError):
    """The model file is missing, truncated, not a GGUF file, or does not fit in memory."""


class ContextOverflowError(InferenceError):
    """The prompt, or prompt plus completion, does not fit in the model's context.

    ``partial`` holds what was generated before the context filled (None when the prompt alone is too long).
    """

    def __init__(self, message: str, *, partial: GroupResult | None = None) -> None:
        super().__init__(message)
        self.partial = partial


class GenerationCancelled(InferenceError):
    """Raised only by callers that prefer an exception to a ``"cancelled"`` finish reason."""


class DownloadError(InferenceError):
    """A model download failed (network, disk, or server); a retry resumes where it stopped."""


class ChecksumMismatchError(DownloadError):
    """A downloaded file's sha256 is not the one the network published; the file was discarded."""


class BackendError(InferenceError):
    """An external chat server (Ollama, LM Studio, llama-server) failed or answered nonsense."""
