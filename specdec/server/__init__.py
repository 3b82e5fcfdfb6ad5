"""The network front end of ``specdec serve``: WebSocket (token fates) and OpenAI-compatible HTTP.

Contract: ``ws_protocol``, ``openai_protocol``, ``openai_chat`` and ``openai_replies`` are pure
(parse requests, build replies); ``ws_server`` and ``openai_api`` are the transports over a
``specdec.serving`` backend. The only model-side thing touched here is the tokenizer's chat
template (``chat_prompt``: chat messages become a prompt), never a model or a cache.
Protocols: docs/websocket.md, docs/scale.md.
"""
