"""The page's own stylesheet and script, passed to ``launch(css=..., head=...)``.

Contract:
- ``CSS``: token spans in monospace without padding that breaks words, the note on missing methods
  in small type, the prompt box in monospace, the token inspector, the step-through table (its
  panel may shrink below the table's width, and the table then scrolls sideways in its own box),
  the step-through panel at least as wide as its table where the row has room (so the verdict
  column shows at 1280x720 without scrolling; the row wraps the panel under the stream otherwise),
  and a phone layout (narrow screens: plots full width, titles that wrap instead of overlapping,
  the dropdown's arrow clear of the method name).
- ``HEAD``: one delegated script, the token inspector. Click or tap a token (``span.sd-tok``), or
  focus it with Tab and press Enter or Space, and ``#sd-inspector`` opens with its fate, step,
  draft position, token id, p and q (the span's ``data-info``, written by demo_render from the
  engine's Piece); Escape, the close button or a click elsewhere closes it. It replaces
  hover-only titles, which a phone cannot show. On a narrow screen it also closes the settings
  sidebar once the page has loaded, so the sidebar covers nothing until it is opened.
"""

from __future__ import annotations

from specdec.demo.render import kind_css

CSS = (
    kind_css()
    + """
.sd-tok { padding: 0 !important; border-radius: 2px; cursor: pointer; }
.sd-tok:focus { outline: 2px solid #7c3aed; outline-offset: 0; }
.sd-stream { font-variant-ligatures: none; }
#sd-step-stream, #sd-step-panel { min-width: 0 !important; max-width: 100%; }
#sd-step-stream { flex: 1 1 300px !important; }
#sd-step-panel { flex: 1 1 470px !important; }
.sd-record-wrap { overflow-x: auto; max-width: 100%; }
.sd-record td { padding: 2px 6px; vertical-align: top; }
.sd-record .sd-verdict { display: inline-block; }
#sd-missing-methods { font-size: 12px; opacity: .85; }
#sd-prompt textarea { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 13px; }
#sd-inspector { position: fixed; z-index: 1000; max-width: min(360px, 92vw); background: #111827; color: #f9fafb;
  font: 13px/1.45 ui-monospace, Menlo, Consolas, monospace; padding: 8px 28px 8px 10px; border-radius: 6px;
  box-shadow: 0 4px 16px rgba(0,0,0,.3); white-space: pre-wrap; }
#sd-inspector button { position: absolute; top: 2px; right: 4px; background: none; border: 0; color: inherit;
  font-size: 16px; cursor: pointer; }
@media (max-width: 640px) {
  #sd-inspector { left: 4vw !important; right: 4vw; bottom: 8px; top: auto !important; max-width: none; }
  #sd-accept-plot, #sd-alpha-plot, #sd-position-plot { min-width: 100% !important; }
  .sd-stats .sd-stat { min-width: 70px !important; }
  #sd-method input { padding-right: 28px !important; text-overflow: ellipsis; }
}
"""
)

HEAD = """
<script>
(() => {
  if (window.sdInspector) return;
  window.sdInspector = true;
  function box() {
    let el = document.getElementById('sd-inspector');
    if (!el) {
      el = document.createElement('div');
      el.id = 'sd-inspector';
      el.setAttribute('role', 'dialog');
      el.hidden = true;
      el.innerHTML = '<button aria-label="close" type="button">\\u00d7</button><div class="sd-insp-body"></div>';
      el.querySelector('button').addEventListener('click', () => { el.hidden = true; });
      document.body.appendChild(el);
    }
    return el;
  }
  function show(tok) {
    const el = box();
    const text = tok.textContent;
    const info = (tok.dataset.info || '').split(' | ').join('\\n');
    el.querySelector('.sd-insp-body').textContent = JSON.stringify(text) + '\\n' + info;
    el.dataset.kind = tok.dataset.kind || '';
    el.dataset.step = tok.dataset.step || '';
    el.hidden = false;
    const r = tok.getBoundingClientRect();
    el.style.left = Math.max(4, Math.min(r.left, window.innerWidth - 370)) + 'px';
    el.style.top = (r.bottom + 6 + 120 > window.innerHeight ? Math.max(4, r.top - 130) : r.bottom + 6) + 'px';
  }
  document.addEventListener('click', (e) => {
    const tok = e.target.closest && e.target.closest('span.sd-tok');
    if (tok) { show(tok); return; }
    const el = document.getElementById('sd-inspector');
    if (el && !el.contains(e.target)) el.hidden = true;
  });
  // a phone starts with the settings sidebar closed, so it covers nothing (it opens by its arrow)
  let tries = 0;
  const narrow = () => window.innerWidth < 700;
  const closeSidebar = setInterval(() => {
    const side = document.getElementById('sd-sidebar');
    const btn = side && side.querySelector('button.toggle-button');
    if (btn || ++tries > 100) clearInterval(closeSidebar);
    if (btn && narrow() && side.classList.contains('open')) btn.click();
  }, 100);
  document.addEventListener('keydown', (e) => {
    const tok = e.target.closest && e.target.closest('span.sd-tok');
    if (tok && (e.key === 'Enter' || e.key === ' ')) { e.preventDefault(); show(tok); }
    if (e.key === 'Escape') { const el = document.getElementById('sd-inspector'); if (el) el.hidden = true; }
  });
})();
</script>
"""
