"""Medusa and EAGLE pieces in isolation: path-list trees, the tree search, the proposers' drafts,
the EAGLE layer's decoding path, the target's hidden states after a tree commit, head folders."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from specdec.core import methods as M
from specdec.core.config import GenerateSpec
from specdec.core.proposer import Context
from specdec.core.tree import Draft, position_ids, tree_attention_mask
from specdec.models import cache as kv
from specdec.models.loading import ModelLoadError
from specdec.models.target import Target
from specdec.proposers.eagle import KV, Eagle, EagleDecoder, EagleLayer
from specdec.proposers.folder import load_state, read_config, save_module
from specdec.proposers.medusa import Medusa, MedusaHeads
from specdec.proposers.medusa.paths import best_tree, expected_length, load_paths, save_paths, tree_order

HAND = [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]


def test_hand_written_path_list_gives_tree_mask_and_positions() -> None:
    paths, parents = tree_order(list(reversed(HAND)))  # any input order
    assert paths == [(0,), (1,), (0, 0), (0, 1), (1, 0), (0, 0, 0)]
    assert parents == [-1, -1, 0, 0, 1, 2]
    draft = Draft(torch.arange(6) + 10, tuple(parents))
    assert draft.depths() == [1, 1, 2, 2, 2, 3]
    L = 4
    assert position_ids(draft, L).tolist() == [[4, 5, 5, 6, 6, 6, 7]]
    visible = tree_attention_mask(draft, L)[0, 0] == 0
    assert visible[:, :L].all()  # every query sees the whole cached prefix
    #              pend  (0)  (1) (0,0) (0,1) (1,0) (0,0,0)
    expected = [
        [1, 0, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0, 0],
        [1, 0, 1, 0, 0, 0, 0],
        [1, 1, 0, 1, 0, 0, 0],
        [1, 1, 0, 0, 1, 0, 0],
        [1, 0, 1, 0, 0, 1, 0],
        [1, 1, 0, 1, 0, 0, 1],
    ]
    assert visible[:, L:].int().tolist() == expected


@pytest.mark.parametrize("bad", [[[0, 0]], [[1]], [[0], [0, 1]], [[0], []], [[0], [-1]]])
def test_invalid_path_lists_raise(bad) -> None:
    with pytest.raises(ValueError):
        tree_order(bad)


def test_path_files_round_trip(tmp_path: Path) -> None:
    save_paths(tmp_path / "tree.json", HAND, note="hand-written")
    assert load_paths(tmp_path / "tree.json") == tree_order(HAND)[0]
    (tmp_path / "plain.json").write_text(json.dumps(HAND))  # a bare list is accepted too
    assert load_paths(tmp_path / "plain.json") == tree_order(HAND)[0]


def _all_valid_trees(candidates, budget):
    for n in range(1, budget + 1):
        for subset in itertools.combinations(candidates, n):
            try:
                tree_order(subset)
            except ValueError:
                continue
            yield subset


def test_best_tree_is_optimal_by_brute_force() -> None:
    acc = [[0.55, 0.2, 0.1], [0.5, 0.15, 0.12]]
    candidates = [(r,) for r in range(3)] + [(a, b) for a in range(3) for b in range(3)]
    for budget in (1, 3, 5):
        best = max(expected_length(t, acc) for t in _all_valid_trees(candidates, budget))
        chosen = best_tree(acc, budget)
        assert len(chosen) <= budget
        assert expected_length(chosen, acc) == pytest.approx(best)
    assert best_tree(acc, 3) == [(0,), (1,), (0, 0)]  # 0.55, 0.275 (0,0), 0.2 (1,)


def test_best_tree_weighs_node_and_head_costs() -> None:
    chain = [[0.9], [0.9], [0.9], [0.9]]
    assert best_tree(chain, 4) == [(0,), (0, 0), (0, 0, 0), (0, 0, 0, 0)]
    # (1 + 0.9 + 0.81 + 0.729) / (1 + 0.5 x 3) = 1.376 beats 4 deep: 4.095 / 3 = 1.365
    assert best_tree(chain, 4, head_cost=0.5) == [(0,), (0, 0), (0, 0, 0)]
    assert best_tree(chain, 4, node_cost=5.0) == [(0,)]  # never empty, however costly
    assert best_tree([[0.0], [0.0]], 4) == [(0,)]  # heads that never hit: the smallest tree


def _ctx(tokens, hidden, budget=64, k_max=None) -> Context:
    return Context(list(tokens), GenerateSpec(method="eagle"), budget, k_max, hidden=hidden)


def attend(layer: EagleLayer, f, e, pos, kv: KV, mask):
    """The reference decoding path, written from the training module's own pieces: n new inputs
    [n, H] at positions ``pos`` into kv slots kv.length..+n, ``mask`` bool [n, kv.length + n] or
    None for causal. The engine's EagleDecoder must compute exactly this."""
    x = layer.fc(torch.cat([f, e], dim=-1))
    q, k, v = layer.qkv_at(x, pos)
    n, L = x.shape[0], kv.length
    kv.ensure(L + n)
    kv.k[:, L : L + n], kv.v[:, L : L + n] = k, v
    if mask is None and n > 1:
        mask = torch.ones(n, L + n, dtype=torch.bool).tril(diagonal=L)
    att = F.scaled_dot_product_attention(q, kv.k[:, : L + n], kv.v[:, : L + n], attn_mask=mask)
    kv.length = L + n
    return layer.out(x, att)


def new_kv(layer: EagleLayer, capacity: int) -> KV:
    return KV(layer.heads, layer.hd, capacity, layer.qkv.weight.dtype, "cpu")


def test_medusa_fills_the_tree_with_each_heads_top_k() -> None:
    torch.manual_seed(0)
    heads = MedusaHeads(16, 50, 3)
    for b in heads.block:
        torch.nn.init.normal_(b.weight, std=0.3)
    med = Medusa(heads, HAND)
    hidden = torch.randn(5, 16)
    draft = med.propose(_ctx(range(6), hidden))
    top = heads(hidden[-1]).topk(2, -1).indices
    assert draft.parents == (-1, -1, 0, 0, 1, 2) and draft.q is None
    assert draft.tokens.tolist() == [int(top[len(p) - 1, p[-1]]) for p in med.paths]
    cut = med.propose(_ctx(range(6), hidden, budget=4))  # the first 4 nodes are still a tree
    assert cut.parents == (-1, -1, 0, 0) and cut.tokens.tolist() == draft.tokens[:4].tolist()
    assert med.propose(_ctx([3], hidden[:0])).n == 0  # no hidden state yet: a plain step
    with pytest.raises(ValueError):
        med.set_paths([[0], [0, 0], [0, 0, 0], [0, 0, 0, 0]])  # deeper than 3 heads


def _eagle(seed=0) -> tuple[EagleLayer, torch.Tensor, torch.Tensor]:
    torch.manual_seed(seed)
    layer = EagleLayer(32, 4, 48).eval()
    return layer, torch.randn(40, 32), torch.randn(40, 32)


def test_eagle_decoding_path_equals_training_path() -> None:
    layer, _, _ = _eagle()
    f, e = torch.randn(1, 12, 32), torch.randn(1, 12, 32)
    with torch.no_grad():
        full = layer(f, e)[0]
        kv = new_kv(layer, 4)  # grows on demand
        parts = [
            attend(layer, f[0, a:b], e[0, a:b], torch.arange(a, b), kv, None) for a, b in ((0, 5), (5, 6), (6, 12))
        ]
    torch.testing.assert_close(torch.cat(parts), full, atol=1e-5, rtol=1e-5)


def test_eagle_tree_node_sees_only_its_ancestors() -> None:
    """A tree forward with the node mask equals a chain forward over each node's own path."""
    layer, _, _ = _eagle(1)
    f, e = torch.randn(8, 32), torch.randn(8, 32)
    with torch.no_grad():
        kv = new_kv(layer, 16)
        attend(layer, f[:5], e[:5], torch.arange(5), kv, None)
        # nodes a, b (siblings at position 5), then c under b at position 6
        mask = torch.zeros(2, 7, dtype=torch.bool)
        mask[:, :5] = True
        mask[0, 5] = mask[1, 6] = True
        ab = attend(layer, f[5:7], e[5:7], torch.tensor([5, 5]), kv, mask)
        mask = torch.zeros(1, 8, dtype=torch.bool)
        mask[:, :5] = True
        mask[0, 6] = mask[0, 7] = True
        c = attend(layer, f[7:8], e[7:8], torch.tensor([6]), kv, mask)
        for path, node_out in (([5], ab[0:1]), ([6], ab[1:2]), ([6, 7], c)):
            kv2 = new_kv(layer, 16)
            idx = list(range(5)) + path
            ref = attend(layer, f[idx], e[idx], torch.arange(len(idx)), kv2, None)[-1:]
            torch.testing.assert_close(node_out, ref, atol=1e-5, rtol=1e-5)


def test_eagle_decoder_equals_layer() -> None:
    """The proposer's fused decoding forward computes EagleLayer.attend, causal and with a tree mask."""
    layer, _, _ = _eagle(3)
    with torch.no_grad():
        layer.ln1.mul_(1.5), layer.ln2.add_(0.25)  # norm weights that are not ones must be folded in
        fast = EagleDecoder(layer)
        f, e = torch.randn(9, 32), torch.randn(9, 32)
        kv_ref, kv_fast = new_kv(layer, 4), fast.new_kv(4)
        mask = torch.zeros(2, 9, dtype=torch.bool)
        mask[:, :7] = True
        mask[0, 7] = mask[1, 8] = True
        for a, b, pos, m in (
            (0, 6, torch.arange(6), None),
            (6, 7, torch.tensor([6]), None),
            (7, 9, torch.tensor([7, 7]), mask),
        ):
            ref = attend(layer, f[a:b], e[a:b], pos, kv_ref, m)
            torch.testing.assert_close(fast.attend(f[a:b], e[a:b], pos, kv_fast, m), ref, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(kv_fast.k[:, :9], kv_ref.k[:, :9], atol=1e-5, rtol=1e-5)


def test_eagle_resynchronises_by_common_prefix() -> None:
    layer, embed, head = _eagle(2)
    g = torch.Generator().manual_seed(0)
    tok_a = torch.randint(0, 40, (31,), generator=g).tolist()
    tok_b = tok_a[:10] + torch.randint(0, 40, (21,), generator=g).tolist()  # another request, same start
    hid_a, hid_b = torch.randn(30, 32, generator=g), torch.randn(30, 32, generator=g)
    hid_b[:9] = hid_a[:9]  # the target's hidden states agree wherever the tokens do
    make = lambda: Eagle(layer, embed, head, nodes=10, depth=4, beam=3, top_k=3, node_cost=0.0, expand_min=0.0)
    eagle = make()
    # repeat, grow, grow, switch to the other request (common prefix 10), grow, shrink
    for tokens, hidden, n in (
        (tok_a, hid_a, 12),
        (tok_a, hid_a, 12),
        (tok_a, hid_a, 17),
        (tok_a, hid_a, 25),
        (tok_b, hid_b, 20),
        (tok_b, hid_b, 31),
        (tok_b, hid_b, 9),
    ):
        got = eagle.propose(_ctx(tokens[:n], hidden[: n - 1]))
        ref = make().propose(_ctx(tokens[:n], hidden[: n - 1]))
        assert got.parents == ref.parents and got.tokens.tolist() == ref.tokens.tolist(), n
        assert eagle.state.kv.length == n - 1 and eagle.state.ids == tokens[:n]  # draft slots dropped
    assert 1 <= got.n <= 10 and got.q is None
    assert all(got.parents[i] < i for i in range(got.n))


def test_eagle_respects_the_node_budget() -> None:
    layer, embed, head = _eagle(3)
    eagle = Eagle(layer, embed, head, nodes=12, depth=5, beam=4, top_k=4, node_cost=0.0, expand_min=0.0)
    draft = eagle.propose(_ctx(list(range(10)), torch.randn(9, 32)))
    assert draft.n == 12 and max(draft.depths()) >= 2
    assert eagle.propose(_ctx(list(range(10)), torch.randn(9, 32), k_max=5)).n == 5  # the request's k
    assert eagle.propose(_ctx(list(range(10)), torch.randn(9, 32), budget=3)).n == 3


def test_target_hidden_follows_tree_commits(engine, prompts) -> None:
    model = engine.target.model
    t = Target(model)
    ids = engine.encode(prompts[3])[:40]
    t.prefill(ids)
    t.score(ids[-1], Draft.from_parents(torch.tensor([5, 6, 7, 8]), (-1, -1, 1, 0)))
    t.commit((1, 2))
    committed = ids + [6, 7]
    with torch.inference_mode():
        ref = model.get_decoder()(input_ids=torch.tensor([committed])).last_hidden_state[0]
    assert t.hidden.shape == (len(committed), model.config.hidden_size)
    torch.testing.assert_close(t.hidden, ref, atol=2e-4, rtol=1e-4)


def test_chain_shaped_path_list_is_a_chain_and_scores_like_one(engine, prompts) -> None:
    paths, parents = tree_order([[0], [0, 0], [0, 0, 0]])
    draft = Draft(torch.tensor([11, 22, 33]), tuple(parents))
    assert draft.is_chain
    t = Target(engine.target.model)
    ids = engine.encode(prompts[4])[:30]
    t.prefill(ids)
    plain = t.score(ids[-1], draft)
    kv.truncate(t.cache, len(t.ids))  # drop the scored rows, score again with the mask
    with torch.inference_mode():  # the same chain through the explicit 4-D tree mask
        mask = tree_attention_mask(draft, len(t.ids))
        h = t._forward(torch.tensor([ids[-1], 11, 22, 33]), position_ids(draft, len(t.ids)), mask)
        masked = t.lm_head(h).float()
    torch.testing.assert_close(masked, plain, atol=2e-4, rtol=1e-4)


def test_head_folders_round_trip_and_are_found_next_to_the_target(engine, tmp_path: Path) -> None:
    def head_proposers(root: Path) -> dict:  # what an engine built with heads_dir=root would offer
        res = M.Resources(engine.target.model, heads_dir=root)
        built = {n: m.make(res) for n, m in M.METHODS.items() if m.tree and n != "suffix"}  # suffix: no heads
        return {n: p for n, p in built.items() if p is not None}

    cfg = engine.target.model.config
    heads = MedusaHeads(cfg.hidden_size, cfg.vocab_size, 2)
    save_module(heads, tmp_path / "medusa", {"name": "t"})
    save_paths(tmp_path / "medusa" / "tree.json", [[0], [0, 0]])
    back = load_state(MedusaHeads(**read_config(tmp_path / "medusa")), tmp_path / "medusa")
    for a, b in zip(heads.state_dict().values(), back.state_dict().values()):
        torch.testing.assert_close(a.half().float(), b)
    assert set(head_proposers(tmp_path)) == {"medusa"}  # no eagle/: not offered
    save_module(MedusaHeads(cfg.hidden_size + 1, cfg.vocab_size, 2), tmp_path / "bad" / "medusa", {})
    with pytest.raises(ModelLoadError, match="hidden size"):
        head_proposers(tmp_path / "bad")


def test_eagle_cuts_the_tree_where_predicted_speedup_peaks() -> None:
    layer, embed, head = _eagle(4)
    eagle = Eagle(layer, embed, head, node_cost=0.1)
    assert eagle._best_size([0.9, 0.8, 0.5, 0.05, 0.01]) == 3  # a 0.05 node costs more than it brings
    assert eagle._best_size([0.01]) == 1  # at least one node
    eagle.node_cost = 0.0
    assert eagle._best_size([0.9, 0.8, 0.5, 0.05, 0.01]) == 5
