"""The network front end of ``specdec serve``: WebSocket (token fates) and OpenAI-compatible HTTP.

Contract: ``ws_protocol`` and ``openai_protocol`` are pure (parse requests, build replies);
``ws_server`` and ``openai_api`` are the transports over a ``specdec.serving`` backend. Nothing here
touches a tokenizer, a model or a cache. Protocols: docs/websocket.md.
"""
