"""Serving: the ``Backend`` seam every front end talks to, and its three implementations.

Contract: ``backend.Backend`` (methods, limits, capabilities, ``submit`` -> a ``Handle`` of step
events, ``cancel``, ``shutdown``); ``local.LocalBackend`` (one engine, one model thread, a FIFO
queue), ``batch.BatchBackend`` (continuous batching: every row runs ``specdec.core.step``'s one
step after ONE ragged target forward; the load policy adapts k) and ``remote.RemoteBackend`` (an
OpenAI-compatible server: vLLM or ``specdec serve``). The backend owns the model thread; front
ends hold no locks or threads of their own around the engine.
"""
