"""``specdec train --model NAME eagle --eagle-passes P``: the training-time test's depth.

EAGLE's layer, at depth d of a draft tree, is fed its own predicted features d - 1 times; training
with P chained passes per position (``heads_train.unrolled``) shows it that view up to depth P.
The flag must reach the loss (a loss of 3 passes is not the loss of 2) and the options the card
records, and a checkpoint trained with another P must not keep its best under the new loss
(the losses do not compare): pure logic on a random layer, no target needed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from specdec.proposers.eagle import EagleLayer
from specdec.training import chat_losses as L
from specdec.training import chat_train

HIDDEN, N_HEADS, EPS, THETA = 576, 9, 1e-5, 100000.0


def _batch(rows: int = 2, T: int = 12, vocab: int = 40):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (rows, T + 1), generator=g)
    hid = torch.randn(rows, T, HIDDEN, generator=g)
    start, end = torch.tensor([2, 3]), torch.tensor([T, T - 1])
    return ids, hid, start, end


def test_each_pass_adds_its_own_term_to_the_loss():
    torch.manual_seed(0)
    layer = EagleLayer(HIDDEN, N_HEADS, 256, EPS, THETA)
    embed = torch.nn.Embedding(40, HIDDEN)
    w_s, subset = torch.randn(40, HIDDEN) / 24, torch.arange(40)
    with torch.no_grad():
        loss = [float(L.eagle_loss(layer, embed, w_s, subset, *_batch(), unroll=p)) for p in (1, 2, 3)]
    assert all(torch.isfinite(torch.tensor(loss)))
    assert loss[0] < loss[1] < loss[2], loss  # pass p adds 0.7^(p-1) (SmoothL1 + CE) >= 0, here > 0


def test_the_flag_reaches_the_options_and_the_validation_tag(monkeypatch, tmp_path):
    from specdec.cli.train import add_train_parser, cmd_chat

    parser = argparse.ArgumentParser()
    add_train_parser(parser.add_subparsers(dest="cmd"))
    got: dict = {}
    monkeypatch.setattr(chat_train, "train_chat", lambda kind, opt: got.update(kind=kind, opt=opt))
    argv = ["train", "eagle", "--model", "smollm2-135m", "--target", str(tmp_path), "--eagle-passes", "3"]
    assert cmd_chat(parser.parse_args(argv)) == 0
    assert got["kind"] == "eagle" and got["opt"].eagle_passes == 3
    assert parser.parse_args(argv[:-2]).eagle_passes == 2  # the default: the shipped head's recipe

    tags = []
    monkeypatch.setattr(chat_train, "fit", lambda *a: tags.append(a[-1]))
    monkeypatch.setattr(chat_train, "warm_start", lambda *a: None)
    for passes in (2, 3):
        opt = chat_train.ChatOptions(target=Path(tmp_path), out=tmp_path, cache=tmp_path, eagle_passes=passes)
        chat_train._fit(torch.nn.Linear(1, 1), None, None, opt, "eagle", None)
    assert tags == ["all/12/by-id", "all/12/by-id/passes 3"]  # 2 passes: the tag checkpoints already carry
