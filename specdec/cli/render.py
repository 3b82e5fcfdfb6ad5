"""Terminal rendering of step events: each token coloured by its fate (pure functions).

Contract: ``ansi_piece(piece)`` returns the piece's text wrapped in ANSI colour codes (accepted
green, rejected red struck through, recovered orange, bonus blue, plain uncoloured);
``stats_line(stats)`` is a one-line summary with tau, alpha and tokens/s.
"""

from __future__ import annotations

from specdec.core.events import Piece, Stats

COLOURS = {
    "accepted": "\x1b[32m",
    "rejected": "\x1b[31;9m",
    "recovered": "\x1b[38;5;208m",
    "bonus": "\x1b[34m",
    "plain": "",
}
RESET = "\x1b[0m"


def ansi_piece(piece: Piece) -> str:
    code = COLOURS.get(piece.kind, "")
    return f"{code}{piece.text}{RESET}" if code and piece.text else piece.text


def legend() -> str:
    return " ".join(ansi_piece(Piece(0, k, k, 0, 0)) for k in ("accepted", "rejected", "recovered", "bonus"))


def _fmt(x: float | None, spec: str) -> str:
    return "n/a" if x is None else format(x, spec)


def stats_line(stats: Stats) -> str:
    return (
        f"tokens {stats.emitted}  steps {stats.steps}  tau {_fmt(stats.tau, '.2f')}  "
        f"alpha {_fmt(stats.alpha, '.2f')}  {_fmt(stats.tokens_per_s, '.1f')} tok/s  "
        f"({stats.elapsed_s * 1000:.0f} ms, prefill {stats.prefill_s * 1000:.0f} ms)"
    )
