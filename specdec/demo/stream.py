"""The token stream as the page draws it: appended in the page's own script, never re-rendered.

Why: gradio's ``gr.HTML`` re-renders its whole value on every update and morphs the DOM node by
node against it; for a 512-token run that walk over ~500 spans on every streamed update was the
page's largest main-thread cost (measured with a CPU profile of the browser, docs/demo.md). Here the
component's template is static, and its ``js_on_load`` script draws the value itself:

Contract:
- ``stream_value(t, status, run, head="")`` is the component's value, a dict ``{"run", "head",
  "prompt", "body", "status"}``: ``body`` is the concatenation of ``demo_render.piece_span`` for
  every piece so far (cumulative, so a dropped intermediate update loses nothing, and gradio's
  streaming sends only the appended characters over the wire), ``run`` names the run (a new run
  starts a new stream), ``head`` is HTML above the box (the race's per-side title and timing),
  ``status`` one line of text under it.
- ``stream_box(value, elem_id)`` builds the ``gr.HTML`` whose script, on each new value of the
  same run, appends only ``body``'s new characters (``insertAdjacentHTML``: the spans already on the
  page are never touched), and on a new run (or a shorter body) replaces the body once. The DOM is
  the same as ``demo_render.transcript_html``'s: ``.sd-stream`` box, ``span.sd-tok`` tokens,
  ``.sd-status`` line, so the inspector and the tests read one shape.
- ``new_run()`` gives a fresh run name.
"""

from __future__ import annotations

import html
import itertools
from typing import Any

import gradio as gr

from specdec.demo import render as R

_runs = itertools.count(1)

TEMPLATE = (
    '<div class="sd-head"></div>'
    f'<div class="sd-stream" style="{R.BOX_STYLE}"><div class="sd-text">'
    '<span class="sd-prompt" style="opacity:.55"></span><span class="sd-body"></span></div></div>'
    '<div class="sd-status" style="font-size:12px;opacity:.75;margin-top:4px" hidden></div>'
)

# Runs as gradio's js_on_load: `element` is the component's root, `props.value` its value, and
# `watch('value', f)` calls f after every update (several updates may arrive as one).
SCRIPT = """
const q = (s) => element.querySelector(s);
let run = null, n = 0, head = null;
function draw() {
  const v = props.value || {};
  const body = v.body || '';
  if (v.run !== run || body.length < n) {
    run = v.run; n = body.length;
    q('.sd-prompt').innerHTML = v.prompt || '';
    q('.sd-body').innerHTML = body;
  } else if (body.length > n) {
    q('.sd-body').insertAdjacentHTML('beforeend', body.slice(n));
    n = body.length;
  }
  if ((v.head || '') !== head) { head = v.head || ''; q('.sd-head').innerHTML = head; }
  const st = q('.sd-status');
  if (st.textContent !== (v.status || '')) st.textContent = v.status || '';
  st.hidden = !v.status;
}
draw();
watch('value', draw);
"""


def new_run() -> str:
    return f"run-{next(_runs)}"


def _status(t: R.Transcript, status: str) -> str:
    if t.batch_rows:
        return f"{status} · {R.batch_note(t.batch_rows)}" if status else R.batch_note(t.batch_rows)
    return status


def stream_value(t: R.Transcript, status: str, run: str, head: str = "") -> dict[str, Any]:
    prompt = html.escape(R.prompt_tail(t.prompt)) if t.prompt else ""
    return {"run": run, "head": head, "prompt": prompt, "body": t.spans(), "status": _status(t, status)}


def stream_box(value: dict[str, Any], elem_id: str, **kw) -> gr.HTML:
    return gr.HTML(value, html_template=TEMPLATE, js_on_load=SCRIPT, elem_id=elem_id, **kw)
