"""The browser demo (Gradio): live token fates, plots, race, step-through, teaching views.

Contract: ``layout`` builds the page; ``handlers``, ``runs`` and ``step_tab`` are thin handlers over a
``specdec.serving`` backend; ``render``, ``charts``, ``stats``, ``teach``, ``step`` and ``stream`` are
pure functions from step events to HTML/SVG (no gradio, no torch), so they are unit-tested. Nothing
here derives a token's fate: the events carry it. docs/demo.md.
"""
