"""Token healing, exact: the continuation is the target's, conditioned on starting with given text.

Why: a tokenizer merges a space with the next word and a newline with the next line's indentation
(``"\\n        return"`` is ``'\\n       '`` + ``' return'``). A prompt that ends mid-word or after
indentation ends at a split the model never saw in training. The caller backs the prompt off to
a boundary the model knows (``split`` finds one in text) and passes the backed-off text as
``GenerateSpec.heal``; the engine then draws the first tokens so that they spell it out.

Contract:
- ``split(text, max_chars)`` is the index where the heal text starts: the trailing word (with its
  leading space), the trailing run of punctuation (likewise), or the last space or tab of a
  trailing run of whitespace; ``len(text)`` when there is nothing to back off. The language
  server's cursor uses it; ``split_prompt`` (a whole prompt: the demo, the API) also backs off a
  trailing run of whitespace holding a newline.
- ``plan(vocab, heal, max_nodes)`` is the ``Trie`` of every token sequence that stays inside
  ``heal`` (each token a strict prefix of the text still to spell); each node knows the tokens
  that finish it (their text starts with what is left). Too many nodes: None.
- ``choose(trie, logits, sampling, generator)`` picks a path and its finishing token from the
  target's logits at the root and at every node (one forward over the trie, ``Target.score``).
- ``fit(engine, ids, heal)`` gives the prompt and trie (a long word's head moves into the prompt);
  ``finish(run, trie, logits, commit, eos_ids, score_ms)`` takes the logits of that forward (the
  caller's: the single-request target or a batch row), commits the path, extends ``run.tokens``
  and returns the first ``StepEvent``. Its pieces carry all the tokens; their
  text is what comes after the heal text (the caller already has the heal text).

Why this keeps the target's distribution: let Y be a continuation drawn from the target (after
``to_probs``) given the backed-off prompt, and E the event "decode(Y) starts with the heal text".
Every Y in E splits uniquely into x1..x(m-1), each a strict prefix of what is left of the text,
and xm, whose text covers the rest. ``c(node)`` = P(E | the tokens to that node) is exact: the
finishing tokens' mass plus, for each child, its probability times its ``c``. Drawing each token
with weight p(x) c(x) and renormalising draws the path from P(path | E); the tokens after xm are
the unchanged loop. So the output is distributed as the target conditioned on the user's text:
conditioning, not editing. Temperature 0 is the limit T -> 0: the path whose summed logit deficit
(max logit of the row minus the chosen token's logit) is least, ties to the lowest token id; for a
one-token heal, the argmax over the tokens that start with the heal text. If top_k / top_p leave
E no mass, the temperature-0 rule decides (conditioning on an impossible event is undefined).
Tokens that decode alone to text with U+FFFD (partial UTF-8) and special tokens are never
candidates, so the conditioning is exact for heal text made of whole characters of such tokens.
"""

from __future__ import annotations

import bisect
import re
import time
from dataclasses import dataclass
from functools import cached_property

import torch

from specdec.core.config import ConfigError
from specdec.core.events import Piece, StepEvent
from specdec.core.sampling import to_probs
from specdec.core.tree import Draft

MAX_CHARS = 16  # the longest heal text ``split`` proposes
MAX_NODES = 24  # the most trie nodes one healing forward scores (a wider forward costs latency)
_TAIL = re.compile(r"(?: ?[A-Za-z0-9_]+| ?[!-/:-@\[-\^`{-~]+|[ \t])\Z")  # ASCII only


def split_prompt(text: str, max_chars: int = MAX_CHARS) -> int:
    """``split`` for a whole prompt (the demo's, the API's): also backs off a trailing run of
    whitespace that holds a newline (``"def main():\n"``), which tokenizers merge with the next
    line's indentation; a prompt ending in a newline otherwise ends at a split the model never saw."""
    m = re.search(r"[ \t]*\n\s*\Z", text[-max_chars - 1 :]) if text else None
    if m is not None and len(m.group(0)) <= max_chars and len(m.group(0)) < len(text):
        return len(text) - len(m.group(0))
    return split(text, max_chars)


def split(text: str, max_chars: int = MAX_CHARS) -> int:
    """Where the heal text of ``text`` starts (see the module docstring)."""
    m = _TAIL.search(text[-max_chars - 1 :]) if text else None
    if m is None or len(m.group(0)) > max_chars:
        return len(text)
    return len(text) - len(m.group(0))


class Vocab:
    """Each token's text decoded alone, sorted for prefix search."""

    def __init__(self, tokenizer) -> None:
        n = len(tokenizer)
        texts = tokenizer.batch_decode([[i] for i in range(n)], clean_up_tokenization_spaces=False)
        special = set(getattr(tokenizer, "all_special_ids", []) or [])
        self.by_text: dict[str, list[int]] = {}
        for i, s in enumerate(texts):
            if s and "\ufffd" not in s and i not in special:
                self.by_text.setdefault(s, []).append(i)
        self.sorted = sorted(self.by_text)

    def starting_with(self, rest: str) -> list[int]:
        lo = bisect.bisect_left(self.sorted, rest)
        hi = bisect.bisect_left(self.sorted, rest + "\U0010ffff")
        return sorted(i for s in self.sorted[lo:hi] for i in self.by_text[s])

    def prefixes(self, rest: str) -> list[tuple[int, int]]:
        """(token, length) of every token whose text is a strict, non-empty prefix of ``rest``."""
        return [(i, j) for j in range(1, len(rest)) for i in self.by_text.get(rest[:j], [])]


_VOCABS: dict[int, tuple[object, Vocab]] = {}


def vocab_of(tokenizer) -> Vocab:
    got = _VOCABS.get(id(tokenizer))
    if got is None or got[0] is not tokenizer:
        got = _VOCABS[id(tokenizer)] = (tokenizer, Vocab(tokenizer))
    return got[1]


@dataclass(frozen=True, eq=False)
class Trie:
    """Nodes 0..n-1 (topological); ``rest[0]`` is the whole heal text (the root), ``rest[i+1]``
    what node i leaves to spell; ``finish[i]`` the tokens that complete it (0 = the root)."""

    tokens: list[int]
    parents: list[int]
    rest: list[str]
    finish: list[list[int]]

    @property
    def draft(self) -> Draft:
        return Draft.from_parents(self.tokens, self.parents)

    def children(self, row: int) -> list[int]:
        return self.kids[row]

    @cached_property
    def finish_ids(self) -> list[torch.Tensor]:
        """``finish`` as index tensors (for ``_best``)."""
        return [torch.tensor(f, dtype=torch.long) for f in self.finish]

    @cached_property
    def kids(self) -> list[list[int]]:
        kids: list[list[int]] = [[] for _ in range(len(self.tokens) + 1)]
        for i, p in enumerate(self.parents):
            kids[p + 1].append(i)
        return kids


def plan(vocab: Vocab, heal: str, max_nodes: int = MAX_NODES, max_depth: int = 1 << 30) -> Trie | None:
    tokens: list[int] = []
    parents: list[int] = []
    rest = [heal]
    depth = [0]
    frontier = [0]  # rows (0 = root, i+1 = node i) still to expand, breadth first
    while frontier:
        row = frontier.pop(0)
        if depth[row] + 1 >= max_depth:
            continue
        for tok, j in vocab.prefixes(rest[row]):
            if len(tokens) >= max_nodes:
                return None
            tokens.append(tok)
            parents.append(row - 1)
            rest.append(rest[row][j:])
            depth.append(depth[row] + 1)
            frontier.append(len(tokens))
    finish = [vocab.starting_with(r) for r in rest]
    if not finish[0] and not tokens:
        return None
    return Trie(tokens, parents, rest, finish)


def _best(trie: Trie, logits: torch.Tensor) -> list[tuple[float, int, int]]:
    """Temperature 0: per row, (least deficit to finish, next token, child node or -1).

    The finishing tokens of a row are compared in one tensor operation (a row can have over a
    thousand: every token that starts with a space), with the same float64 arithmetic and the
    same tie rule (least deficit, then lowest token id) as comparing them one by one."""
    top = logits.max(dim=-1).values
    best: list[tuple[float, int, int]] = [(float("inf"), -1, -1)] * (len(trie.tokens) + 1)
    for row in range(len(trie.tokens), -1, -1):
        cands = []
        if trie.finish[row]:
            ids = trie.finish_ids[row]
            d = top[row] - logits[row, ids]
            low = d.min()
            cands.append((float(low), int(ids[d == low].min()), -1))
        for ch in trie.children(row):
            dc = best[ch + 1][0]
            if dc < float("inf"):
                cands.append((float(top[row] - logits[row, trie.tokens[ch]]) + dc, trie.tokens[ch], ch))
        if cands:
            best[row] = min(cands, key=lambda c: (c[0], c[1]))
    return best


def _log_mass(trie: Trie, logp: torch.Tensor) -> list[float]:
    """log c per row: log P(the heal text gets spelled | the tokens up to that row)."""
    out = [float("-inf")] * (len(trie.tokens) + 1)
    for row in range(len(trie.tokens), -1, -1):
        terms = [logp[row, trie.finish[row]]] if trie.finish[row] else []
        kids = trie.children(row)
        if kids:
            toks = torch.tensor([trie.tokens[ch] for ch in kids])
            terms.append(logp[row, toks] + torch.tensor([out[ch + 1] for ch in kids]))
        if terms:
            out[row] = float(torch.logsumexp(torch.cat(terms), dim=0))
    return out


def choose(trie: Trie, logits: torch.Tensor, sampling, generator=None) -> tuple[list[int], int]:
    """(trie nodes of the path, the finishing token): see the module docstring."""
    if not sampling.greedy:
        logp = torch.log(to_probs(logits, sampling.temperature, sampling.top_k, sampling.top_p).double())
        mass = _log_mass(trie, logp)
        if mass[0] > float("-inf"):
            return _sample(trie, logp, mass, generator)
    best = _best(trie, logits.double())
    path, row = [], 0
    while True:
        _, tok, ch = best[row]
        if ch < 0:
            return path, tok
        path.append(ch)
        row = ch + 1


def _sample(trie: Trie, logp: torch.Tensor, mass: list[float], generator) -> tuple[list[int], int]:
    path, row = [], 0
    while True:
        kids = trie.children(row)
        opts = [(x, -1) for x in trie.finish[row]] + [(trie.tokens[ch], ch) for ch in kids]
        w = torch.tensor([float(logp[row, x]) + (mass[ch + 1] if ch >= 0 else 0.0) for x, ch in opts])
        w = torch.exp(w - w.max())
        x, ch = opts[int(torch.multinomial(w, 1, generator=generator))]
        if ch < 0:
            return path, x
        path.append(ch)
        row = ch + 1


def fit(engine, ids: list[int], heal: str) -> tuple[list[int], Trie]:
    """The prompt and trie to heal with: while the trie of ``heal`` has more than ``MAX_NODES``
    nodes (a long word), its first characters move into the prompt (still exact: the condition is
    then the shorter text, given a prompt that holds the rest)."""
    vocab = vocab_of(engine.tokenizer)
    for j in range(len(heal)):
        head = engine.tokenizer.encode(heal[:j], add_special_tokens=False) if j else []
        room = engine.context - len(ids) - len(head)
        trie = plan(vocab, heal[j:], max_depth=room)
        if trie is not None and room > len(heal) - j:
            return ids + head, trie
    raise ConfigError(f"cannot heal {heal!r}: no token sequence spells it in the room left")


def finish(
    run, trie: Trie, logits: torch.Tensor, commit, eos_ids: set[int], score_ms: float, event=StepEvent, **extra
) -> StepEvent:
    """The healing step after its one target forward over ``trie`` (the request's first step, in
    the single-request loop and in a batch row alike): a path and its finishing token drawn by
    ``choose``, committed by ``commit(path)``; ``run`` (``specdec.core.step.Run``'s attributes)
    takes the new tokens."""
    t0 = time.perf_counter()
    heal = trie.rest[0]
    path, last = choose(trie, logits, run.spec.sampling, run.gen)
    commit(tuple(path))
    new = [trie.tokens[i] for i in path] + [last]
    text = "".join(run.detok.push(x) for x in new)
    if not text.startswith(heal):
        raise RuntimeError(f"healing spelled {text!r}, not {heal!r}")  # a tokenizer that does not round-trip
    pieces = [Piece(x, "", "plain", 1, 0) for x in new[:-1]] + [Piece(last, text[len(heal) :], "plain", 1, 0)]
    run.tokens.extend(new)
    run.produced += len(new)
    run.stats.record([], [], [], len(new))
    t1 = time.perf_counter()
    run.stats.elapsed_s = t1 - run.t_start
    stop = "eos" if last in eos_ids else ("length" if len(new) >= run.spec.max_new_tokens else None)
    timings = {"propose": 0.0, "score": score_ms, "verify": 1000 * (t1 - t0)}
    return event(run.step, tuple(pieces), run.stats.snapshot(), timings, 0, stop, **extra)
