"""The models: the target with its forwards and KV caches, and loading from local folders.

Contract: ``target.Target`` is one request's target (prefill, one scoring forward per step over
[pending] + draft with a tree mask, commit of the accepted path; invariant I1 of
docs/architecture.md); ``batch_target.BatchTarget`` is the same over many KV slots (``slots``) in one
ragged forward. Their forwards are transformers' decoder or the lean fused Llama layers (``lean``,
``lean_target``, ``lean_rows``, ``ragged`` for the batch's draft model), with linears through
``packed``; ``cache`` (one request) and ``slots`` (the batch) are the only modules that touch
transformers' ``Cache`` internals. ``loading`` reads Hugging Face folders offline with clear errors;
``prefixes`` keeps several prompt prefixes warm. Imports only ``specdec.core`` and
``specdec.kernels`` (the native loops ``native`` and ``blocks`` load), and torch, transformers.
"""
