"""The figures of a bench result: throughput per row, the honest baseline and the cost model.

Contract: ``fastest_plain(methods, hf)``, ``throughput(reps_by_prompt, none_by_prompt, base)``,
``cost_model(row, reps_by_prompt, target_ms)`` and ``depth_acceptance(events)`` turn the timed
runs of ``specdec/bench/run.py`` into the JSON-ready figures documented in docs/bench.md.

Metrics (the design guide's definitions; sums over all prompts, never averages of ratios):
- tokens/s: generated tokens / wall seconds of the whole generate call (prefill included), for our
  rows and the HF rows alike. ``tokens_per_s`` = sum tokens / sum seconds (aggregate);
  ``tokens_per_s_median`` = median over prompts of the per-prompt rate.
- speedup = tokens_per_s / tokens_per_s of ``none``; ``speedup_median`` = median over prompts of
  the per-prompt ratio. ``speedup_vs_fastest_plain`` = tokens_per_s / that of ``fastest_plain``,
  the faster of ``none`` and ``hf_greedy`` (when run): the headline figure.
- tau = emitted / target forwards; alpha = accepted / drafted (vLLM's "acceptance rate");
  alpha_tested = accepted / tested (``Stats.alpha_tested``: the probability a tested draft token is
  accepted, Leviathan et al.'s alpha, the one the i.i.d. formula takes), with its counts ``tested``
  and ``accepted`` so that merged slices recombine it; alpha_i = accepted_at[i] / drafted_at[i];
  conditional alpha_i = accepted_at[i] / tested_at[i].
- identical = prompts whose tokens equal ``none``'s (temperature 0: every exact method must).

Cost model and prediction, all from the step timings of this run:
- target_ms = median ``score`` ms of ``none``'s steps (one 1-token target forward).
- draft_ms_per_token = median over drafting steps of ``propose`` ms / draft size.
- draft rows:  c = draft_ms_per_token / target_ms (one draft forward per drafted token);
  lookup rows: c = median ``propose`` ms per step / target_ms (no model: the cost is per step).
  medusa / eagle rows (trees): c as for lookup (one head pass per step); ``tree_nodes`` = mean
  nodes per step; ``accept_rate_per_depth`` a_d = P(a node at depth d accepted | depth d tested);
  E = the measured tau (no closed form for a tree), so "predicted" checks the cost model only.
- k_mean = drafted / steps (mean k actually drafted).
- r_score = median ``score`` ms of the row / target_ms: verifying k+1 tokens costs more than one.
- ``predicted_speedup_iid`` = E / (k_mean c + 1)       (lookup: E / (c + 1))
  ``predicted_speedup``     = E / (k_mean c + r_score) (lookup: E / (c + r_score))
  with E = expected_tokens(alpha_tested, k_mean) = (1 - alpha^(k+1)) / (1 - alpha) of specdec.core.theory
  (accepted / tested, never accepted / drafted: the latter is a (1 - a^k) / (k (1 - a)) < a).
  The gap between predicted and measured speedup is what the i.i.d. model leaves out: the verify
  step, Python overhead and the draft's cache resynchronisation.
"""

from __future__ import annotations

import statistics

from specdec.core.events import Stats
from specdec.core.methods import METHODS
from specdec.core.theory import expected_tokens

TREE_METHODS = tuple(n for n, m in METHODS.items() if m.tree)  # their cost is per step, not per token
PER_STEP_COST = tuple(n for n, m in METHODS.items() if m.deterministic and m.drafts != "nothing")


def _median(xs):
    return statistics.median(xs) if xs else None


def _ratio(a, b):
    return a / b if a is not None and b else None


def fastest_plain(methods: dict, hf: dict) -> dict:
    """The faster of our ``none`` and transformers' greedy ``generate`` (when run): the plain
    decoding a user would otherwise run, and the honest baseline of every speedup."""
    plain = {"none": methods["none"]}
    if "hf_greedy" in hf:
        plain["hf_greedy"] = hf["hf_greedy"]
    name = max(plain, key=lambda n: plain[n]["tokens_per_s"] or 0.0)
    return {"name": name, "tokens_per_s": plain[name]["tokens_per_s"]}


def throughput(reps_by_prompt, none_by_prompt, base) -> dict:
    tokens = sum(len(t) for reps in reps_by_prompt for t, _, _ in reps)
    seconds = sum(dt for reps in reps_by_prompt for _, dt, _ in reps)
    none_tokens = sum(len(t) for reps in none_by_prompt for t, _, _ in reps)
    none_seconds = sum(dt for reps in none_by_prompt for _, dt, _ in reps)
    per_prompt = [_median([len(t) / dt for t, dt, _ in reps]) for reps in reps_by_prompt]
    per_none = [_median([len(t) / dt for t, dt, _ in reps]) for reps in none_by_prompt]
    tps, tps_none = _ratio(tokens, seconds), _ratio(none_tokens, none_seconds)
    return {
        "tokens_per_s": tps,
        "tokens_per_s_median": _median(per_prompt),
        "speedup": _ratio(tps, tps_none),
        "speedup_median": _median([a / b for a, b in zip(per_prompt, per_none) if b]),
        "identical": sum(all(t == b for t, _, _ in reps) for reps, b in zip(reps_by_prompt, base)),
        "n_prompts": len(reps_by_prompt),
        "total_tokens": tokens,
        "total_s": seconds,
    }


def cost_model(row, reps_by_prompt, target_ms: float | None) -> dict:
    results = [res for reps in reps_by_prompt for _, _, res in reps]
    st = Stats.total([res.stats for res in results])
    steps = [ev for res in results for ev in res.events]
    drafting = [ev for ev in steps if ev.draft_size > 0]
    out = {
        "tau": st.tau,
        "alpha": st.alpha,
        "alpha_tested": st.alpha_tested,
        "tested": sum(st.tested_at),
        "accepted": sum(st.accepted_at),
        "alpha_per_position": st.alpha_per_position,
        "conditional_alpha_per_position": st.conditional_alpha_per_position,
        "target_ms": target_ms,
        "draft_ms_per_token": _median([ev.timings_ms["propose"] / ev.draft_size for ev in drafting]),
        "c": None,
        "k_mean": st.drafted / st.steps if st.steps else None,
        "r_score": _ratio(_median([ev.timings_ms["score"] for ev in steps]), target_ms),
        "predicted_speedup": None,
        "predicted_speedup_iid": None,
        "auto_plain_steps": st.auto_plain,  # steps where auto k chose plain decoding
    }
    if row.method == "none":
        out.update(predicted_speedup=1.0, predicted_speedup_iid=1.0, k_mean=0.0)
        return out
    if row.method in TREE_METHODS:
        out.update(tree_nodes=out["k_mean"], accept_rate_per_depth=depth_acceptance(steps))
    if row.method in PER_STEP_COST:
        out["c"] = _ratio(_median([ev.timings_ms["propose"] for ev in steps]), target_ms)
    else:
        out["c"] = _ratio(out["draft_ms_per_token"], target_ms)
    if st.alpha_tested is None or out["c"] is None or out["r_score"] is None:
        return out
    k_mean = out["k_mean"]
    e = expected_tokens(st.alpha_tested, k_mean)  # accepted / tested: the i.i.d. formula's alpha
    if row.method in TREE_METHODS:  # no i.i.d. chain formula for a tree: use the measured tau
        e = st.tau
    cost = out["c"] if row.method in PER_STEP_COST else k_mean * out["c"]
    out.update(predicted_speedup=e / (cost + out["r_score"]), predicted_speedup_iid=e / (cost + 1.0))
    return out


def depth_acceptance(events) -> list[float | None]:
    """a_d = P(some node at depth d is accepted | the verifier tested depth d), over steps: for a
    tree, the per-depth acceptance that multiplies into tau (alpha_i divides by every node drafted
    at depth i, siblings included)."""
    reached: list[int] = []
    accepted: list[int] = []
    for ev in events:
        tested = {pc.position for pc in ev.pieces if pc.kind in ("accepted", "rejected")}
        ok = {pc.position for pc in ev.pieces if pc.kind == "accepted"}
        for d in tested:
            while len(reached) < d:
                reached.append(0)
                accepted.append(0)
            reached[d - 1] += 1
            accepted[d - 1] += d in ok
    return [a / r if r else None for a, r in zip(accepted, reached)]
