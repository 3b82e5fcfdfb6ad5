"""The Step-through tab: its layout and handlers (Start, Next, Play at a pace, Pause, Run to end).

Contract: ``step_tab(backend, prompt, settings, session)`` builds the tab inside the caller's
``gr.Tab``. Start decodes one request with the verifier's record (``demo_step.record_spec``)
through the backend, as a Run (so Stop ends it), keeps the events in the session's ``Walk`` and
shows step 1; Next shows one more step; Play advances one step per tick of a ``gr.Timer`` at the
chosen pace until the end (Pause stops it); Run to end shows the last step. Bad settings are a
``gr.Error`` with the engine's message.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from specdec.core.config import ConfigError
from specdec.demo import mode as M
from specdec.demo import render as R
from specdec.demo import step as ST
from specdec.demo.handlers import page_error
from specdec.demo.runs import DemoSession, Run, check_prompt, make_spec
from specdec.serving.backend import Busy


class StepHandlers:
    def __init__(self, backend) -> None:
        self.backend = backend

    def _views(self, session: DemoSession, note: str = "") -> tuple[str, str]:
        walk = session.walk or ST.Walk()
        prompt = getattr(session, "walk_prompt", "")
        spec = getattr(session, "walk_spec", None)
        if spec is not None and walk.current is not None:  # what this run's mode cost (specdec/demo/mode.py)
            note += M.cost_html(spec.method, spec.k, R.Transcript().extend(walk.events))
        return ST.walk_html(walk, prompt) + note, ST.panel_html(walk.current, walk.greedy)

    def start(self, prompt, method, k, temperature, top_p, max_new_tokens, seed, session: DemoSession):
        try:
            spec = ST.record_spec(make_spec(self.backend, method, k, temperature, top_p, max_new_tokens, seed))
            prompt = check_prompt(prompt)
        except ConfigError as e:
            raise page_error(e) from None
        session.walk, session.walk_prompt = (
            ST.Walk(greedy=spec.sampling.greedy, eos_ids=R.end_ids(self.backend)),
            prompt,
        )
        session.walk_spec = spec
        yield self._views(session, "<p>decoding with the verifier's record ...</p>")
        try:
            for batch in Run(self.backend, prompt, spec, session.stop).batches():
                session.walk.events.extend(batch)
        except (ConfigError, Busy) as e:
            raise page_error(e) from None
        session.walk.next()
        yield self._views(session)

    def arm_stop(self, session: DemoSession) -> None:
        session.stop.clear()

    def next(self, session: DemoSession):
        if session.walk is not None:
            session.walk.next()
        return self._views(session)

    def to_end(self, session: DemoSession):
        if session.walk is not None:
            session.walk.to_end()
        return self._views(session)

    def tick(self, session: DemoSession):
        walk = session.walk
        if walk is None or walk.done:
            return (*self._views(session), gr.Timer(active=False))
        walk.next()
        return (*self._views(session), gr.Timer(active=not walk.done))


def step_tab(backend, prompt, s: dict[str, Any], session, run_group: dict[str, Any]) -> None:
    h = StepHandlers(backend)
    gr.Markdown(
        "One verification step at a time. For the current step the panel shows **every drafted token** "
        "(tested or not), p(x) and q(x), the acceptance probability min(1, p/q), the uniform u the "
        "verifier drew, the verdict, and after a rejection the residual norm(max(p - q, 0)) it sampled "
        "from. These are the engine's own numbers from the step event, not a recomputation. "
        "Try temperature 0.8 with the draft model to see draws and residuals; the sidebar's mode "
        "**show me** drafts k tokens on every step (fastest lets auto k skip steps where drafting does not pay)."
    )
    with gr.Row():
        start = gr.Button("Start", variant="primary", elem_id="sd-step-start", scale=1)
        nxt = gr.Button("Next step", elem_id="sd-step-next", scale=1)
        play = gr.Button("Play", elem_id="sd-step-play", scale=1)
        pause = gr.Button("Pause", elem_id="sd-step-pause", scale=1)
        end = gr.Button("Run to end", elem_id="sd-step-end", scale=1)
        pace = gr.Slider(0.2, 3.0, value=1.0, step=0.1, label="pace (seconds per step)", scale=2)
    timer = gr.Timer(1.0, active=False)
    with gr.Row(equal_height=False):
        stream = gr.HTML(ST.walk_html(ST.Walk(), ""), elem_id="sd-step-stream")
        panel = gr.HTML(ST.panel_html(None), elem_id="sd-step-panel")
    inputs = [prompt, s["method"], s["k"], s["temperature"], s["top_p"], s["max_new"], s["seed"], session]
    start.click(h.arm_stop, [session], None, queue=False, api_visibility="private").then(
        h.start, inputs, [stream, panel], api_visibility="private", show_progress="minimal", **run_group
    )
    nxt.click(h.next, [session], [stream, panel], api_visibility="private", show_progress="hidden")
    end.click(h.to_end, [session], [stream, panel], api_visibility="private", show_progress="hidden")
    play.click(lambda sec: gr.Timer(sec, active=True), [pace], [timer], api_visibility="private")
    pause.click(lambda: gr.Timer(active=False), None, [timer], api_visibility="private")
    timer.tick(h.tick, [session], [stream, panel, timer], api_visibility="private", show_progress="hidden")
