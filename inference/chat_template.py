"""Render a conversation with the model's own chat template (a Jinja2 template in its GGUF metadata)."""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from inference.errors import InferenceError

__all__ = ["render_chat", "FALLBACK_TEMPLATE"]

# ChatML, for models whose file carries no template.
FALLBACK_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content']"
    " + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def _raise(message: str) -> None:
    raise InferenceError(f"The model's chat template refused the conversation: {message}")


@lru_cache(maxsize=8)
def _compile(template: str) -> Any:
    from jinja2 import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    try:
        return env.from_string(template)
    except TemplateError as exc:
        raise InferenceError(f"The model's chat template is not valid Jinja2 ({exc}).") from exc


def render_chat(
    template: str | None,
    messages: Sequence[Mapping[str, Any]],
    *,
    bos_token: str = "",
    eos_token: str = "",
    add_generation_prompt: bool = True,
) -> str:
    """The prompt text for ``messages`` ([{"role": ..., "content": ...}]), ending with the reply turn."""
    from jinja2 import TemplateError

    compiled = _compile(template or FALLBACK_TEMPLATE)
    try:
        return str(
            compiled.render(
                messages=[dict(m) for m in messages],
                bos_token=bos_token,
                eos_token=eos_token,
                add_generation_prompt=add_generation_prompt,
            )
        )
    except TemplateError as exc:
        raise InferenceError(f"The model's chat template failed ({exc}).") from exc
