"""The Chat tab: a multi-turn conversation with the loaded model, every reply token coloured by its fate.

Why here and not a new loop: a chat turn is a prompt like any other. The conversation so far goes
through the model's chat template (``specdec.engine.chat.render``, the reply's turn left open) and
that text is one request to the backend, streamed as the Generate view streams, so the fates, the
legend and the inspector are the same.

Contract: ``chat_tab(backend, info, settings, session, run_group)`` builds the tab inside the
caller's ``gr.Tab``. When ``info.chat`` is false (a base model, or a remote backend whose template
is not here) the tab only explains why and what to run (``unavailable_md``). Otherwise: a system
prompt, the conversation (one stream box, specdec/demo/chat_view.py), the message, the method,
the mode and k for this message (specdec/demo/mode.py: "show me" drafts on every step), Send,
Stop and Clear. Temperature, top-p, max new tokens and seed are the
sidebar's. Send first clears the session's stop flag unqueued (like Run); Stop only sets it, so it
ends a reply in every state; Clear stops a streaming reply and starts a new conversation. Each
finished reply shows its method, k, tau, tokens/s and what its mode cost, and is added to the session's runs (the Teach
view's points). Bad input is a ``gr.Error`` with one line, the server keeps serving.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from specdec.core.config import ConfigError
from specdec.core.methods import METHODS, preferred
from specdec.demo import chat_view as V
from specdec.demo import mode as M
from specdec.demo import render as R
from specdec.demo import speed as SP
from specdec.demo import stream as ST
from specdec.demo.handlers import RENDER_INTERVAL_S, page_error
from specdec.demo.model_info import SHOW_ORDER, Loaded
from specdec.demo.runs import DemoSession, Run, RunRecord, make_spec
from specdec.engine.chat import ChatError, render
from specdec.serving.backend import Busy


def unavailable_md(info: Loaded) -> str:
    if info.remote:
        return (
            f"### Chat is not available here\nA chat turn is rendered with the model's chat template, which needs "
            f"its tokenizer in this process; this page decodes on {info.name}. Use that server's "
            "`/v1/chat/completions`, or run the demo on the embedded engine: `specdec demo --model smollm2-135m`."
        )
    what = "a base model trained here on Python source" if info.tiny else "a base model"
    return (
        f"### Chat is not available for {info.title}\nIt is {what}: its tokenizer has no chat template, "
        "so there is no conversation format to continue (use **Generate** to complete text or code). "
        "To chat, run an instruct model: `specdec demo --model smollm2-135m` "
        "(SmolLM2-135M-Instruct, a ChatML template; `specdec models fetch smollm2-135m` installs it)."
    )


class ChatHandlers:
    def __init__(self, backend, info: Loaded) -> None:
        self.backend, self.info = backend, info

    def _view(self, convo: V.Conversation, body: str, status: str) -> dict[str, Any]:
        return {"run": convo.run, "head": "", "prompt": "", "body": body, "status": status}

    def send(self, message, system, method, k, temperature, top_p, max_new, seed, convo, session: DemoSession):
        try:
            spec = make_spec(self.backend, method, k, temperature, top_p, max_new, seed)
            text = V.check_message(message)
            prompt = render(self.info.tokenizer, convo.messages(system, text))
            if convo.busy:
                raise ConfigError("a reply is still streaming: wait for it or press Stop")
        except (ConfigError, ChatError) as e:
            raise page_error(e) from None
        convo.busy, epoch, asked = True, convo.epoch, V.user_html(text)
        shown = convo.body() + asked
        t = R.Transcript(greedy=spec.sampling.greedy, eos_ids=R.end_ids(self.backend))
        try:
            yield self._view(convo, shown, f"{method}: sending ..."), ""
            run = Run(self.backend, prompt, spec, session.stop, min_interval_s=RENDER_INTERVAL_S)
            for batch in run.batches():
                if convo.epoch != epoch:  # cleared meanwhile: this reply belongs to no conversation
                    break
                t.extend(batch)
                status = f"{method}: step {t.steps[-1].step}" if t.steps else f"{method}: waiting in the engine's queue"
                yield self._view(convo, shown + t.spans(), status), gr.skip()
        except (ConfigError, Busy) as e:
            raise page_error(e) from None
        finally:
            convo.busy = False
        if convo.epoch != epoch:
            yield self._view(convo, convo.body(), "cleared"), gr.skip()
            return
        end = "stopped by you" if run.stopped_early else (t.stop or "ended")
        line = V.reply_meta(method, spec.k, t, end)
        before = [r.split for r in session.runs if r.split is not None]
        cost = M.cost_html(method, spec.k, t, before)
        convo.add(text, t.text, asked + t.spans() + V.meta_html(method, spec.k, line) + cost)
        s = t.stats
        if s is not None:
            split = SP.split(t, SP.label(method, spec.k))
            c = R.cost_ratio(t)
            record = RunRecord(method, str(spec.k), s.alpha_tested, s.tau, s.tokens_per_s, c=c, split=split)
            session.runs.append(record)
        yield self._view(convo, convo.body(), f"{method}: {end}"), gr.skip()

    def arm(self, session: DemoSession) -> None:
        session.stop.clear()

    def stop(self, session: DemoSession) -> None:
        session.stop.set()

    def clear(self, convo: V.Conversation, session: DemoSession) -> dict[str, Any]:
        session.stop.set()  # a reply still streaming ends; its text is dropped (the epoch moved on)
        convo.clear()
        return self._view(convo, "", "")


def _controls(methods: tuple[str, ...]):
    method = gr.Dropdown(
        [(m, m) for m in methods if m in METHODS],
        value=preferred(methods, SHOW_ORDER),
        label="method for this message",
        elem_id="sd-chat-method",
        min_width=140,
    )
    return method


def chat_tab(backend, info: Loaded, s: dict[str, Any], session, run_group: dict[str, Any]) -> None:
    if not info.chat:
        gr.Markdown(unavailable_md(info), elem_id="sd-chat-unavailable")
        return
    h = ChatHandlers(backend, info)
    convo = gr.State(V.Conversation())
    gr.Markdown(
        f"Talk to **{info.title}** through its chat template; every reply token is coloured by its fate "
        f"(click one for its step, p and q). {V.CARRY} Temperature, top-p, max new tokens and seed are "
        "the sidebar's.",
        elem_id="sd-chat-intro",
    )
    system = gr.Textbox(
        label="system prompt (empty: the template's default)", lines=1, max_lines=4, elem_id="sd-chat-system"
    )
    gr.HTML(R.legend_html())
    view = ST.stream_box({"run": "chat-idle", "head": "", "prompt": "", "body": "", "status": ""}, "sd-chat")
    with gr.Row(equal_height=False):
        message = gr.Textbox(label="your message (Enter sends)", lines=1, max_lines=6, scale=4, elem_id="sd-chat-msg")
        method = _controls(tuple(backend.methods))
    with gr.Row(equal_height=False):
        _, k = M.mode_controls("sd-chat", "k")
    with gr.Row():
        send = gr.Button("Send", variant="primary", elem_id="sd-chat-send")
        stop = gr.Button("Stop", variant="stop", elem_id="sd-chat-stop")
        clear = gr.Button("Clear", elem_id="sd-chat-clear")
    inputs = [message, system, method, k, s["temperature"], s["top_p"], s["max_new"], s["seed"], convo, session]
    for trigger in (send.click, message.submit):
        trigger(h.arm, [session], None, queue=False, api_visibility="private").then(
            h.send, inputs, [view, message], api_visibility="private", show_progress="minimal", **run_group
        )
    stop.click(h.stop, [session], None, queue=False, api_visibility="private")
    clear.click(h.clear, [convo, session], [view], queue=False, api_visibility="private")
