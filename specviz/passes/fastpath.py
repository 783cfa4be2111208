"""Our own forward pass for Llama targets on the CPU: the bits of the model's modules as the speed-ups patch them.

What it is bit-equal to: the model's own modules as `speedups.apply` leaves them, that is with every
nn.Linear a speedups.PackedLinear (oneDNN's product on a packed weight, rows padded to MIN_ROWS) and
attention through the implementation the model is configured with (speedups' GQA SDPA, or SDPA).
Not stock transformers: stock multiplies with MKL's sgemm on the plain weights, whose summation
order, and so whose last bits, can differ (tests/passes/test_speedups.py holds those to a tolerance).

On a small model a one-token pass is mostly fixed cost per op, not arithmetic: some 40 small ops
per layer, each dispatched through nn.Module calls, transformers' wrappers and our PackedLinear's
checks and row padding (the measurements are in docs/bench/2026-12-04.md, "our own forward pass").
This runs the same layers with less of that:

- q, k and v are one oneDNN product over their stacked weights, and so are gate and up. Each
  output column is the same dot product as in its own product, so on the CPUs measured the bits
  are the same; `FastForward.check` proves it again on the model itself before it is used.
- rows are padded to speedups.MIN_ROWS once per pass, not once per linear layer; the padded
  rows never reach attention, the cache or the result (a row's product does not read the others).
- RMSNorm, rotary embedding, the residual adds and the MLP are the modules' own float ops in
  their order; the mask comes from transformers' `create_causal_mask` and attention from the
  function the model is configured with (SDPA), exactly as the modules call them.

So a pass gives the patched modules' logits bit for bit: tests/passes/test_fastpath.py on tiny Llamas;
`FastForward.check` on the model at first use, which runs the kinds of pass a run makes (a
prefill, steps, chains, and draft trees of 17 and 33 rows with their 4-D masks and explicit
positions, as a verify pass is made) both ways and compares every logit (the app's start keeps a
passed verdict and trusts it again on the same machine, software and model: passes/verdicts.py);
and the bundled model's greedy runs against HF `generate`. It is ours only: HF `generate`, the anchor of every
benchmark, runs the modules as they are.

Used for one run's own passes (decoding/targets.py LocalTarget, a draft model's steps in
proposers/draft_model.py, and the cost profile's timed passes, so v(n) prices the passes runs
make) and for passes shared by several runs (passes/ragged.py: `cache` is then the pass's ragged
layout, and attention goes through its wrapper, row by row). It applies where the
model is a LlamaForCausalLM in float32 on the CPU whose linears the speed-ups packed; anything
else, or a model whose check fails, runs the modules, and says why in a WARNING on this module's
logger (once per model and decision). SPECVIZ_NO_SPEEDUPS=1 turns it off with the other speed-ups.
"""
from __future__ import annotations

import logging
import threading
import time
import weakref

import torch
import torch.nn.functional as F

from specviz.passes import fastcheck, speedups, verdicts

log = logging.getLogger(__name__)

SUPPORTED = ("LlamaForCausalLM",)
_LINEAR = torch.ops.mkldnn._linear_pointwise
_PACK = torch.ops.mkldnn._reorder_linear_weight
# per model: its fast forward (or None) and the _stamp it was decided under
_BUILT: "weakref.WeakKeyDictionary[torch.nn.Module, tuple]" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def of(model: torch.nn.Module) -> "FastForward | None":
    """The model's fast forward, built and checked on first use; None where the modules must run.
    Decided again when what it depends on changes: the speed-ups applied or removed, another dtype
    or device, training mode, or (for one already built) an edited or replaced weight."""
    kept = _BUILT.get(model)
    if not _decided(kept, model):
        with _LOCK:
            kept = _BUILT.get(model)  # another thread may have decided while this one waited
            if not _decided(kept, model):
                kept = _BUILT[model] = (FastForward.build(model), _stamp(model))
    return kept[0]


def in_force(model: torch.nn.Module) -> bool:
    """Whether `model`'s passes run our fast forward: the decision in force, read without `of`'s
    check of every weight's identity (the next pass makes it, and decides again after an edited
    weight). For what is asked every Step, not before a pass:
    pricing a run (pricing/costs.py), where that check cost milliseconds a Step under a class."""
    kept = _BUILT.get(model)
    if kept is not None and kept[1] == _stamp(model):
        return kept[0] is not None
    return of(model) is not None


def _decided(kept: tuple | None, model: torch.nn.Module) -> bool:
    """Whether `kept` (what _BUILT holds for `model`) still answers for the model as it is now."""
    return kept is not None and kept[1] == _stamp(model) and (kept[0] is None or kept[0].current())


def _stamp(model: torch.nn.Module) -> tuple:
    """What `FastForward.unsupported` reads that can change on a model object, cheaply."""
    head = getattr(model, "lm_head", None)
    weight = getattr(head, "weight", None)
    where = None if weight is None else (weight.dtype, weight.device.type)
    return type(head), where, model.training, getattr(getattr(model, "config", None), "_attn_implementation", None)


def forward(model: torch.nn.Module, ids: torch.Tensor, cache, position_ids=None, mask=None,
            keep: int = 0) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(logits (1, rows, vocab), final hidden states (1, n, d)) of one pass of `ids` (1, n) over
    `cache`, which grows by n; `keep` > 0 computes logits for the last `keep` rows only. None where
    the model has no fast forward (or `ids` is a batch of several rows): the caller runs the modules."""
    if ids.shape[0] != 1:
        return None
    fast = of(model)
    return None if fast is None else fast(ids, cache, position_ids, mask, keep)


def _as_float(mask, dtype: torch.dtype):
    """A bool mask (True: seen) as the float mask SDPA turns it into at every call (0 where seen, -inf
    elsewhere), made once per pass instead of once in every layer: a chain pass's mask spans every cached
    position, so at a long context those conversions add up (scripts/bench/long_context.py). SDPA then
    gets the numbers it would have made itself (FastForward.check compares chains bit for bit)."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        return mask
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float("-inf"))


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """LlamaRMSNorm's ops in its order (float32 in, float32 out: its casts are no-ops here)."""
    variance = x.pow(2).mean(-1, keepdim=True)
    return weight * (x * torch.rsqrt(variance + eps))


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """transformers' apply_rotary_pos_emb for one tensor: x·cos + rotate_half(x)·sin."""
    half = x.shape[-1] // 2
    return (x * cos) + (torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin)


def _stacked(*linears: torch.nn.Linear) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One packed weight (and bias) for several linear layers that read the same input."""
    weight = torch.cat([m.weight.detach() for m in linears])
    biases = [m.bias for m in linears]
    bias = None if all(b is None for b in biases) else torch.cat(
        [b.detach() if b is not None else m.weight.new_zeros(m.weight.shape[0]) for m, b in zip(linears, biases)])
    return _PACK(weight), bias


class _Layer:
    """One decoder layer's weights as the fast forward reads them."""

    def __init__(self, layer):
        attn, mlp = layer.self_attn, layer.mlp
        self.attn = attn
        self.head_dim, self.scaling = attn.head_dim, attn.scaling
        self.qkv, self.qkv_bias = _stacked(attn.q_proj, attn.k_proj, attn.v_proj)
        self.n_q, self.n_k = attn.q_proj.weight.shape[0], attn.k_proj.weight.shape[0]
        self.o, self.o_bias = attn.o_proj.packed(), attn.o_proj.bias  # the speed-ups' own copies
        self.gate_up, self.gate_up_bias = _stacked(mlp.gate_proj, mlp.up_proj)
        self.n_gate = mlp.gate_proj.weight.shape[0]
        self.down, self.down_bias = mlp.down_proj.packed(), mlp.down_proj.bias
        self.act = mlp.act_fn
        self.norm1, self.eps1 = layer.input_layernorm.weight, layer.input_layernorm.variance_epsilon
        self.norm2, self.eps2 = layer.post_attention_layernorm.weight, layer.post_attention_layernorm.variance_epsilon


class FastForward:
    """A Llama model's pass with stacked products and one row padding (see the module docstring)."""

    def __init__(self, model: torch.nn.Module):
        self.model = model
        base = model.model
        self.config = base.config
        self.embed, self.rotary = base.embed_tokens, base.rotary_emb
        self.layers = [_Layer(layer) for layer in base.layers[: self.config.num_hidden_layers]]
        self.norm, self.eps = base.norm.weight, base.norm.variance_epsilon
        self.lm, self.lm_bias = model.lm_head.packed(), model.lm_head.bias
        # every weight with the dict that holds it: a replaced weight is a new object there
        self._params = [(held, name, w) for m in model.modules() for name, w in m._parameters.items()
                        if w is not None for held in (m._parameters,)]
        self._sources = self._identities()

    # -- when it applies ------------------------------------------------------------------------
    @classmethod
    def build(cls, model: torch.nn.Module) -> "FastForward | None":
        """A checked fast forward for `model`, or None, with a WARNING on this module's logger that says why."""
        why = cls.unsupported(model)
        if why is None:
            try:
                fast = cls(model)
                key = verdicts.kept_key(model)
                if key is not None and (seen := verdicts.remembered(key)):
                    log.info("%s runs our fast forward (checked bit for bit against its modules on this machine "
                             "at %s; the verdict kept in %s)", type(model).__name__, seen, verdicts.FILE_NAME)
                    return fast
                started = time.monotonic()
                why = fast.check()
            except Exception as e:  # noqa: BLE001 -- any surprise in a model's layout: run its modules
                why = f"building or checking it failed ({type(e).__name__}: {e})"
            if why is None:
                log.info("%s runs our fast forward (checked bit for bit against its modules)", type(model).__name__)
                if key is not None:
                    verdicts.remember(key, time.monotonic() - started)
                return fast
        log.warning("%s runs its modules, not our fast forward (passes/fastpath.py), so its passes are slower: %s",
                    type(model).__name__, why)
        return None

    @staticmethod
    def unsupported(model: torch.nn.Module) -> str | None:
        """Why `model` cannot have a fast forward, or None."""
        name = type(model).__name__
        if name not in SUPPORTED:
            return f"the fast forward covers {', '.join(SUPPORTED)}, not {name}"
        if model.training:
            return "it is in training mode"
        weight = getattr(getattr(model, "lm_head", None), "weight", None)
        if weight is None:
            return "it has no lm_head weight"
        if weight.device.type != "cpu":
            return f"it is on the device {weight.device}; the fast forward runs on the CPU only"
        if weight.dtype != torch.float32:
            return f"its dtype is {weight.dtype}; the fast forward runs float32 only"
        if not isinstance(model.lm_head, speedups.PackedLinear):
            return ("its linear layers are not packed: the CPU speed-ups are off (SPECVIZ_NO_SPEEDUPS=1, "
                    "load(..., speedups=False) or speedups.remove) or did not apply (no oneDNN, or memory short)")
        config = model.config
        if getattr(config, "pretraining_tp", 1) != 1:
            return "pretraining_tp > 1 splits its products"
        if getattr(config, "_attn_implementation", None) not in ("sdpa", speedups.GQA_SDPA):
            return f"its attention is {getattr(config, '_attn_implementation', None)!r}, not SDPA"
        stacked = [getattr(layer.self_attn, n) for layer in model.model.layers for n in ("q_proj", "k_proj", "v_proj")]
        stacked += [getattr(layer.mlp, n) for layer in model.model.layers for n in ("gate_proj", "up_proj")]
        need = sum(m.weight.numel() * m.weight.element_size() for m in stacked)
        if need > speedups.MEMORY_SHARE * speedups._available_bytes():
            return f"its stacked copies ({need / 1e6:.0f} MB) would not fit comfortably in memory"
        return None

    def _identities(self) -> list[tuple]:
        """Where each weight lives and how often it was edited in place (inference tensors cannot be)."""
        return [(held.get(name) is w, w.data_ptr(), -1 if w.is_inference() else w._version)
                for held, name, w in self._params]

    def current(self) -> bool:
        """Whether the weights are still those it packed (an edit or a reload packs them again).
        Asked before every pass, so it reads only what is cheap (object identities, no data)."""
        return self._identities() == self._sources

    def check(self) -> str | None:
        """The kinds of pass a run makes, both ways, compared bit for bit (fastcheck.check): None
        when every pass has the same bits, else which pass differed and by how much."""
        return fastcheck.check(self)

    # -- the pass ----------------------------------------------------------------------------------
    @torch.inference_mode()
    def __call__(self, ids: torch.Tensor, cache, position_ids=None, mask=None, keep: int = 0):
        from transformers.masking_utils import create_causal_mask
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

        x = F.embedding(ids, self.embed.weight)
        n = x.shape[1]
        if position_ids is None:
            position_ids = (torch.arange(n, device=x.device) + cache.get_seq_length()).unsqueeze(0)
        causal = create_causal_mask(config=self.config, inputs_embeds=x, attention_mask=mask,
                                    past_key_values=cache, position_ids=position_ids)
        causal = _as_float(causal, x.dtype)
        cos, sin = self.rotary(x, position_ids)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        attend = ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation, None)
        pad = max(0, speedups.MIN_ROWS - n)  # oneDNN streams 3 rows faster than 1 (speedups.py)
        x = x[0]
        if pad:
            x = torch.cat([x, x.new_zeros(pad, x.shape[1])])
        for layer in self.layers:
            h = _rms(x, layer.norm1, layer.eps1)
            y = _LINEAR(h, layer.qkv, layer.qkv_bias, "none", [], "")[:n]
            d, nq, nk = layer.head_dim, layer.n_q, layer.n_k
            q = y[:, :nq].view(1, n, -1, d).transpose(1, 2)
            k = y[:, nq:nq + nk].view(1, n, -1, d).transpose(1, 2)
            v = y[:, nq + nk:].view(1, n, -1, d).transpose(1, 2)
            k, v = cache.update(_rotate(k, cos, sin), v, layer.attn.layer_idx)
            o, _ = attend(layer.attn, _rotate(q, cos, sin), k, v, causal, dropout=0.0, scaling=layer.scaling)
            o = o.reshape(n, -1)
            if pad:
                o = torch.cat([o, o.new_zeros(pad, o.shape[1])])
            x = x + _LINEAR(o, layer.o, layer.o_bias, "none", [], "")
            h = _rms(x, layer.norm2, layer.eps2)
            g = _LINEAR(h, layer.gate_up, layer.gate_up_bias, "none", [], "")
            x = x + _LINEAR(layer.act(g[:, : layer.n_gate]) * g[:, layer.n_gate:], layer.down, layer.down_bias,
                            "none", [], "")
        hidden = _rms(x[:n], self.norm, self.eps)
        rows = hidden[-keep:] if keep else hidden
        if rows.shape[0] < speedups.MIN_ROWS:
            rows = torch.cat([rows, rows.new_zeros(speedups.MIN_ROWS - rows.shape[0], rows.shape[1])])
        logits = _LINEAR(rows, self.lm, self.lm_bias, "none", [], "")[: (keep or n)]
        return logits.unsqueeze(0), hidden.unsqueeze(0)
