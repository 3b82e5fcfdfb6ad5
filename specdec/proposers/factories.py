"""The registry's factories: each method's proposer from what an engine loaded (``Resources``).

Contract: ``specdec/core/methods.py`` names these by string (``"specdec.proposers.factories:draft"``),
so the registry stays data and the algorithm layer imports no proposer. Each returns the proposer,
or None when what the method needs is not there (no draft model, no heads folder); heads that exist
but do not load raise ``ModelLoadError`` naming the folder. The ``batch_*`` ones build a method's
batch form over its proposer's weights (``Method.make_batch``): the one ``propose(states,
contexts)`` of the method, whose batch of one is the solo proposer's ``propose``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from specdec.core.methods import Resources


def none(res: Resources):
    from specdec.core.proposer import NoDraft

    return NoDraft()


def lookup(res: Resources):
    from specdec.proposers.lookup import PromptLookup

    return PromptLookup()


def suffix(res: Resources):
    from specdec.proposers.suffix import SuffixDecoding

    return SuffixDecoding()


def draft(res: Resources):
    if res.draft_model is None:
        return None
    from specdec.proposers.draft import DraftModel

    return DraftModel(res.draft_model, vocab=res.vocab)


def _heads_folder(res: Resources, name: str) -> Path | None:
    if res.heads_dir is None:
        return None
    folder = Path(res.heads_dir) / name
    return folder if (folder / "config.json").exists() else None


def medusa(res: Resources):
    folder = _heads_folder(res, "medusa")
    if folder is None:
        return None
    from specdec.proposers.medusa import Medusa

    return _loading("medusa", folder, lambda: Medusa.load(folder, res.target_model, res.vocab))


def eagle(res: Resources):
    folder = _heads_folder(res, "eagle")
    if folder is None:
        return None
    from specdec.proposers.eagle import Eagle

    return _loading("eagle", folder, lambda: Eagle.load(folder, res.target_model, res.vocab, head=res.lm_head))


def batch_draft(proposer, slots: int, capacity: int):
    """The ragged draft over every draft row, on the proposer's own lean weights (and precision);
    a draft the ragged forward does not take drafts its rows one by one on its own forward."""
    from specdec.proposers.batch_draft import BatchDraft

    return BatchDraft(proposer, slots, capacity)


def batch_lookup(proposer, slots: int, capacity: int):
    return proposer.form  # no model: each row's state is searched on its own (lookup.LookupRows)


def batch_suffix(proposer, slots: int, capacity: int):
    return proposer.form  # one shared cache; each row's state is searched on its own (suffix.SuffixRows)


def batch_medusa(proposer, slots: int, capacity: int):
    from specdec.proposers.medusa.batch import BatchMedusa

    return BatchMedusa(proposer)


def batch_eagle(proposer, slots: int, capacity: int):
    from specdec.proposers.eagle.batch import BatchEagle

    return BatchEagle(proposer, slots, capacity)


def _loading(name: str, folder: Path, load: Callable[[], Any]):
    from specdec.models.loading import ModelLoadError

    try:
        return load()
    except ModelLoadError:
        raise
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        raise ModelLoadError(f"cannot load the {name} heads from {folder}: {e}") from e
