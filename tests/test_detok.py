"""The incremental detokenizer: joined pieces equal a full decode, multi-byte characters included."""

from __future__ import annotations

from specdec.core.detok import Detokenizer
from specdec.models.loading import DEFAULT_TARGET, load_tokenizer

TEXT = 'def naïve(x):\n    """Ünïcödé — λ → ∑, 日本語, emoji 🐍🚀."""\n    return x  # ok\n'


def test_pieces_join_to_the_full_decode_including_multibyte_characters():
    tok = load_tokenizer(DEFAULT_TARGET)
    prompt = tok.encode("# header\n", add_special_tokens=False)
    ids = tok.encode(TEXT, add_special_tokens=False)
    d = Detokenizer(tok, prompt)
    pieces = [d.push(t) for t in ids]
    assert "".join(pieces) == tok.decode(ids) == TEXT
    assert any(p == "" for p in pieces)  # some token ended inside a UTF-8 character and waited
    assert all("\ufffd" not in p for p in pieces)


def test_special_tokens_add_no_text():
    tok = load_tokenizer(DEFAULT_TARGET)
    d = Detokenizer(tok, [])
    assert d.push(tok.eos_token_id) == ""
    assert d.alone(tok.encode("return", add_special_tokens=False)[0]) != ""
