"""Proposers: one module or package per drafting method behind one Protocol (``base.py``).

``none`` (base.NoDraft), ``lookup.py``, ``draft.py``, and the two head methods as self-contained
packages (``medusa/``, ``eagle/``: module, folder format via ``folder.py``, proposer). Which ones an
engine offers, with their names, descriptions and defaults, is ``engine/methods.py``.
"""

from .base import Context, NoDraft, Proposer

__all__ = ["Context", "NoDraft", "Proposer"]
