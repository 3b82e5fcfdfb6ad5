"""The optimal-k table of docs/theory-speedup.md: ``python -m specdec.bench.docs.theory_table`` prints it.

Contract: ``table(alphas, cs)`` is a markdown table of ``specdec.core.theory.optimal_k`` (k and its
speedup, r = 1) over a grid of alpha and c; "none" where no k beats plain decoding.
"""

from __future__ import annotations

from collections.abc import Sequence

from specdec.core.theory import optimal_k


def table(
    alphas: Sequence[float] = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95), cs: Sequence[float] = (0.01, 0.05, 0.1, 0.2, 0.3, 0.5)
) -> str:
    """Markdown table of the optimal k and its speedup for a grid of alpha and c (r = 1)."""
    head = "| alpha \\ c | " + " | ".join(f"{c:g}" for c in cs) + " |"
    lines = [head, "|---" * (len(cs) + 1) + "|"]
    for a in alphas:
        cells = []
        for c in cs:
            k, s = optimal_k(a, c, 64)
            cells.append(f"k={k}: {s:.2f}x" if k else "none")
        lines.append(f"| {a:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
