"""The target model and its KV cache: prefill, one scoring forward per step, commit.

Contract (invariant I1 of docs/architecture.md): between steps the cache holds the KV of exactly
``ids``, which is every committed token except the pending one. ``score(pending, draft)`` runs ONE
forward over ``[pending] + draft.tokens`` (explicit position ids = prefix length + depth; a 4-D
additive tree mask when the draft is not a chain) and returns the target logits [n + 1, V] float32,
row 0 after the pending token and row i+1 after draft node i.
``commit(path)`` keeps the KV of the pending token and of the accepted path's nodes, in order.
``hidden`` is the last hidden state (the LM head's input) at every position of ``ids``, kept in
step with the cache: what Medusa and EAGLE draft from.
``prefill`` reuses the longest common prefix of the cache with the new token list.
What runs is one ``forward.Forward`` (``forward``: path, weights, rows), replaced whole and read by
``forward.kernel`` on every call; nothing else decides. ``paths`` are the forwards this target can
run ("hf": transformers' decoder; "lean": the fused layers of ``specdec/models/lean_target.py``,
plain float32 Llama models only); ``use(path)`` picks one (calibration does, by timing both); both
write the same cache, so a switch keeps it valid. ``set_weights(fmt)`` runs the target on its
weights in another format (``quant.FORMATS``: the lean forward on int8 or int4 weights, its LM
head int8, ``specdec/fast/calibrate_weights.py`` picks by measurement); outside fp32 the lean
forward is the only path (transformers' would compute another function), the verifier's forward
is row-exact (``lean_target.ROW_EXACT``) with the default rows forward (``rows()`` lists those
built; ``use_rows(name)`` picks another) and the cache restarts empty. ``path`` and ``weights``
name what runs.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from specdec.core.seq import resync
from specdec.core.tree import Draft, position_ids, tree_attention_mask
from specdec.models import cache as kv
from specdec.models import quant as Q
from specdec.models.forward import Forward, default_rows, kernel
from specdec.models.lean_target import LeanTarget, supports_quantized
from specdec.models.packed import Linear, pack_linears, packed_scope


class Target:
    """Wraps a causal LM (``get_decoder()`` + ``get_output_embeddings()``) and its cache."""

    def __init__(self, model: torch.nn.Module, context: int | None = None, vocab: int | None = None) -> None:
        self.model = model.eval()
        self.packed = pack_linears(model)  # oneDNN linears where calibrated to pay, in these forwards only
        self.decoder = model.get_decoder()
        self.lm_head = model.get_output_embeddings()
        self.head = Linear.shared(self.lm_head)  # what EAGLE reads too: one packed copy (packed.py)
        cfg = model.config
        self.context = int(context or getattr(cfg, "max_position_embeddings", 2048))
        self.n_layers = cfg.num_hidden_layers
        self.device = next(model.parameters()).device
        self.cache = kv.new_cache(self.n_layers, min(self.context, 1024))
        self.ids: list[int] = []
        self._scored: Draft | None = None
        self._pending = -1
        self._hidden: torch.Tensor | None = None  # [capacity, H]; rows [0, len(ids)) are valid
        self._scored_hidden: torch.Tensor | None = None
        self.lean = LeanTarget(model) if _lean_ok(model) else None
        self.forward = Forward()  # transformers' decoder on the float32 weights until calibration
        self.vocab = vocab  # padded LM heads (e.g. Qwen 7B vs 0.5B) are cut to the shared vocabulary

    @property
    def path(self) -> str:
        return self.forward.path

    @property
    def weights(self) -> str:
        return self.forward.weights

    def rows(self) -> tuple[str, ...]:
        """The row-exact forwards the running format can use (``LeanTarget.rows``); () for none."""
        return self.lean.rows() if self.lean is not None and self.path == "lean" else ()

    def use_rows(self, rows: str) -> None:
        """Compute the row-exact forwards with ``rows`` (one of ``rows()``) from now on."""
        if rows not in self.rows():
            raise ValueError(f"rows forward {rows!r} not available here: {', '.join(self.rows()) or 'none'}")
        self.forward = replace(self.forward, rows=rows)

    @property
    def paths(self) -> tuple[str, ...]:
        if self.weights != "fp32":
            return ("lean",)
        return ("hf", "lean") if self.lean is not None else ("hf",)

    def weight_formats(self) -> tuple[str, ...]:
        """The formats ``set_weights`` takes for this model on this machine."""
        w = self.lm_head.weight
        if w.device.type != "cpu" or w.dtype != torch.float32 or not supports_quantized(self.model):
            return ("fp32",)
        return tuple(f for f in Q.FORMATS if Q.available(f, self.decoder.layers[0].mlp.down_proj.weight))

    @torch.inference_mode()
    def set_weights(self, fmt: str) -> None:
        if fmt == self.weights:
            return
        if fmt not in self.weight_formats():
            raise ValueError(f"weight format {fmt!r} not available for this model here: {self.weight_formats()}")
        if fmt == "fp32":
            self.lean, self.head.low = (LeanTarget(self.model) if _lean_ok(self.model) else None), None
            self.forward = Forward("hf", fmt)
        else:
            self.lean = LeanTarget(self.model, fmt=fmt)
            self.head.low = Q.quantize(self.lm_head.weight, Q.HEAD.get(fmt, fmt))
            self.forward = Forward("lean", fmt, default_rows(self.lean.rows()))
        self.reset()

    # the cache as one swappable state, for keeping several prompts warm (specdec/models/prefixes.py)
    def state(self) -> tuple:
        """The live (KV cache, hidden states), by reference."""
        return self.cache, self._hidden

    def valid(self) -> bool:
        """Whether the cache holds exactly ``ids`` (not after an interrupted step)."""
        return kv.length(self.cache) == len(self.ids)

    def fresh_state(self) -> tuple:
        return kv.new_cache(self.n_layers, min(self.context, 1024)), None

    def restore(self, ids: list[int], state: tuple) -> None:
        """Go on from ``state`` holding ``ids`` (one ``state`` returned, or ``fresh_state``)."""
        self.ids, (self.cache, self._hidden) = list(ids), state
        self._scored = self._scored_hidden = None

    def reset(self) -> None:
        """Forget the cache: the next prefill computes every position."""
        kv.truncate(self.cache, 0)
        self.ids, self._scored, self._scored_hidden, self._hidden = [], None, None, None

    def use(self, path: str) -> None:
        if path not in self.paths:
            raise ValueError(f"target path {path!r} not available here: {', '.join(self.paths)}")
        self.forward = replace(self.forward, path=path)  # rows: set with the format (only lean runs those)

    @property
    def hidden(self) -> torch.Tensor | None:
        """[len(ids), H]: the last hidden state at every cached position (a view; read only)."""
        return None if self._hidden is None else self._hidden[: len(self.ids)]

    def _store_hidden(self, start: int, rows: torch.Tensor) -> None:
        need = start + rows.shape[0]
        if self._hidden is None:
            self._hidden = rows.new_empty((0, rows.shape[1]))
        self._hidden = kv.grow(self._hidden, start, need, 0, minimum=64)
        self._hidden[start:need] = rows

    def _forward(
        self, input_ids: list[int] | torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | None, exact=False
    ) -> torch.Tensor:
        x = torch.as_tensor(input_ids, dtype=torch.long, device=self.device).view(1, -1)
        code = kernel(self.forward, x.shape[1], exact, mask is None)
        if code != "hf":
            return self.lean.hidden(self.cache, x[0], positions.to(self.device), mask, code)
        with packed_scope():
            out = self.decoder(
                input_ids=x,
                position_ids=positions.to(self.device),
                attention_mask=mask,
                cache=self.cache,
                use_cache=True,
            )
        return out.last_hidden_state[0]

    @torch.inference_mode()
    def prefill(self, ids: list[int]) -> None:
        """Make the cache hold ``ids[:-1]`` (the last token becomes pending), reusing the LCP."""
        if not ids:
            raise ValueError("prefill needs at least one token")
        want = ids[:-1]
        keep = resync(self.ids, kv.length(self.cache), want, len(want))  # 0 after an interrupted step
        kv.truncate(self.cache, keep)
        self.ids = self.ids[:keep]
        self._scored = self._scored_hidden = None
        rest = want[keep:]
        if rest:
            pos = torch.arange(keep, keep + len(rest)).view(1, -1)
            self._store_hidden(keep, self._forward(rest, pos, None))
            self.ids.extend(rest)

    @torch.inference_mode()
    def score(self, pending: int, draft: Draft) -> torch.Tensor:
        L = len(self.ids)
        pos = position_ids(draft, L)
        mask = (
            None if draft.is_chain else tree_attention_mask(draft, L, dtype=self.lm_head.weight.dtype).to(self.device)
        )
        ids = torch.cat([torch.tensor([pending], dtype=torch.long), draft.tokens.cpu()])
        hidden = self._forward(ids, pos, mask, exact=True)
        self._scored = draft
        self._scored_hidden = hidden
        self._pending = pending
        logits = self.head(hidden).float()
        return logits[:, : self.vocab] if self.vocab else logits

    @torch.inference_mode()
    def commit(self, path: tuple[int, ...]) -> None:
        """Keep the pending token and the accepted nodes ``path`` (indices into the scored draft)."""
        draft = self._scored
        if draft is None:
            raise RuntimeError("commit() without a preceding score()")
        L = len(self.ids)
        rows = [0] + [1 + i for i in path]
        kv.keep(self.cache, L, rows)
        self._store_hidden(L, self._scored_hidden[rows])
        self.ids.append(self._pending)
        self.ids.extend(int(draft.tokens[i]) for i in path)
        self._scored = self._scored_hidden = None


def _lean_ok(model: torch.nn.Module) -> bool:
    w = model.get_output_embeddings().weight
    return LeanTarget.supports(model) and w.dtype == torch.float32 and w.device.type == "cpu"
