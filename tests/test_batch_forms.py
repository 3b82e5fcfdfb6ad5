"""The batch form's named contract (core/proposer.py ``BatchProposer``, issue 54): every method's
batch form an engine builds satisfies it, and the optional parts (``OneByOne``, ``ChoosesPlain``,
``Skips``) are found by ``isinstance`` as the getattr probes found them before."""

from __future__ import annotations

from types import SimpleNamespace

from specdec.core.proposer import BatchProposer, ChoosesPlain, Skips, one_by_one, plain_choice


def test_every_batch_form_an_engine_builds_is_a_batch_proposer(engine):
    from specdec.serving.batch.propose import Proposers

    forms = Proposers(engine, 2, 256).batched
    assert {"draft", "lookup"} <= set(forms)
    assert [name for name, form in forms.items() if not isinstance(form, BatchProposer)] == []
    assert one_by_one(forms["lookup"]) and not one_by_one(forms["draft"])
    states = {name: form.new_state() for name, form in forms.items()}
    assert isinstance(states["lookup"], Skips) and isinstance(states["lookup"], ChoosesPlain)
    for name, form in forms.items():
        form.release(states[name])
        assert form.nbytes() >= 0


def test_the_optional_parts_read_as_the_probes_did():
    assert not isinstance(object(), BatchProposer) and not one_by_one(object())
    assert one_by_one(SimpleNamespace(one_by_one=True)) and not one_by_one(SimpleNamespace(one_by_one=False))
    assert plain_choice(SimpleNamespace(chose_plain=True)) and not plain_choice(SimpleNamespace(chose_plain=0))
    assert not plain_choice(None) and not plain_choice(object())
    told = []
    assert isinstance(SimpleNamespace(skip=lambda: told.append(1)), Skips)
    assert not isinstance(SimpleNamespace(skip=None), Skips) and not isinstance(None, Skips)
