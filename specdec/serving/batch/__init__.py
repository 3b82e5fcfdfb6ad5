"""Continuous batching with speculative decoding (design: docs/batching.md).

``BatchBackend`` (scheduler.py) implements the ``Backend`` protocol over many requests at once:
each step every running request proposes with its own method, ONE ragged target forward scores
all rows (``BatchTarget``, models/batch_target.py, on the slot cache of models/slots.py), and each row verifies and
commits its own path (rows.py). Every row holds its own proposer state and each method's rows
propose in one call of its batch form (propose.py; the draft model, Medusa's heads and EAGLE's layer
batched over their rows). memory.py sizes the cache. The single-request path
(``specdec/serving/local.py`` + ``specdec/engine/session.py``) is untouched, so a batch of one pays nothing there.
"""

from specdec.serving.batch.scheduler import BatchBackend

__all__ = ["BatchBackend"]
