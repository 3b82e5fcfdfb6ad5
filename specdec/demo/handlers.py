"""Event handlers of the demo: thin functions from widget values to rendered outputs.

Contract: ``Handlers(backend)`` holds the one process-wide ``specdec.serving.backend.Backend`` and nothing
per user; every per-user value arrives as an argument (the session's ``DemoSession`` from
``gr.State``). Each run is one request to the backend (``demo_runs.Run``: cancelled on Stop or
when gradio closes the handler). ``generate(..., as_chat=True)`` sends the prompt as one user
message through the model's chat template (the Chat tab's rendering); a plain-text run on a chat
model that ends at once says to do that. Bad settings
raise ``gr.Error`` with the engine's ConfigError message, so the page shows it and the server
keeps serving. ``api_generate`` is the ``/generate`` endpoint: it streams ``api_payload`` dicts.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import gradio as gr

from specdec.core.config import ConfigError, GenerateSpec, SamplingParams
from specdec.demo import charts as C
from specdec.demo import mode as M
from specdec.demo import race as RC
from specdec.demo import render as R
from specdec.demo import speed as SP
from specdec.demo import stats as S
from specdec.demo import stream as ST
from specdec.demo import teach as T
from specdec.demo.runs import DemoSession, Run, RunRecord, check_prompt, make_spec, run_to_end
from specdec.demo.wording import c_sentence, plural
from specdec.engine.chat import ChatError, has_template, render
from specdec.serving.backend import Busy

RENDER_INTERVAL_S = 0.25  # at most 4 page updates a second: a 512-token run keeps the page responsive


log = logging.getLogger("specdec.demo")


def page_error(e: Exception) -> gr.Error:
    """The page's (or API's) error for bad input or a full queue: one warning line in the server log,
    no traceback (gradio prints one for every error unless told not to)."""
    log.warning("refused: %s", e)
    title = "Busy" if isinstance(e, Busy) else "Invalid setting"
    return gr.Error(str(e), title=title, print_exception=False)


_page_error = page_error


class Handlers:
    def __init__(self, backend) -> None:
        self.backend = backend
        self.eos = R.end_ids(backend)  # drawn as a visible end mark in every stream
        self.tokenizer = getattr(getattr(backend, "engine", None), "tokenizer", None)  # its chat template

    # -- Generate ------------------------------------------------------------------------------
    def _views(self, t: R.Transcript, status: str, spec: GenerateSpec, run: str, before=()) -> tuple:
        """The Generate view's outputs: the stream (appended to in the page, specdec/demo/stream.py), the
        live numbers (the steady tokens/s, what the mode cost, specdec/demo/mode.py, and where the time
        goes, specdec/demo/speed.py), and the
        charts (small inline SVG, specdec/demo/charts.py). ``before``: this session's earlier splits."""
        note = S.method_note(spec.method, spec.k, spec.confidence, t) + S.position_counts(t.stats)
        rate, split = SP.steady_rate(t), SP.split(t, SP.label(spec.method, spec.k))
        whole = R.num(t.stats and t.stats.tokens_per_s, ".1f")
        spread = f"({rate.low:.1f}-{rate.high:.1f}); whole run {whole}" if rate else ""
        speed = SP.speed_html(split, list(before))
        cards = R.stats_html(t.stats, f"{rate.median:.1f}" if rate else None, spread)
        cost = M.cost_html(spec.method, spec.k, t, list(before))
        return ST.stream_value(t, status, run), cards + cost + speed + note, C.charts_html(t)

    def generate(
        self,
        prompt: str,
        method: str,
        k: Any,
        temperature: float,
        top_p: float,
        max_new_tokens: Any,
        seed: Any,
        session: DemoSession,
        as_chat: bool = False,
    ) -> Iterator[tuple]:
        try:
            spec = make_spec(self.backend, method, k, temperature, top_p, max_new_tokens, seed)
            prompt = check_prompt(prompt)
            if as_chat:  # a question: the model's chat template, the reply's turn open (as the Chat tab)
                prompt = render(self.tokenizer, [{"role": "user", "content": prompt}])
        except (ConfigError, ChatError) as e:
            raise _page_error(e) from None
        t, name = R.Transcript(prompt=prompt, greedy=spec.sampling.greedy, eos_ids=self.eos), ST.new_run()
        before = [r.split for r in session.runs if r.split is not None]
        yield self._views(t, f"running {method} ...", spec, name, before)
        run = Run(self.backend, prompt, spec, session.stop, min_interval_s=RENDER_INTERVAL_S, heal=not as_chat)
        try:
            for batch in run.batches():
                t.extend(batch)
                if t.steps:
                    yield self._views(t, f"running {method}: step {t.steps[-1].step}", spec, name, before)
                else:  # the backend holds it until the request before it ends; Stop still acts
                    queued = f"{method}: waiting in the engine's queue (another request is decoding)"
                    yield self._views(t, queued, spec, name, before)
        except (ConfigError, Busy) as e:
            raise _page_error(e) from None
        s = t.stats
        session.runs.append(
            RunRecord(
                method,
                str(spec.k),
                s.alpha_tested if s else None,  # accepted / tested: the i.i.d. curves' alpha
                s.tau if s else None,
                s.tokens_per_s if s else None,
                c=R.cost_ratio(t),
                split=SP.split(t, SP.label(method, spec.k)),
            )
        )
        end = "stopped by you" if run.stopped_early else f"done ({t.stop})"
        healed = f"; healed: the model's first token spells the prompt's last {run.healed!r}" if run.healed else ""
        hint = self._ended_at_once(t, as_chat)
        status = f"{method}: {end}; {plural(len(t.token_ids), 'token')}{healed}{hint}"
        yield self._views(t, status, spec, name, before)

    def _ended_at_once(self, t: R.Transcript, as_chat: bool) -> str:
        """A question typed as plain text into a chat model ends at once (its first token is the end
        of text): say what to do instead."""
        if as_chat or t.stop != "eos" or len(t.token_ids) > 3 or not (self.tokenizer and has_template(self.tokenizer)):
            return ""
        return (
            ". The model ended at once: a question to a chat model needs its chat template. Tick "
            "'send as a chat message' in the sidebar, or ask it in the Chat tab"
        )

    def stop(self, session: DemoSession) -> None:
        session.stop.set()

    def arm(self, session: DemoSession) -> None:
        """Clear the session's Stop, unqueued, the moment Run (or Race) is clicked: a Stop pressed
        after this reaches the run in every state, waiting in gradio's queue, in the engine's queue,
        prefilling or decoding (the run itself never clears it)."""
        session.stop.clear()

    def api_generate(
        self,
        prompt: str,
        method: str = "draft",
        k: int | str = "auto",
        temperature: float = 0.0,
        max_new_tokens: int = 64,
        seed: int | None = None,
        top_p: float = 1.0,
    ) -> Iterator[dict[str, Any]]:
        """Stream one generation. Every update is {"pieces": [{"text", "kind", "token_id", "step",
        "position", "p", "q"}], "text", "tokens", "stats", "step", "stop", "done"} with all pieces so
        far; the last one has done = true."""
        try:
            spec = make_spec(self.backend, method, k, temperature, top_p, max_new_tokens, seed, page=False)
            prompt = check_prompt(prompt)
        except (ConfigError, TypeError) as e:
            raise page_error(e) from None
        t = R.Transcript(prompt=prompt, eos_ids=self.eos)
        try:
            for batch in Run(self.backend, prompt, spec, heal=True).batches():
                t.extend(batch)
                yield R.api_payload(t, done=False)
        except (ConfigError, Busy) as e:
            raise page_error(e) from None
        yield R.api_payload(t, done=True)

    # -- Race ----------------------------------------------------------------------------------
    def race(
        self,
        prompt: str,
        method: str,
        k: Any,
        temperature: float,
        top_p: float,
        max_new_tokens: Any,
        seed: Any,
        repeats: Any,
        session: DemoSession,
    ) -> Iterator[tuple[str, str, str]]:
        """Both sides streamed live; see specdec/demo/race.py for the plan and the statistics."""
        try:
            RC.check_race(method)
            spec = make_spec(self.backend, method, k, temperature, top_p, max_new_tokens, seed)
            prompt = check_prompt(prompt)
        except ConfigError as e:
            raise _page_error(e) from None
        base = GenerateSpec(
            method="none",
            max_new_tokens=spec.max_new_tokens,
            sampling=SamplingParams(temperature, top_p=top_p, seed=spec.sampling.seed),
        )
        label = f"{method}, k={spec.k}"
        tps: dict[str, list[float]] = {"base": [], "method": []}
        greedy = spec.sampling.greedy
        live = {side: R.Transcript(prompt=prompt, greedy=greedy, eos_ids=self.eos) for side in ("base", "method")}
        names = {"base": ST.new_run(), "method": ST.new_run()}  # a new stream per run of a side
        done: dict[str, R.Transcript] = {}
        repeats = max(1, min(RC.MAX_REPEATS, int(repeats or RC.DEFAULT_REPEATS)))
        yield (*self._race_cols(live, names, tps, label), "warming up ...")
        for sp in (base, spec):  # untimed: first calls pay for allocations the timed runs should not
            run_to_end(self.backend, prompt, replace(sp, max_new_tokens=min(8, sp.max_new_tokens)), session.stop)
        cut = None  # the side whose run Stop cut short
        for r, side in RC.race_plan(repeats):
            if session.stop.is_set():
                break
            t = live[side] = R.Transcript(prompt=prompt, greedy=greedy, eos_ids=self.eos)
            names[side] = ST.new_run()
            run = Run(
                self.backend, prompt, base if side == "base" else spec, session.stop, min_interval_s=0.1, heal=True
            )
            note = f"run {r + 1}/{repeats}: {'none' if side == 'base' else label} ..."
            try:
                for batch in run.batches():
                    t.extend(batch)
                    yield (*self._race_cols(live, names, tps, label), note)
            except (ConfigError, Busy) as e:
                raise _page_error(e) from None
            if run.stopped_early or t.stats is None or not t.stats.tokens_per_s:
                cut = side if t.steps else None
                break
            tps[side].append(t.stats.tokens_per_s)
            done[side] = t
        stopped = session.stop.is_set()
        cols = self._race_cols(live, names, tps, label, stopped, cut)
        ups = RC.speedups(tps["base"], tps["method"])
        if not ups:
            yield (*cols, "stopped by you: no paired run finished, so no speedup")
            return
        head = f"Stopped by you after {plural(len(ups), 'paired run')}. " if stopped else ""
        yield (*cols, head + self._race_summary(done, tps, ups, spec, session))

    def _race_cols(self, live, names, tps, label: str, stopped: bool = False, cut: str | None = None):
        """The two sides' stream values (specdec/demo/stream.py), the side's title and timing as head;
        after Stop each side says so, with what it measured (race.side_speed)."""
        cols = []
        for side, name in (("base", "baseline (none)"), ("method", label)):
            t, runs = live[side], tps[side]
            partial = t.stats if side == cut else None
            speed = RC.side_speed(runs, stopped, partial and partial.emitted, partial and partial.tokens_per_s)
            st = t.stats
            tau, alpha = R.num(st and st.tau, ".2f"), R.num(st and st.alpha, ".2f")
            meta = (
                f'<div class="sd-race-meta" data-runs="{len(runs)}" data-stopped="{str(stopped).lower()}">{speed} · '
                f"tau {tau} · acceptance rate (accepted / drafted) {alpha}</div>"
            )
            cols.append(ST.stream_value(t, "", names[side], head=f"<h4>{name}</h4>{meta}"))
        return cols[0], cols[1]

    def _race_summary(self, done, tps, ups: list[float], spec: GenerateSpec, session: DemoSession) -> str:
        sm = RC.summary(ups)
        b, m = done["base"], done["method"]
        same, sentence = RC.race_verdict(b.token_ids, m.token_ids, spec.sampling.temperature)
        s = m.stats
        c = R.cost_ratio(m)
        session.runs.append(
            RunRecord(spec.method, str(spec.k), s.alpha_tested, s.tau, statistics.median(tps["method"]), sm.median, c)
        )
        c_txt = f" {c_sentence(c)}" if c is not None else ""
        why = SP.above_tau_note(sm.median, SP.split(b, "none"), SP.split(m, SP.label(spec.method, spec.k)))
        return (
            f"{sm.sentence()} Tokens/s on the engine's clock (prefill and steps, not the page), sides "
            f"alternating which runs first.{c_txt} {sentence}" + (f"\n\n{why}" if why else "")
        )

    # -- Teach ---------------------------------------------------------------------------------
    def theory(self, alpha: float, k: Any, c: float, session: DemoSession):
        k = int(k)
        return T.theory_figure(alpha, k, c, session.runs), T.theory_text(alpha, k, c)

    def monte_carlo(self, p_text: str, q_text: str, n: Any, seed: Any):
        try:
            p = T.parse_weights(p_text, "p")
            q = T.parse_weights(q_text, "q")
            n = int(n)
            if not 10 <= n <= 100_000:
                raise ConfigError(f"draws must be in [10, 100000], got {n}")
            states = T.monte_carlo(p, q, n, int(seed or 0))
            for state in states:
                yield T.mc_figure(state, p, q), T.mc_text(state, p, q)
        except ConfigError as e:
            raise _page_error(e) from None
