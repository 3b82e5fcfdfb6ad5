"""Front ends over the engine's event stream: the ``specdec`` CLI (and later the demo and servers)."""
