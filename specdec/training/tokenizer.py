"""Byte-level BPE tokenizer for Python source, trained with the ``tokenizers`` library.

Contract: ``train_tokenizer(texts, vocab_size, out_dir)`` writes a folder that
``transformers.AutoTokenizer.from_pretrained(out_dir)`` loads, with ``<|endoftext|>`` as the EOS
(and BOS) token; the same texts and vocabulary size give the same tokenizer.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

EOS = "<|endoftext|>"


def train_tokenizer(texts: Iterable[str], vocab_size: int, out_dir: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=True,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=EOS, bos_token=EOS, unk_token=None, pad_token=EOS, model_max_length=512
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(out_dir))
    return tok
