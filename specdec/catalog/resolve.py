"""``--model`` / ``--target`` / ``--draft`` / ``--no-draft`` -> the folders the engine loads.

Contract: ``resolve(model, target, draft, no_draft, default)`` returns a ``Choice`` (target,
draft or None, heads folder or None, the catalogue entry or None). Rules, in order:
- ``--target x.gguf``: the file converted once into the cache (store.gguf_folder); no draft
  unless ``--draft``; no heads.
- ``--target folder``: that folder; its heads next to it, as always; the draft is ``--draft``,
  else the shipped tiny draft when the folder is the shipped target, else none.
- otherwise the catalogue entry ``--model`` (else ``default``): its converted folder (a clear
  error naming ``specdec models fetch`` when it is not installed), its draft (another entry, or
  ``draft/`` among what was trained here for it) and its heads (``medusa/``, ``eagle/`` there;
  a model with none gets that folder all the same, so "not available" names where they belong).
``--no-draft`` always wins. Nothing here loads torch or touches the network, except the one-time
conversion of a user's own ``.gguf`` file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specdec.catalog import known, store
from specdec.paths import DEFAULT_DRAFT, DEFAULT_TARGET


@dataclass(frozen=True)
class Choice:
    target: Path
    draft: Path | None
    heads: Path | None
    model: known.Model | None

    @property
    def name(self) -> str:
        return self.model.name if self.model is not None else self.target.name


def _same(a: Path, b: Path) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return False


def _from_target(target: Path, draft: Path | None) -> Choice:
    if target.suffix == ".gguf":
        from specdec.catalog.fetch import convert_file

        return Choice(convert_file(target), draft, None, None)
    shipped = _same(target, DEFAULT_TARGET)
    entry = known.get("tiny") if shipped else None
    return Choice(target, draft or (DEFAULT_DRAFT if shipped else None), target.parent, entry)


def _from_model(m: known.Model, draft: Path | None) -> Choice:
    target = store.require(m)
    if draft is None and m.draft is not None:
        draft = store.require(known.get(m.draft))
    if draft is None and m.assets is not None and (m.assets / "draft" / "config.json").is_file():
        draft = m.assets / "draft"
    return Choice(target, draft, m.assets, m)  # heads: medusa/, eagle/ there (missing ones: not offered)


def resolve(
    model: str | None = None,
    target: Path | str | None = None,
    draft: Path | str | None = None,
    no_draft: bool = False,
    default: str = known.DEFAULT,
) -> Choice:
    draft = Path(draft) if draft is not None else None
    if target is not None:
        choice = _from_target(Path(target), draft)
    else:
        choice = _from_model(known.get(model or default), draft)
    if no_draft:
        choice = Choice(choice.target, None, choice.heads, choice.model)
    return choice


def export_folders(choice: Choice) -> dict[str, Path | None]:
    """The folders a model's export takes (specdec/export/vllm.py): target, draft, the heads."""
    heads = choice.heads
    return {
        "target": choice.target,
        "draft": choice.draft,
        "medusa": heads / "medusa" if heads is not None else None,
        "eagle": heads / "eagle" if heads is not None else None,
    }
