"""A backend's chat template as a function of messages, for the protocols' ``messages`` requests.

Contract: ``renderer(backend)`` returns ``render(messages) -> str``: the prompt text the model's
chat template makes of an OpenAI-style conversation, the assistant's turn open
(``specdec.engine.chat.render``). It raises ``ChatError`` for bad messages and ``NoTemplate`` when
the backend's tokenizer has no chat template (a base model, or a remote backend, which holds only a
``tokenizers`` file); an error raised by the template itself (a Jinja ``raise_exception``, say
"roles must alternate") becomes a ``ChatError`` too, so a bad conversation is always the client's
400, never the server's 500. ``has_chat(backend)`` says whether chat is offered. The tokenizer is
looked up on every call, not at construction: a batching backend loads its engine in the
background. Why here and not in the protocols: they stay pure (no tokenizer), the transports pass
them this function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from specdec.engine.chat import ChatError, has_template, render


def tokenizer_of(backend) -> Any:
    """The backend's Hugging Face tokenizer (an in-process engine's), else its own, else None."""
    engine = getattr(backend, "engine", None)
    return getattr(engine, "tokenizer", None) or getattr(backend, "tokenizer", None)


def has_chat(backend) -> bool:
    return has_template(tokenizer_of(backend))


def renderer(backend) -> Callable[[Any], str]:
    def render_messages(messages: Any) -> str:
        tokenizer = tokenizer_of(backend)
        try:
            return render(tokenizer, messages)
        except ChatError:
            raise
        except Exception as e:  # noqa: BLE001 - the template refused this conversation
            raise ChatError(f"the model's chat template refused the messages: {e}") from None

    return render_messages
