"""Chat in the terminal: multi-turn, each reply streamed with its tokens' fates in colour.

Contract: ``add_arguments(parser)`` declares the options and imports nothing heavy; ``run(args)``
loads the engine (``--model``; a model without a chat template is a one-line error, exit 2), then
reads the user's turns from stdin one line at a time, until end of input or ``/quit``, so it works
typed and piped (``printf 'Hi\\nWhat is 2+2?\\n' | specdec chat`` answers twice and exits).
``/reset`` forgets the conversation (``--system`` stays). Each reply is the model's chat template
over the whole conversation (``specdec.engine.chat``) decoded by ``engine.stream``: written to
stdout as it comes, coloured by fate in a terminal (``specdec/cli/render.py``, as ``specdec
generate``), then one stats line on stderr (method, k, tau, alpha, tokens/s). Ctrl-C during a
reply stops that reply (what was written stays in the conversation); at the prompt it quits.
The default method is the best the model has: the draft model if it has one, else prompt lookup,
which copies from earlier turns. Why a prompt per turn: the engine keeps the common prefix of the
previous turn's prompt cached, so a turn costs only its new tokens.
"""

from __future__ import annotations

import argparse
import sys

CHAT_ORDER = ("draft", "lookup", "none")  # the default method: the first the model offers
COMMANDS = "/reset forgets the conversation, /quit (or end of input) leaves"
EPILOG = f"""examples:
  specdec chat --model smollm2-135m                    # type a line, get a reply; {COMMANDS}
  specdec chat --method lookup --k 6 --system "Answer briefly."
  printf 'Hi\\nWhat is 2+2?\\n' | specdec chat --method lookup   # two replies, then exit
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from specdec.cli.args import add_model_args, add_sampling_args
    from specdec.core.methods import NAMES, describe

    p.epilog = EPILOG
    p.formatter_class = argparse.RawTextHelpFormatter  # the method list keeps its lines
    p.add_argument(
        "--method",
        default=None,
        choices=list(NAMES),
        help="the drafting method (default: draft if the model has a draft model, else lookup):\n" + describe(),
    )
    p.add_argument("--k", default="auto", help="draft tokens per step, 1-16, or auto (as specdec generate)")
    p.add_argument("--max-new-tokens", type=int, default=256, help="longest reply in tokens (default 256)")
    p.add_argument("--confidence", type=float, default=0.2, help="draft method: stop drafting below this")
    p.add_argument("--system", default=None, metavar="TEXT", help="a system message opening the conversation")
    p.add_argument("--no-colour", action="store_true", help="plain text even in a terminal")
    add_sampling_args(p)
    add_model_args(p)


def run(args: argparse.Namespace) -> int:
    from specdec.cli.args import load_engine
    from specdec.core.config import ConfigError
    from specdec.engine.chat import has_template

    spec = _spec(args, None)  # bad settings fail before the model loads
    engine = load_engine(args)
    if not has_template(engine.tokenizer):
        raise ConfigError("this model has no chat template (a base model): use specdec generate, or a chat model")
    spec = _spec(args, args.method or _default_method(engine.methods))
    engine.proposer(spec.method)  # a method the model cannot run: ConfigError naming what it can
    Chat(engine, spec, args.system, colour=sys.stdout.isatty() and not args.no_colour).loop(sys.stdin)
    return 0


def _default_method(methods) -> str:
    from specdec.core.methods import preferred

    return preferred(tuple(methods), CHAT_ORDER)


def _spec(args: argparse.Namespace, method: str | None):
    from specdec.core.config import GenerateSpec, SamplingParams, parse_k

    return GenerateSpec(
        method=method or "none",
        k=parse_k(args.k),
        max_new_tokens=args.max_new_tokens,
        confidence=args.confidence,
        sampling=SamplingParams(args.temperature, args.top_k, args.top_p, args.seed),
    )


class Chat:
    """One conversation with one engine: ``turn(text)`` adds the user's message and streams the reply."""

    def __init__(self, engine, spec, system: str | None, colour: bool) -> None:
        self.engine, self.spec, self.colour = engine, spec, colour
        self.opening = [{"role": "system", "content": system}] if system else []
        self.messages = list(self.opening)

    def loop(self, lines) -> None:
        interactive = lines.isatty()
        if interactive:
            from specdec.cli.render import legend

            print(f"specdec chat ({self.spec.method}); {COMMANDS}", file=sys.stderr)
            if self.colour:
                print(legend(), file=sys.stderr)
        while (line := _read(lines, interactive)) is not None:
            text = line.strip()
            if text == "/quit":
                break
            if text == "/reset":
                self.messages = list(self.opening)
                print("(conversation reset)", file=sys.stderr)
            elif text:
                self.turn(text)

    def turn(self, text: str) -> None:
        from specdec.cli.render import stats_line
        from specdec.core.config import ConfigError
        from specdec.engine.chat import render

        self.messages.append({"role": "user", "content": text})
        try:
            events = self.engine.stream(render(self.engine.tokenizer, self.messages), self.spec)
            reply, stats = self._write(events)
        except ConfigError as e:  # e.g. the conversation no longer fits the context: /reset
            self.messages.pop()
            print(f"specdec chat: error: {e} (/reset starts over)", file=sys.stderr)
            return
        self.messages.append({"role": "assistant", "content": reply})
        if stats is not None:
            k = self.spec.k
            print(f"[{self.spec.method} k {k}] {stats_line(stats)}", file=sys.stderr, flush=True)

    def _write(self, events) -> tuple[str, object]:
        """Stream the reply to stdout; Ctrl-C ends it early. Returns its text and final stats."""
        from specdec.cli.render import ansi_piece

        parts, stats = [], None
        try:
            for ev in events:
                shown = (ansi_piece(pc) if self.colour else pc.text for pc in ev.pieces if self.colour or pc.emitted)
                sys.stdout.write("".join(shown))
                sys.stdout.flush()
                parts.append(ev.text)
                stats = ev.stats
        except KeyboardInterrupt:
            events.close()
            sys.stdout.write(" [stopped]")
        sys.stdout.write("\n")
        sys.stdout.flush()
        return "".join(parts), stats


def _read(lines, interactive: bool) -> str | None:
    """The next line the user typed, or None at end of input (or Ctrl-C at the prompt)."""
    try:
        if interactive:
            return input("> ")
        line = lines.readline()
        return line if line else None
    except (EOFError, KeyboardInterrupt):
        return None
