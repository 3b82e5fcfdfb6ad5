"""Helpers shared by the demo's end-to-end tests."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A free TCP port on the loopback interface (never gradio's default 7860, which others may hold)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
