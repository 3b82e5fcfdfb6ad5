"""Layout of the browser demo (Gradio): Generate, Chat, Step through, Race and Teach views over one
shared engine, and what the page says about the model it runs (specdec/demo/model_info.py).

Contract: ``build_demo(backend) -> gr.Blocks`` builds the page and wires the handlers; it loads
nothing (the caller passes an ``specdec.serving.backend.Backend``, e.g. ``LocalBackend(engine)``).
``launch_demo(backend, host, port, **kw)`` queues and launches it. Per-user state lives in
``gr.State(DemoSession())``; every event that decodes (Generate, Race and the ``/generate`` API)
queues in the backend, not in gradio (``GENERATE``: many may wait there, and a batching backend
can decode them together); races take turns in gradio's concurrency group "race" (limit 1).
The intro, About the models, the sidebar's note on missing methods, the Chat tab and the Teach
view's concurrency chart follow the loaded model: what was measured on the shipped tiny model is
shown only when it runs (issue 32, item 11).
Run and Race first clear the session's stop event unqueued (``Handlers.arm``), then start;
Stop is unqueued and only sets it, so it reaches a run in every state (in gradio's queue, in the
backend's queue, prefilling, decoding): the run cancels its request, which the backend ends
between steps, or before it starts.
"""

from __future__ import annotations

import gradio as gr

from specdec.core.config import K_MAX
from specdec.core.methods import METHODS, preferred
from specdec.demo import charts as C
from specdec.demo import docs as D
from specdec.demo import mode as M
from specdec.demo import model_info as MI
from specdec.demo import page as PAGE
from specdec.demo import race as RC
from specdec.demo import render as R
from specdec.demo import stats as S
from specdec.demo import stream as ST
from specdec.demo.about import about_panel
from specdec.demo.backend import backend_note
from specdec.demo.chat_tab import chat_tab
from specdec.demo.concurrency import concurrency_html
from specdec.demo.examples import example_prompts
from specdec.demo.handlers import Handlers
from specdec.demo.runs import DemoSession
from specdec.demo.step_tab import step_tab
from specdec.demo.teach import PROOF_MD

INTRO = """## specdec: exact speculative decoding, live
A **draft** (or the context itself) proposes tokens; the **target** checks them all in one forward pass; rejection
sampling keeps the output distributed exactly as the target's. Every token arrives with its fate from the engine:
click or tap a token (or Tab to it and press Enter) for its step, draft position, p and q."""
GENERATE = {"concurrency_limit": 32, "concurrency_id": "generate"}  # waits in the backend's queue
RACE = {"concurrency_limit": 1, "concurrency_id": "race"}
C_MAX = 3.0  # Teach's c slider: a measured c above 1 (a costly draft beside a 4-bit target) fits
LATEX = [{"left": "$$", "right": "$$", "display": True}, {"left": "$", "right": "$", "display": False}]


def _settings(backend, info: MI.Loaded) -> dict[str, gr.components.Component]:
    methods = list(backend.methods)
    method = gr.Dropdown(
        [(f"{m}: {METHODS[m].description}", m) for m in methods],
        label="method",
        elem_id="sd-method",
        value=preferred(methods, MI.SHOW_ORDER),
    )
    missing = MI.unavailable_md(info)
    if missing:
        gr.Markdown(missing, elem_id="sd-missing-methods")
    mode, k = M.mode_controls("sd")
    seed = gr.Number(value=0, precision=0, label="seed", min_width=80, elem_id="sd-seed")
    temperature = gr.Slider(0.0, 2.0, value=0.0, step=0.05, label="temperature (0 = greedy)", elem_id="sd-temperature")
    top_p = gr.Slider(0.05, 1.0, value=1.0, step=0.05, label="top-p (1 = off)")
    max_new = gr.Slider(1, backend.limits.context, value=96, step=1, label="max new tokens", elem_id="sd-max-new")
    return {
        "method": method,
        "mode": mode,
        "k": k,
        "temperature": temperature,
        "top_p": top_p,
        "max_new": max_new,
        "seed": seed,
    }


def _generate_tab(h: Handlers, prompt, s: dict, session) -> None:
    with gr.Row():
        run = gr.Button("Run", variant="primary", elem_id="sd-run")
        stop = gr.Button("Stop", variant="stop", elem_id="sd-stop")
    gr.HTML(R.legend_html())
    with gr.Row(equal_height=False):  # side by side on a projector, stacked on a phone
        with gr.Column(scale=3, min_width=320):
            tokens = ST.stream_box(ST.stream_value(R.Transcript(), "", "idle"), "sd-tokens")
        with gr.Column(scale=2, min_width=280):
            stats = gr.HTML(R.stats_html(None) + S.position_counts(None), elem_id="sd-stats", js_on_load=None)
    charts = gr.HTML(C.charts_html(R.Transcript()), elem_id="sd-charts")  # inline SVG: cheap to redraw
    inputs = [prompt, s["method"], s["k"], s["temperature"], s["top_p"], s["max_new"], s["seed"], session, s["as_chat"]]
    run.click(h.arm, [session], None, queue=False, api_visibility="private").then(
        h.generate,
        inputs,
        [tokens, stats, charts],
        api_name="ui_generate",
        api_visibility="private",
        show_progress="minimal",
        **GENERATE,
    )
    stop.click(h.stop, [session], None, queue=False, api_visibility="private")


def _race_tab(h: Handlers, prompt, s: dict, session) -> None:
    gr.Markdown(
        "The baseline (`none`) and the chosen method on the same prompt, seed and settings, one after the "
        "other, repeated with the sides alternating which runs first; both stream live. Speedup = tokens/s "
        "of the method / tokens/s of the baseline, paired run by run: the median and the spread are shown, "
        "and a warning when the spread contains 1x (some runs faster, some not). The machine may be shared."
    )
    with gr.Row():
        repeats = gr.Slider(
            1, RC.MAX_REPEATS, value=RC.DEFAULT_REPEATS, step=1, label="repeats (paired runs, sides alternate)", scale=3
        )
        go = gr.Button("Race", variant="primary", elem_id="sd-race", scale=1)
        stop = gr.Button("Stop", variant="stop", scale=1)
    verdict = gr.Markdown(elem_id="sd-race-verdict")
    with gr.Row(equal_height=False):
        left = ST.stream_box(ST.stream_value(R.Transcript(), "", "idle", "<h4>baseline (none)</h4>"), "sd-race-left")
        right = ST.stream_box(ST.stream_value(R.Transcript(), "", "idle", "<h4>method</h4>"), "sd-race-right")
    inputs = [prompt, s["method"], s["k"], s["temperature"], s["top_p"], s["max_new"], s["seed"], repeats, session]
    go.click(h.arm, [session], None, queue=False, api_visibility="private").then(
        h.race,
        inputs,
        [left, right, verdict],
        api_name="ui_race",
        api_visibility="private",
        show_progress="minimal",
        **RACE,
    )
    stop.click(h.stop, [session], None, queue=False, api_visibility="private")


def _concurrency(info: MI.Loaded) -> None:
    """The measured chart is the shipped tiny models'; on another model the page says so instead."""
    if info.tiny:
        gr.HTML(concurrency_html(), elem_id="sd-concurrency")
        return
    gr.Markdown(
        f"The measured chart (docs/batching.md) is of the shipped tiny models, not of {info.title}: see it with "
        f"`specdec demo --model tiny`, or measure this model with `specdec bench --concurrency 1,2,4,8 "
        f"--model {info.name}`.",
        elem_id="sd-concurrency",
    )


def _teach_tab(h: Handlers, session, info: MI.Loaded) -> tuple:
    gr.Markdown(
        "### (a) How fast can it be?  E[tokens per step] = (1 - alpha^(k+1)) / (1 - alpha);  "
        "speedup = (1 - alpha^(k+1)) / ((1 - alpha)(k c + 1))\n"
        "alpha = accepted / tested (the probability a tested draft token is accepted; not the Generate "
        "view's acceptance rate, accepted / drafted); k: draft tokens per step; "
        "c: cost of a draft forward / a target forward (above 1 speculation cannot pay; the Race measures it). "
        "Your Generate runs appear as orange points (tau), your races as red diamonds (speedup)."
    )
    with gr.Row():
        a = gr.Slider(0.0, 0.99, value=0.7, step=0.01, label="alpha = accepted / tested")
        k = gr.Slider(1, K_MAX, value=4, step=1, label="k")
        c = gr.Slider(0.0, C_MAX, value=0.1, step=0.01, label="c (cost ratio)")
    figure = gr.Plot(elem_id="sd-theory-plot")
    numbers = gr.Markdown()
    for slider in (a, k, c):
        slider.change(h.theory, [a, k, c, session], [figure, numbers], api_visibility="private", show_progress="hidden")
    gr.Markdown("### (b) Rejection sampling is exact: a Monte Carlo check through the real verifier")
    with gr.Row():
        with gr.Column(scale=2):
            p_text = gr.Textbox("5, 3, 1, 1, 0", label="target p (weights, one per token)")
            q_text = gr.Textbox("1, 1, 3, 3, 2", label="draft q (weights, same vocabulary)")
            with gr.Row():
                n = gr.Slider(100, 30000, value=10000, step=100, label="draws", min_width=240)  # room for "30000"
                seed = gr.Number(0, precision=0, label="seed", min_width=100)
            draw = gr.Button("Draw through the verifier", variant="primary", elem_id="sd-mc")
            gr.Markdown(PROOF_MD)
        with gr.Column(scale=3):
            mc_plot = gr.Plot(elem_id="sd-mc-plot")
            mc_numbers = gr.Markdown()
    gr.Markdown("### (c) Many users at once: where speculation stops paying (measured, `specdec bench --concurrency`)")
    _concurrency(info)
    with gr.Accordion("The proof, in full (docs/theory-lossless.md)", open=False, elem_id="sd-proof"):
        gr.Markdown(D.read_doc("theory-lossless.md"), latex_delimiters=LATEX)
    with gr.Accordion("Every theory page (docs/theory.md)", open=False, elem_id="sd-theory-index"):
        gr.Markdown(D.read_doc("theory.md"), latex_delimiters=LATEX)
    draw.click(
        h.monte_carlo,
        [p_text, q_text, n, seed],
        [mc_plot, mc_numbers],
        api_visibility="private",
        concurrency_limit=2,
        concurrency_id="teach",
    )
    return (a, k, c, figure, numbers)


def build_demo(backend) -> gr.Blocks:
    h = Handlers(backend)
    info = MI.loaded(backend)
    with gr.Blocks(title="specdec demo") as demo:
        session = gr.State(DemoSession())
        with gr.Sidebar(label="prompt and settings", open=True, width=400, elem_id="sd-sidebar"):
            examples = example_prompts(info)
            prompt = gr.Textbox(label="prompt", lines=6, max_lines=14, value=examples[0][1], elem_id="sd-prompt")
            as_chat = gr.Checkbox(
                examples[0][2],
                label="send as a chat message (the model's chat template: a question needs it)",
                visible=info.chat,
                elem_id="sd-as-chat",
            )
            settings = _settings(backend, info)
            settings["as_chat"] = as_chat
            gr.Examples(
                [[p, chat] for _, p, chat in examples],
                inputs=[prompt, as_chat],
                example_labels=[name for name, _, _ in examples],
                examples_per_page=6,
                label="example prompts (chat and prose first, then the shipped code set)"
                if info.chat
                else "example prompts (the shipped code set)",
            )
        gr.Markdown(f"{INTRO}\n{MI.intro_line(info)}", elem_id="sd-intro")
        gr.Markdown(backend_note(backend), elem_id="sd-backend")
        about_panel(info)
        with gr.Tabs():
            with gr.Tab("Generate", id="generate"):
                _generate_tab(h, prompt, settings, session)
            with gr.Tab("Step through", id="step"):
                step_tab(backend, prompt, settings, session, GENERATE)
            with gr.Tab("Race", id="race"):
                _race_tab(h, prompt, settings, session)
            with gr.Tab("Teach", id="teach") as teach:
                a, k, c, figure, numbers = _teach_tab(h, session, info)
            with gr.Tab("Chat", id="chat"):  # last: on a phone the first four stay in the tab bar
                chat_tab(backend, info, settings, session, GENERATE)
        teach.select(h.theory, [a, k, c, session], [figure, numbers], api_visibility="private")
        demo.load(h.theory, [a, k, c, session], [figure, numbers], api_visibility="private")
        gr.api(h.api_generate, api_name="generate", **GENERATE)
    return demo


def launch_demo(backend, host: str = "127.0.0.1", port: int | None = 7860, **kwargs):
    """Queue and launch; returns what ``Blocks.launch`` returns (app, local url, share url)."""
    demo = build_demo(backend)
    demo.queue(default_concurrency_limit=1, max_size=64)
    kwargs.setdefault("ssr_mode", False)
    block = not kwargs.pop("prevent_thread_lock", False)
    kwargs.setdefault("css", PAGE.CSS)
    kwargs.setdefault("head", PAGE.HEAD)
    out = demo.launch(server_name=host, server_port=port, prevent_thread_lock=True, **kwargs)
    D.mount(demo.app)  # the docs the Teach view links to
    if block:
        demo.block_thread()
    return demo, out
