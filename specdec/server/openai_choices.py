"""One choice of an OpenAI reply: a request's engine events, cut at its stop strings, as parts.

Contract: ``ChoiceRun(index, handle, options, cancel)`` reads one backend handle (one of ``n``
samples); ``parts()`` yields one ``Part`` per engine step: the text released by the stop cut
(``openai_options.StopCut``), the tokens that text starts (each with its piece text, offset in the
choice and log-probabilities), the step's event for the ``specdec`` extension, and the
``finish_reason`` on the part that ends the choice. A stop string ends it with ``stop`` and cancels
the request (``cancel(handle)``); a token is reported once its text is released; at a stop string
the tokens through the one that completes it are reported (``token_ids``, ``logprobs`` and the
usage count them, as vLLM does) and later ones dropped, while the text ends before it.
A request the engine did not end itself (a cancel, a shutdown, an engine failure) ends with
``abort``, as vLLM reports an aborted request, in a closing part with no event (and the text the
cut still held). ``events``
reads a handle, an engine failure ending the iteration (read ``handle.error``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from specdec.core.events import StepEvent
from specdec.server.openai_options import Options, StopCut

FINISH = {"eos": "stop", "length": "length", "context": "length"}  # else "abort" (cancelled, shutdown, error)


def finish_reason(stop: str | None) -> str | None:
    return None if stop is None else FINISH.get(stop, "abort")


@dataclass(frozen=True)
class Token:
    id: int
    text: str
    offset: int  # where its text starts in the choice's text
    logp: float | None
    top: tuple[tuple[int, str, float], ...] = ()  # (token id, text, log-probability), most likely first


@dataclass
class Part:
    text: str
    tokens: list[Token]
    event: StepEvent | None
    finish: str | None = None


@dataclass
class ChoiceRun:
    index: int
    handle: object
    options: Options
    cancel: Callable[[object], None]
    decode: Callable[[int], str] = str
    offset: int = 0  # the echoed prompt's length: offsets count from the start of the choice's text
    stats: object = None
    finish: str | None = None
    text: list[str] = field(default_factory=list)
    tokens: list[Token] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.cut = StopCut(self.options.stop)
        self._pending: list[Token] = []
        self._at = 0

    def parts(self) -> Iterator[Part]:
        for ev in events(self.handle):  # read to the handle's end: the engine is free when it ends
            if self.finish is not None:
                continue  # a step computed before a stop string's cancel landed: not part of the choice
            self.stats = ev.stats
            self._take(ev)
            text, hit = self.cut.feed(ev.text)
            if hit:
                self.cancel(self.handle)
                self.finish = "stop"
            elif ev.stop is not None:
                text += self.cut.flush()
                self.finish = finish_reason(ev.stop)
            yield self._part(text, ev)
        if self.finish is None:  # no step ended it: a closing part, no event
            self.finish = "abort" if self.handle.error is not None else finish_reason(self.handle.stop) or "abort"
            yield self._part(self.cut.flush(), None)

    def _take(self, ev: StepEvent) -> None:
        tops = getattr(ev, "top_logp", ()) or ()
        for i, pc in enumerate(ev.emitted):
            lp = _finite(ev.logp[i]) if i < len(ev.logp) else None
            top = tuple((t, self.decode(t), _finite(v)) for t, v in tops[i]) if i < len(tops) else ()
            self._pending.append(Token(pc.token_id, pc.text, self.offset + self._at, lp, top))
            self._at += len(pc.text)

    def _part(self, text: str, ev: StepEvent | None) -> Part:
        self.text.append(text)
        whole = not self.cut.hit and self.cut.sent == len(self.cut.text)
        sent = self.offset + (self.cut.end if self.cut.hit else self.cut.sent)
        out = [t for t in self._pending if t.offset < sent or (whole and t.offset == sent)]
        self._pending = [] if self.cut.hit else self._pending[len(out) :]
        self.tokens += out
        return Part(text, out, ev, self.finish)


def _finite(logp: float) -> float:
    """JSON has no -inf: a log-probability below -9999 is -9999.0, as vLLM clamps it."""
    return max(float(logp), -9999.0)


def events(handle):
    """The handle's events; an engine failure ends the iteration (read ``handle.error``)."""
    try:
        yield from handle
    except Exception:  # noqa: BLE001 - recorded on the handle, answered by the caller
        return
