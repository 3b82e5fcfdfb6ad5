"""Proposers: one module or package per drafting method behind one protocol (``specdec/core/proposer.py``).

Contract: ``none`` is ``specdec.core.proposer.NoDraft``; ``lookup.py`` (with its auto k,
``lookup_k.py``), ``draft.py`` (the draft model, its k rule and per-request state ``draft_k.py``, its
per-document caches through ``models/prefixes.KeptStates`` and its catch-up at prefill
``draft_warm.py``), and the two head methods as self-contained packages
(``medusa/``, ``eagle/``: module, folder format via ``folder.py``, proposer). ``factories.py`` builds
each from what an engine loaded; ``specdec/core/methods.py`` names, describes and caps them. Each
model-backed method keeps one request's state in an object of its own (``draft_k.DraftState``,
``eagle/state.EagleState``, ``medusa/batch.MedusaState``, ``lookup.LookupState``) and has one
proposal for many states, its batch form (``batch_draft.BatchDraft``, ``eagle/batch.BatchEagle``,
``medusa/batch.BatchMedusa``, ``lookup.LookupRows``), whose batch of one is the solo ``propose``.
Imports ``specdec.core``, ``specdec.models`` and ``specdec.fast`` only.
"""
