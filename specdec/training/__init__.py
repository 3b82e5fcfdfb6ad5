"""Reproducible training of the shipped models: corpus, tokenizer, target, distilled draft, heads.

Contract: ``run.train_all`` (``specdec train``) and ``heads_train`` (``specdec train medusa|eagle``)
are resumable and write model folders with cards; nothing in the package but the CLI imports this.
docs/training.md.
"""
