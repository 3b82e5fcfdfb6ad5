"""Continuous batching with speculative decoding (design: docs/batching.md).

``BatchBackend`` (scheduler.py) implements the ``Backend`` protocol over many requests at once:
each step every running request proposes with its own method, ONE ragged target forward scores
all rows (``BatchTarget``, target.py, on the slot cache of slots.py), and each row verifies and
commits its own path (rows.py). The draft model and Medusa's heads propose for all their rows at
once (propose.py, draft.py, ragged.py). memory.py sizes the cache. The single-request path
(``specdec/serving/local.py`` + ``specdec/engine/session.py``) is untouched, so a batch of one pays nothing there.
"""

from specdec.serving.batch.scheduler import BatchBackend

__all__ = ["BatchBackend"]
