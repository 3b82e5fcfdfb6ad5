"""The ``specdec bench`` command line (argument parsing only: no torch, no model, no transformers).

Contract: ``add_bench_parser(subparsers)`` adds the ``bench`` subcommand and returns its parser;
``--methods`` and ``--k`` are parsed into lists here (through ``specdec.cli.args``, the registry and the
one k rule), so a typo is an argparse error before any model is loaded. The default prompt file is
``$SPECDEC_ASSETS/prompts/code.jsonl``; ``--prompts`` also takes a folder or a set name (``all``,
``heldout``, a category), resolved by specdec/bench/prompts.py, not here.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from specdec.cli.args import DEFAULT_PROMPTS, add_model_args, k_list_arg, methods_arg
from specdec.core.config import K_MAX
from specdec.core.methods import METHODS, NAMES

DESCRIPTION = """\
Benchmark decoding methods against each other on the same prompts, in one process, at
temperature 0 (greedy), so every method must produce exactly the baseline's tokens.

For each prompt every row runs once (the row order rotates from prompt to prompt so that no
method always runs first or last), after a few untimed warm-up generations. Each generation is
timed with a wall clock around the whole call (prefill included), for our engine and for the
Hugging Face rows alike.

Columns of the table (definitions as in docs/bench.md and the design guide):
  tok/s med   median over prompts of (generated tokens / seconds)
  tok/s agg   total generated tokens / total seconds (long outputs weigh more)
  vs fastest  tok/s agg of the row / tok/s agg of the fastest plain decoding of the run:
              the faster of `none` and hf_greedy (with --compare-hf): the headline
  vs none     tok/s agg of the row / tok/s agg of `none`, same prompts, same run
  predicted   speedup predicted by the closed-form theory from this row's measured
              acceptance, mean draft length k and cost ratio c (see docs/bench.md)
  tau         mean accepted length: tokens emitted per target forward, counting the
              recovered or bonus token (the baseline has tau = 1.0)
  alpha       acceptance rate: accepted draft tokens / drafted tokens
  alpha_i     the same per draft position i = 1, 2, 3, 4 (accepted / drafted at depth i)
  identical   prompts whose tokens equal the `none` row's, out of all prompts

With prompts of several categories (--prompts all, heldout, a folder), a second table gives
every row per category: tok/s, speedup against the fastest plain decoding of that category's
own prompts, tau, alpha, identical.
"""

EPILOG = """\
examples:
  specdec bench                                      # none, draft, lookup on the shipped prompts
  specdec bench --limit 5 --max-new-tokens 64        # a quick look
  specdec bench --prompts all --limit 2              # two prompts of every category, a table per category
  specdec bench --prompts heldout --categories chat,rag  # the held-out set, two categories
  specdec bench --methods none,draft --k 1,2,4,auto  # one row per k: draft@k=1, draft@k=2, ...
  specdec bench --compare-hf --json bench-out/cpu.json
  specdec bench --model smollm2-135m --compare-llamacpp  # llama.cpp's server on the same GGUF and prompts
  specdec bench --target DIR --draft DIR --device cuda --dtype bfloat16

With --compare-hf three more rows run interleaved with ours, on the same model objects:
  hf_greedy    target.generate(do_sample=False)                       (must equal `none`)
  hf_assisted  target.generate(assistant_model=draft, do_sample=False)
  hf_lookup    target.generate(prompt_lookup_num_tokens=L, do_sample=False)
Transformers 5.x reads the assisted-generation settings from the DRAFT model's
generation_config: by default 20 draft tokens per step, schedule "constant", and drafting stops
early once the draft's top probability falls below 0.4 (assistant_confidence_threshold; that
threshold only adapts itself when scikit-learn is installed). The JSON records what was used.
"""


def _int_at_least(lo: int):
    what = "a positive integer" if lo == 1 else f"an integer >= {lo}"

    def parse(value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {value!r}") from None
        if n < lo:
            raise argparse.ArgumentTypeError(f"expected {what}, got {n}")
        return n

    return parse


_positive, _non_negative = _int_at_least(1), _int_at_least(0)


def add_bench_parser(subparsers) -> argparse.ArgumentParser:
    b = subparsers.add_parser(
        "bench",
        help="tokens/s, speedup, tau and alpha of each method on the same prompts (temperature 0)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    w = b.add_argument_group("workload")
    w.add_argument(
        "--prompts",
        type=Path,
        default=DEFAULT_PROMPTS,
        metavar="FILE|DIR|SET",
        help='a .jsonl file (one JSON object per line with a "prompt" string or OpenAI-style "messages", '
        'rendered through the model\'s chat template; optional "category"), a folder of them, or a set under '
        "assets/prompts/: all (every shipped category), heldout, or one category such as chat, rag, code "
        f"(default: {DEFAULT_PROMPTS}; docs/bench.md, Workloads)",
    )
    w.add_argument(
        "--categories",
        type=lambda v: [c.strip() for c in v.split(",") if c.strip()] or None,
        default=None,
        metavar="LIST",
        help="only these categories of the prompt set, e.g. chat,rag (default: all it has)",
    )
    w.add_argument(
        "--limit", type=_positive, default=None, metavar="N", help="use only the first N prompts of each category"
    )
    w.add_argument(
        "--offset",
        type=int,
        default=0,
        metavar="A",
        help="skip the first A prompts of each category (run slices, merge them: python -m specdec.bench.merge "
        "OUT IN...)",
    )
    w.add_argument(
        "--concurrency",
        type=lambda v: [_positive(x) for x in v.split(",")],
        default=None,
        metavar="LIST",
        help="instead: clients at once, e.g. 1,2,4,8,16, through the batching backend (specdec/bench/concurrency.py; "
        "default 16 prompts; --compare-hf adds transformers' continuous batching); with --backend, the largest "
        "value is the concurrent row (default 8)",
    )
    w.add_argument(
        "--max-new-tokens",
        type=_positive,
        default=128,
        metavar="N",
        help="tokens to generate per prompt (default: 128; fewer if EOS comes first)",
    )
    w.add_argument(
        "--warmup",
        type=_non_negative,
        default=2,
        metavar="N",
        help="untimed warm-up generations of every row before timing (default: 2)",
    )
    w.add_argument(
        "--repeats",
        type=_positive,
        default=1,
        metavar="N",
        help="time every (prompt, row) N times; per-prompt tok/s is the median of the "
        "repeats, counters and totals sum over all of them (default: 1); with --concurrency, every cell "
        "N times in rounds, the median run kept",
    )
    m = b.add_argument_group("methods")
    m.add_argument(
        "--methods",
        type=methods_arg,
        default=None,
        metavar="LIST",
        help=f"comma list of {', '.join(NAMES)} (default: all the loaded models allow). "
        "`none` (plain decoding, tau = 1) is always run: it is the baseline of speedup "
        "and of `identical`",
    )
    m.add_argument(
        "--k",
        type=k_list_arg,
        default=["auto"],
        metavar="LIST",
        help=f"draft length(s) for draft and lookup: comma list of 1-{K_MAX} or auto (default: auto; "
        f"for draft, auto adapts k to the measured alpha and c; for lookup, to the measured acceptance "
        f"per position and step cost, up to {METHODS['lookup'].auto_k}). Several values give one row "
        "each, named e.g. draft@k=2",
    )
    h = b.add_argument_group("Hugging Face comparison")
    h.add_argument(
        "--compare-hf",
        action="store_true",
        help="also time transformers' own generate: hf_greedy, hf_assisted (with the draft) "
        "and hf_lookup, interleaved with our rows",
    )
    h.add_argument(
        "--repeat-workload",
        action="store_true",
        help="with --concurrency: send every prompt twice, the second time after all the others (an editor or "
        "a class repeating requests), where the suffix method's shared cache drafts from the first (docs/suffix.md)",
    )
    h.add_argument(
        "--compare-vllm",
        type=lambda v: v.split(","),
        default=None,
        metavar="LIST",
        help="with --concurrency: also run these methods (e.g. none,draft) through vLLM's own server from its "
        "venv at every level (specdec/bench/vllm_rows.py; about a minute of start-up per method)",
    )
    h.add_argument(
        "--compare-llamacpp",
        action="store_true",
        help="after our rows, also run llama.cpp's llama-server on the model's GGUF file, on the same token ids: "
        "llamacpp (plain), llamacpp-ngram-simple, llamacpp-ngram-mod, with their greedy agreement with `none` "
        "(builds llama.cpp once into the cache, about 15 minutes on 2 cores; specdec llamacpp build; "
        "$SPECDEC_LLAMACPP names another llama-server; docs/bench.md)",
    )
    h.add_argument(
        "--llamacpp-threads",
        type=int,
        default=None,
        metavar="N",
        help="llama.cpp's threads with --compare-llamacpp (default: every core this process may use; "
        "our engine's count is its calibration's)",
    )
    h.add_argument(
        "--hf-assistant-tokens",
        type=_positive,
        default=None,
        metavar="N",
        help="num_assistant_tokens for hf_assisted, with schedule 'constant' (default: leave "
        "transformers' defaults: 20 tokens, constant, confidence threshold 0.4)",
    )
    h.add_argument(
        "--hf-lookup-tokens",
        type=_positive,
        default=10,
        metavar="L",
        help="prompt_lookup_num_tokens for hf_lookup (default: 10)",
    )
    w.add_argument(
        "--contention",
        action="store_true",
        help="run one CPU-bound busy process (started and stopped by the bench) during the timed "
        "runs, to measure every row under load",
    )
    o = b.add_argument_group("output")
    o.add_argument(
        "--json",
        type=Path,
        default=None,
        metavar="OUT",
        help="also write the results as JSON (schema in docs/bench.md)",
    )
    o.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    add_model_args(b)
    from specdec.cli.backend_arg import add_backend_arg

    add_backend_arg(b)  # then specdec/bench/remote.py: our engine and that server side by side
    return b
