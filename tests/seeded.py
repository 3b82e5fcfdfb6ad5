"""Fixed k per method for tests that compare seeded samples between two runs.

Why: with ``k = "auto"`` the draft model's cap, prompt lookup's length and Medusa/EAGLE's
plain-step fallback follow measured timings (specdec/proposers/draft.py, lookup_k.py, fallback.py),
so which random numbers a request draws, and so its seeded samples, depend on the machine's speed
at that moment. Greedy tokens never do. A fixed k makes seeded runs reproducible (lookup's 8 is
what its auto meant before it adapted).
"""

FIXED_K = {"draft": 3, "lookup": 8, "medusa": 16, "eagle": 16}


def fixed_k(method: str, draft_k: int = 3) -> int | str:
    """The k a reproducible seeded test gives ``method`` (``draft_k`` for the draft model)."""
    return draft_k if method == "draft" else FIXED_K.get(method, "auto")
