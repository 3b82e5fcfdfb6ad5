"""Proposers: one file per drafting method behind one Protocol (see ``base.py``)."""
from .base import Context, Proposer

__all__ = ["Context", "Proposer"]
