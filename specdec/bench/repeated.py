"""The concurrency bench's repeated workload and the suffix cache's part in every cell.

Contract: ``repeated(prompts)`` is the prompt list sent twice, each prompt again after all the
others (``specdec bench --concurrency ... --repeat-workload``: an editor completing the same files
again, a class sending the same prompt), so a cache shared across requests (the method ``suffix``,
docs/suffix.md) has something to find and per-request lookup has not. ``cold_suffix(engine)``
empties the engine's suffix cache: every cell starts from nothing, so no cell drafts from an earlier
cell's text. ``tau(last_stats)`` is emitted tokens per target forward over a cell's requests, from
each request's last event's ``Stats``.
"""

from __future__ import annotations


def repeated(prompts: list) -> list:
    return list(prompts) + list(prompts)


def cold_suffix(engine) -> None:
    prop = getattr(engine, "proposers", {}).get("suffix")
    if prop is not None:
        prop.kept.clear()


def tau(last_stats: list) -> float | None:
    forwards = sum(s.target_forwards for s in last_stats if s is not None)
    return sum(s.emitted for s in last_stats if s is not None) / forwards if forwards else None
