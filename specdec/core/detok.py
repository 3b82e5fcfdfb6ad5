"""Incremental detokenizer: a stable piece of text for every generated token.

Contract: ``push(token_id) -> str`` returns the text this token adds to the output. It decodes
only a short window (a few tokens of context plus the tokens not yet released), never the whole
output. A token that ends inside a multi-byte UTF-8 character returns "" and its bytes are
released with the token that completes the character, so the concatenation of all returned
pieces equals ``tokenizer.decode(generated, skip_special_tokens=True)`` for byte-level tokenizers.
"""

from __future__ import annotations

CONTEXT_TOKENS = 4


class Detokenizer:
    def __init__(self, tokenizer, prompt_ids: list[int]) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = list(prompt_ids[-CONTEXT_TOKENS:])
        self.prefix = 0  # start of the decoding window
        self.read = len(self.ids)  # tokens before this index are released

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    def push(self, token_id: int) -> str:
        self.ids.append(int(token_id))
        before = self._decode(self.ids[self.prefix : self.read])
        after = self._decode(self.ids[self.prefix :])
        if after.endswith("\ufffd") or len(after) < len(before):
            return ""
        self.prefix = self.read
        self.read = len(self.ids)
        return after[len(before) :]

    def alone(self, token_id: int) -> str:
        """Text of a token decoded on its own (for rejected tokens, which are never output)."""
        return self._decode([int(token_id)])
