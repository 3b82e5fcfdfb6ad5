"""The bench's figures per workload category (chat, summarise, rag, code...): one run, sliced.

Contract: ``category_figures(runs, base, categories, ours)`` takes the timed runs of
``specdec/bench/run.py`` (``runs[row][prompt]`` = one ``(tokens, seconds, result or None)`` per
repeat), ``none``'s tokens per prompt (``base``), the category of every prompt, and the names of
our engine's rows (``ours``; the others are transformers' rows, which have no step counters). It
returns ``(per_row, fastest)``: ``per_row[row][category]`` holds that row's figures over that
category's prompts only, defined exactly as the whole run's (``specdec.bench.metrics``):
``tokens_per_s`` (sum tokens / sum seconds), ``tokens_per_s_median``, ``speedup`` (against
``none`` on the same prompts), ``speedup_median``, ``identical``, ``n_prompts``, ``total_tokens``,
``total_s``, ``speedup_vs_fastest_plain``, and for our rows ``tau``, ``alpha``, ``alpha_tested``
with its counts ``tested`` and ``accepted``, and ``k_mean`` (so that merged slices recombine them,
specdec/bench/merge.py). ``fastest[category]`` is ``{"name", "tokens_per_s"}``: the faster of
``none`` and ``hf_greedy`` (when it ran) on that category's prompts, the baseline of that
category's ``speedup_vs_fastest_plain``: a category is compared with the plain decoding of the
same prompts, not with the run's average. Categories keep the order of their first prompt.

Why: one average over mixed workloads hides what a method is for (prompt lookup copies from a
passage, a draft model guesses fluent prose); a user asks "how fast on my kind of prompt".
"""

from __future__ import annotations

from specdec.bench.metrics import fastest_plain, throughput
from specdec.core.events import Stats


def _ratio(a, b):
    return a / b if a is not None and b else None


def groups(categories: list[str]) -> dict[str, list[int]]:
    """Prompt indices of each category, categories in order of first appearance."""
    out: dict[str, list[int]] = {}
    for i, c in enumerate(categories):
        out.setdefault(c, []).append(i)
    return out


def counters(reps_by_prompt) -> dict:
    """tau, alpha, alpha_tested (with its counts) and k_mean of our rows' results, summed."""
    st = Stats.total([res.stats for reps in reps_by_prompt for _, _, res in reps])
    return {
        "tau": st.tau,
        "alpha": st.alpha,
        "alpha_tested": st.alpha_tested,
        "tested": sum(st.tested_at),
        "accepted": sum(st.accepted_at),
        "k_mean": st.drafted / st.steps if st.steps else None,
    }


def category_figures(
    runs: dict[str, list[list]], base: list[list[int]], categories: list[str], ours: set[str] | list[str]
) -> tuple[dict[str, dict[str, dict]], dict[str, dict]]:
    if len(categories) != len(base):
        raise ValueError(f"{len(categories)} categories for {len(base)} prompts")
    per_row: dict[str, dict[str, dict]] = {name: {} for name in runs}
    fastest: dict[str, dict] = {}
    for cat, idx in groups(categories).items():
        sub = {name: [reps[i] for i in idx] for name, reps in runs.items()}
        figs = {name: throughput(sub[name], sub["none"], [base[i] for i in idx]) for name in runs}
        for name in runs:
            if name in ours:
                figs[name].update(counters(sub[name]))
        hf = {"hf_greedy": figs["hf_greedy"]} if "hf_greedy" in figs else {}
        fastest[cat] = fastest_plain({"none": figs["none"]}, hf)
        for name, d in figs.items():
            d["speedup_vs_fastest_plain"] = _ratio(d["tokens_per_s"], fastest[cat]["tokens_per_s"])
            per_row[name][cat] = d
    return per_row, fastest
