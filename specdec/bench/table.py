"""The text tables ``specdec bench`` prints: ``format_table(result)`` from the JSON-ready result of
``specdec.bench.run.run_bench`` (columns defined in ``specdec/cli/bench_args.py``'s description and docs/bench.md;
llama.cpp's rows last, with their agreement below),
and ``format_categories(result)``, one line per (category, row) from the rows' ``categories``
(specdec/bench/categories.py), each category's speedups against its own fastest plain decoding.
"""

from __future__ import annotations


def _f(x, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def format_table(result: dict) -> str:
    """An aligned text table: our rows, then the HF rows, then the cost model per row."""
    head = [
        "row",
        "tok/s med",
        "tok/s agg",
        "vs fastest",
        "vs none",
        "predicted",
        "tau",
        "alpha",
        "alpha_i (1-4)",
        "identical",
    ]
    lines = []
    for name, d in list(result["methods"].items()) + list(result["hf"].items()) + list(_lc(result).items()):
        alphas = " ".join(_f(a, ".2f") for a in (d.get("alpha_per_position") or [])[:4])
        lines.append(
            [
                name,
                _f(d["tokens_per_s_median"], ".1f"),
                _f(d["tokens_per_s"], ".1f"),
                _f(d.get("speedup_vs_fastest_plain"), ".2f") + "x",
                _f(d["speedup"], ".2f") + "x",
                _f(d.get("predicted_speedup"), ".2f"),
                _f(d.get("tau"), ".2f"),
                _f(d.get("alpha"), ".2f"),
                alphas or "-",
                f"{d['identical']}/{d['n_prompts']}",
            ]
        )
    out = _aligned(head, lines, (0, 8))
    cfg = result["config"]
    target_ms = next(iter(result["methods"].values()))["target_ms"]
    fastest = result.get("fastest_plain")
    if fastest:
        out.append(
            f"\nvs fastest = tok/s agg / that of the fastest plain decoding in this run: "
            f"{fastest['name']} at {_f(fastest['tokens_per_s'], '.1f')} tok/s"
        )
    out.append(
        f"\n{cfg['n_prompts']} prompts x {cfg['max_new_tokens']} new tokens, temperature 0, "
        f"{cfg['machine']['torch_threads']} torch threads; target forward {_f(target_ms, '.2f')} ms"
    )
    for name, d in result["methods"].items():
        if name != "none":
            out.append(
                f"  {name}: k_mean {_f(d['k_mean'], '.2f')}  c {_f(d['c'], '.3f')}  "
                f"r_score {_f(d['r_score'], '.2f')}  predicted (i.i.d., r=1) {_f(d['predicted_speedup_iid'], '.2f')}"
                + (f"  plain steps by auto k {d['auto_plain_steps']}" if d.get("auto_plain_steps") else "")
            )
            if "accept_rate_per_depth" in d:
                rates = " ".join(_f(a, ".2f") for a in d["accept_rate_per_depth"])
                out.append(
                    f"    tree: {_f(d['tree_nodes'], '.1f')} nodes per step, acceptance per depth "
                    f"(accepted | depth reached) {rates or '-'}"
                )
    out += _llamacpp_lines(result)
    return "\n".join(out)


def _lc(result: dict) -> dict:
    return result.get("llamacpp") or {}


def _llamacpp_lines(result: dict) -> list[str]:
    """Per llama.cpp row: its greedy agreement with `none` and its drafts (docs/bench.md)."""
    rows, cfg = _lc(result), result["config"].get("llamacpp") or {}
    if not rows:
        return []
    out = [
        f"\nllama.cpp rows: llama-server on {cfg.get('gguf')}, threads {cfg.get('threads')}, the same token ids "
        f"(tokenized alike from the text: {cfg.get('tokenize_agrees', '-')}/{result['config']['n_prompts']})"
    ]
    for name, d in rows.items():
        out.append(
            f"  {name}: agreement with none {d['identical']}/{d['n_prompts']} identical, mean common prefix "
            f"{_f(d['mean_common_prefix'], '.1f')} of {_f(d['mean_base_len'], '.1f')} tokens; "
            f"drafted {d['drafted']}, accepted {d['accepted']}"
        )
    return out


def _aligned(head: list[str], lines: list[list[str]], left: tuple[int, ...]) -> list[str]:
    widths = [max(len(r[i]) for r in [head] + lines) for i in range(len(head))]
    fmt = lambda r: "  ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
    return [fmt(head), "  ".join("-" * w for w in widths)] + [fmt(r) for r in lines]


def format_categories(result: dict) -> str:
    """Per category, every row: median tok/s, speedup against the category's fastest plain
    decoding, tau, alpha, identical. Empty when the rows carry no categories."""
    rows = {**result["methods"], **result["hf"], **_lc(result)}
    fastest = (result.get("fastest_plain") or {}).get("categories") or {}
    head = ["category", "row", "tok/s med", "tok/s agg", "vs fastest", "tau", "alpha", "identical"]
    lines = []
    for cat in fastest:
        shown = [(name, d["categories"][cat]) for name, d in rows.items() if cat in (d.get("categories") or {})]
        for j, (name, c) in enumerate(shown):
            lines.append(
                [
                    f"{cat} ({c['n_prompts']})" if j == 0 else "",
                    name,
                    _f(c["tokens_per_s_median"], ".1f"),
                    _f(c["tokens_per_s"], ".1f"),
                    _f(c.get("speedup_vs_fastest_plain"), ".2f") + "x",
                    _f(c.get("tau"), ".2f"),
                    _f(c.get("alpha"), ".2f"),
                    f"{c['identical']}/{c['n_prompts']}",
                ]
            )
    if not lines:
        return ""
    base = ", ".join(f"{cat} {f['name']}" for cat, f in fastest.items())
    return "\n".join(
        ["\nper category (vs fastest: against the fastest plain decoding of the same category's prompts)"]
        + _aligned(head, lines, (0, 1))
        + [f"fastest plain per category: {base}"]
    )
