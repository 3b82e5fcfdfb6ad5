"""Chat: a conversation (``[{"role", "content"}, ...]``) as the prompt text a model's chat template
makes of it, so every front end's chat mode decodes through the same loop and verifier.

Contract: ``render(tokenizer, messages)`` checks the messages (a non-empty list of dicts with a
``role`` in system/user/assistant/tool and a string ``content``; a ``ChatError`` names what is
wrong) and returns the template's text with the assistant's turn opened (``add_generation_prompt``).
A model without a chat template raises ``NoTemplate`` (a ``ChatError``) saying so (its front ends
offer completion only). The text is a prompt like any other: speculation carries across turns
because each turn's prompt extends the last one (lookup copies from earlier turns, the prompt-prefix
cache keeps the shared part; specdec/models/prefixes.py).
"""

from __future__ import annotations

ROLES = ("system", "user", "assistant", "tool")


class ChatError(ValueError):
    pass


class NoTemplate(ChatError):
    """The model has no chat template: the messages are fine, the model cannot take them."""


def has_template(tokenizer) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def check(messages) -> list[dict]:
    if not isinstance(messages, list) or not messages:
        raise ChatError("messages must be a non-empty list of {role, content} objects")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise ChatError(f"messages[{i}] must be an object with role and content")
        role, content = m.get("role"), m.get("content")
        if role not in ROLES:
            raise ChatError(f"messages[{i}].role must be one of {', '.join(ROLES)}; got {role!r}")
        if isinstance(content, list):  # OpenAI's content parts: text parts only
            if not all(isinstance(p, dict) and p.get("type") == "text" for p in content):
                raise ChatError(f"messages[{i}].content: only text parts are supported")
            content = "".join(str(p.get("text", "")) for p in content)
        if not isinstance(content, str):
            raise ChatError(f"messages[{i}].content must be a string")
        out.append({"role": role, "content": content})
    return out


def render(tokenizer, messages) -> str:
    """The prompt text for ``messages`` under the tokenizer's chat template, the reply's turn open."""
    msgs = check(messages)
    if not has_template(tokenizer):
        raise NoTemplate("this model has no chat template (a base model): use completion, or --model smollm2-135m")
    return tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
