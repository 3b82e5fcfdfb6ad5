"""What the demo says about the model it runs: its catalogue entry (or a custom folder, or a remote
server), whether it can chat, and why a method is missing.

Why: the page used to describe the shipped 8.7M tiny model whatever was loaded (issue 32, item 11).
The texts and figures measured on the tiny model (its cards, the teaching prompts' quoted tau, the
concurrency chart) are true of it only, so the page asks ``Loaded.tiny`` before showing them.

Contract:
- ``loaded(backend) -> Loaded``: the model's name and catalogue entry (``engine.model``; None for
  a custom folder or a remote server), ``tiny`` (the entry "tiny", or the shipped target folder
  loaded without ``--model``, as the tests' engine is), the engine's tokenizer (None on a remote
  backend), ``chat`` (that tokenizer has a chat template; specdec/engine/chat.py), the methods
  offered, the parameter count of the target as loaded and the engine itself (``engine``; what
  specdec/demo/parts.py reads the loaded drafts, heads and weight format from).
- ``unavailable(info) -> {method: reason}``: every registry method the backend does not offer,
  with why and the command that adds it (``TRAIN``).
- ``title_line(info)``: one Markdown line naming the model: title, parameters, licence.
- ``intro_line(info)``: the page's one-line description of the model under its title.
- ``SHOW_ORDER``: the method the page's menus start with, the first of these the model offers.
- ``model_md(info)``: the About text for a model other than tiny, from the catalogue (its note on
  the files as the catalogue's; what runs is specdec/demo/parts.py's, from the engine).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specdec.catalog import known
from specdec.core.methods import NAMES
from specdec.engine.chat import has_template
from specdec.paths import DEFAULT_TARGET

TRAIN = "specdec train --model {name} {what}"  # the command that trains a missing draft or heads
# the method the page starts with: the draft model's fates teach the most; without one (SmolLM2 as
# fetched) lookup still shows fates, where plain decoding shows none
SHOW_ORDER = ("draft", "lookup", "none")


@dataclass(frozen=True)
class Loaded:
    name: str
    entry: known.Model | None
    tiny: bool
    tokenizer: Any
    methods: tuple[str, ...]
    parameters: int | None = None
    remote: bool = False
    engine: Any = field(default=None, compare=False, repr=False)  # the loaded engine (None: remote)

    @property
    def chat(self) -> bool:
        return self.tokenizer is not None and has_template(self.tokenizer)

    @property
    def title(self) -> str:
        return self.entry.title if self.entry is not None else self.name


def _same(a: Any, b: Path) -> bool:
    try:
        return bool(a) and Path(str(a)).resolve() == b.resolve()
    except OSError:
        return False


def _parameters(engine) -> int | None:
    try:
        return sum(p.numel() for p in engine.target.model.parameters())
    except AttributeError:
        return None


def loaded(backend) -> Loaded:
    engine = getattr(backend, "engine", None)
    methods = tuple(backend.methods)
    if engine is None:  # a remote server (specdec/serving/remote.py): no tokenizer template here
        where = backend.describe().split(":")[0] if hasattr(backend, "describe") else "a remote server"
        return Loaded(where, None, False, None, methods, remote=True)
    entry = getattr(engine, "model", None)
    model = getattr(getattr(engine, "target", None), "model", None)  # transformers' model, if any
    path = getattr(getattr(model, "config", None), "name_or_path", "")
    if entry is None and _same(path, DEFAULT_TARGET):
        entry = known.get("tiny")  # the shipped target, loaded by folder (Engine.load's default)
    name = entry.name if entry is not None else getattr(engine, "model_name", "custom")
    if name == "custom" and path:
        name = Path(str(path)).name
    tiny = entry is not None and entry.name == "tiny"
    return Loaded(name, entry, tiny, engine.tokenizer, methods, _parameters(engine), engine=engine)


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    return f"{n / 1e9:.1f}B" if n >= 1e9 else f"{n / 1e6:.1f}M" if n < 1e8 else f"{n / 1e6:.0f}M"


def _has_own_draft(entry: known.Model | None) -> bool:
    if entry is None:
        return False
    return entry.draft is not None or (entry.assets is not None and (entry.assets / "draft" / "config.json").is_file())


def _reason(info: Loaded, method: str) -> str:
    if info.remote:
        return f"{info.name} does not offer it"
    n = info.name
    if method == "draft":
        if _has_own_draft(info.entry):
            return "its draft model was not loaded (`--no-draft`)"
        if info.entry is None:
            return "no draft model loaded: pass `--draft DIR` (a small model with the same tokenizer)"
        return f"no draft model for {n}: train one with `{TRAIN.format(name=n, what='draft')}`"
    label = {"medusa": "Medusa heads", "eagle": "EAGLE head"}.get(method, f"{method} proposer")
    if info.entry is None:
        return f"no {label} next to the target folder (a `{method}/` folder beside it)"
    return f"no {label} for {n}: train them with `{TRAIN.format(name=n, what=method)}`"


def unavailable(info: Loaded) -> dict[str, str]:
    return {m: _reason(info, m) for m in NAMES if m not in info.methods}


def unavailable_md(info: Loaded) -> str:
    missing = unavailable(info)
    if not missing:
        return ""
    return "Not available on this model: " + "; ".join(f"**{m}**: {why}" for m, why in missing.items()) + "."


def title_line(info: Loaded) -> str:
    e = info.entry
    if info.remote:
        return f"**Model:** served by {info.name} (its name, size and licence are the server's to tell)."
    if e is None:
        size = _size(info.parameters)
        return f"**Model:** `{info.name}`, a local folder, {size} parameters (licence: see its folder)."
    return f"**Model:** {e.title} (`{e.name}`), {e.params} parameters, licence {e.licence}."


def intro_line(info: Loaded) -> str:
    if info.tiny:
        return "The shipped models are tiny and were trained here on Python source (see *About the models*)."
    chat = " It has a chat template: talk to it in the **Chat** tab." if info.chat else ""
    return f"{title_line(info)}{chat} See *About the models*."


def model_md(info: Loaded) -> str:
    """About the models, for anything but the shipped tiny model."""
    e = info.entry
    lines = [title_line(info)]
    if e is not None:
        lines.append(f"- architecture: {e.arch}")
        if info.parameters:
            lines.append(f"- parameters as loaded: {info.parameters:,}")
        lines.append(f"- chat template: {'yes' if info.chat else 'no (a base model: completion only)'}")
        lines.append(f"- fill-in-the-middle tokens: {'yes' if e.fim else 'no'}")
        if e.notes:
            lines.append(f"- the catalogue's note on its files: {e.notes}")
        if e.draft is not None:
            d = known.get(e.draft)
            lines.append(f"- draft model: {d.title}, {d.params} parameters, licence {d.licence}")
    lines.append(f"- methods here: {', '.join(info.methods)}")
    for m, why in unavailable(info).items():
        lines.append(f"- **{m}** unavailable: {why}")
    lines.append(
        "\nThe example prompts' teaching notes and the Teach view's concurrency chart were measured on the "
        "shipped tiny model (`specdec demo --model tiny`), not on this one."
    )
    return "\n".join(lines)
