"""Reproducible training of the shipped models: corpus, tokenizer, target, distilled draft.

Entry point: ``specdec train`` (see ``app/cli.py``), implemented in :mod:`tools.training.run`.
"""
