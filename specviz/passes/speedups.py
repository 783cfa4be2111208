"""Lossless CPU speed-ups for a target's forward pass, applied once by `models.load`.

Both change how a pass is computed, never what it computes: greedy outputs stay those of
transformers' `generate` (tests/passes/test_speedups.py, tests/decoding/test_bundled_lossless.py). Why each one
exists, with the per-op profile behind it, is in docs/bench/2026-11-30.md ("v(n) on the CPU").

- ``packed-linear``: every `nn.Linear` runs oneDNN's matmul on a weight reordered once into its
  blocked layout, instead of MKL's sgemm on the plain one. MKL's small-M paths read the weights
  slowly (two rows cost twice one row); oneDNN's do not, so a pass over 2–8 tokens costs about
  what one token costs, as it should when the weights, not the arithmetic, are the bottleneck.
  Passes of one or two rows are padded to `MIN_ROWS`, where oneDNN streams fastest. On the CPUs
  measured a row's result did not depend on how many rows shared its pass, but oneDNN's summation
  order is the CPU's, so the tests hold a verify pass and a plain step to a tolerance and greedy
  tokens to equality, not to equal bits. The packed copy costs as much memory again as the linear weights. In bfloat16,
  torch already calls oneDNN but reorders the weight on every call; packing once (no padding)
  gives the same bits as stock without that.
- ``gqa-sdpa``: with a mask (any pass over more than one token) transformers copies each
  key/value head once per query head it serves before calling SDPA; this asks SDPA to share them
  (`enable_gqa`), which gives the same numbers without the copies.

Only CPU models get them: float32 ones, and bfloat16 ones where the CPU has bfloat16 arithmetic
(`native_bf16`), since that is where they were measured. Turn them off with the environment
variable SPECVIZ_NO_SPEEDUPS=1 or `load(..., speedups=False)`; `remove` undoes them.
"""
from __future__ import annotations

import functools
import logging
import os

import torch
import torch.nn.functional as F

log = logging.getLogger(__name__)

ENV_OFF = "SPECVIZ_NO_SPEEDUPS"
GQA_SDPA = "specviz_gqa_sdpa"  # the attention implementation name registered with transformers
MIN_ROWS = 3  # oneDNN's kernels stream the weights ~15–25 % slower for 1 or 2 rows than for 3–6
MEMORY_SHARE = 0.5  # pack only if the copies fit in this share of the memory still available


def wanted(flag: bool | None = None) -> bool:
    """Whether to apply the speed-ups: an explicit flag wins, else on unless SPECVIZ_NO_SPEEDUPS is set."""
    if flag is not None:
        return bool(flag)
    return os.environ.get(ENV_OFF, "").strip().lower() in ("", "0", "false", "no")


def apply(model: torch.nn.Module) -> list[str]:
    """Apply every speed-up that fits this model; returns the names of those applied."""
    first = next(model.parameters(), None)
    if first is None or not _packable(first):
        return []
    done = []
    if _pack_linears(model):
        done.append("packed-linear")
    if _use_gqa_sdpa(model):
        done.append("gqa-sdpa")
    if done:
        log.info("Speed-ups on %s: %s", type(model).__name__, ", ".join(done))
    return done


def follow(module: torch.nn.Module, model: torch.nn.Module) -> list[str]:
    """Give `module`, a small network that runs beside `model` (the draft head and its subset LM
    head), the packed linears `model` runs with; returns the names applied. Its linears are
    small-M products too, where MKL is slow and oneDNN's packed copy is not (docs/bench/2026-12-02.md,
    "the draft head's products packed")."""
    first = next(module.parameters(), None)
    if "packed-linear" not in applied(model) or first is None or not _packable(first):
        return []
    return ["packed-linear"] if _pack_linears(module) else []


def draft_dtype(model: torch.nn.Module, dtype: torch.dtype) -> torch.dtype:
    """The dtype for a small draft network beside `model` (which runs in `dtype`): bfloat16 where
    `model` runs float32 with the packed linears on a CPU with bfloat16 arithmetic, else `dtype`.
    A draft's numbers only choose what is proposed, never what is committed (verification is
    the target's), and its products are weight-bound, so halving the bytes pays
    (docs/bench/2026-12-03.md)."""
    if dtype == torch.float32 and "packed-linear" in applied(model) and native_bf16():
        return torch.bfloat16
    return dtype


def applied(model: torch.nn.Module) -> list[str]:
    """The names of the speed-ups a model currently runs with."""
    names = []
    if any(isinstance(m, PackedLinear) for m in model.modules()):
        names.append("packed-linear")
    if getattr(getattr(model, "config", None), "_attn_implementation", None) == GQA_SDPA:
        names.append("gqa-sdpa")
    return names


def remove(model: torch.nn.Module) -> None:
    """Undo `apply`: plain linears and transformers' own SDPA attention again."""
    for m in model.modules():
        if isinstance(m, PackedLinear):
            m.__class__ = torch.nn.Linear
            m.__dict__.pop("_packed", None)
            m.__dict__.pop("_source", None)
    if getattr(getattr(model, "config", None), "_attn_implementation", None) == GQA_SDPA:
        model.set_attn_implementation("sdpa")


class PackedLinear(torch.nn.Linear):
    """An `nn.Linear` that multiplies by a oneDNN-packed copy of its weight.

    `weight` stays the plain parameter, so code that reads it (the draft head, state dicts) is
    unaffected. A weight changed after packing (edited in place, replaced) is packed again on the
    next call; a weight that is not CPU float32, or a call that needs gradients, takes `F.linear`.
    Copies and pickles leave the packed copy behind and pack again when first used.
    """
    _packed: torch.Tensor | None = None
    _source: tuple | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight
        needs_grad = torch.is_grad_enabled() and (w.requires_grad or x.requires_grad)
        if needs_grad or not (_packable(w) and _packable(x)):
            return F.linear(x, w, self.bias)
        packed = self.packed()
        flat = x.reshape(-1, x.shape[-1])
        rows = flat.shape[0]
        if rows < MIN_ROWS and w.dtype == torch.float32:  # bf16: stock's own kernels, so stock's bits
            flat = torch.cat([flat, flat.new_zeros(MIN_ROWS - rows, flat.shape[1])])
        y = torch.ops.mkldnn._linear_pointwise(flat, packed, self.bias, "none", [], "")
        return y[:rows].reshape(*x.shape[:-1], y.shape[-1])

    def packed(self) -> torch.Tensor:
        """The packed weight, packed again first if the weight changed since (or none was kept)."""
        if self._source != _identity(self.weight):
            self._pack()
        return self._packed

    def _pack(self) -> None:
        with torch.no_grad():
            self._packed = torch.ops.mkldnn._reorder_linear_weight(self.weight.detach())
        self._source = _identity(self.weight)

    def __getstate__(self):
        state = self.__dict__.copy()  # oneDNN's packed tensor has no storage to copy or pickle
        state.pop("_packed", None)
        state.pop("_source", None)
        return state


def _packable(t: torch.Tensor) -> bool:
    """A tensor the packed path takes: on the CPU, float32, or bfloat16 where the CPU computes it."""
    if t.device.type != "cpu":
        return False
    return t.dtype == torch.float32 or (t.dtype == torch.bfloat16 and native_bf16())


def native_bf16() -> bool:
    """The CPU has bfloat16 arithmetic (x86 AVX-512 BF16 or AMX, Arm BF16) and oneDNN may use it;
    without the first bf16 is emulated, without the second oneDNN's bf16 kernels refuse to run."""
    global _NATIVE_BF16
    if _NATIVE_BF16 is None:
        _NATIVE_BF16 = bool(cpu_flags() & {"avx512_bf16", "amx_bf16", "bf16"}) and _onednn_bf16()
    return _NATIVE_BF16


def cpu_flags() -> set[str]:
    """The CPU's feature words from /proc/cpuinfo (x86 "flags", Arm "Features"); empty where there is none."""
    words: set[str] = set()
    for line in cpuinfo().splitlines():
        if line.startswith(("flags", "Features")):
            words.update(line.split(":", 1)[1].split())
    return words


def _onednn_bf16() -> bool:
    """oneDNN's bfloat16 kernels run here: the CPU has them and ONEDNN_MAX_CPU_ISA (read by oneDNN
    once a process) does not hold oneDNN below them, as ONEDNN_MAX_CPU_ISA=AVX2 does."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


_NATIVE_BF16: bool | None = None  # the CPU does not change while the process runs
# environment variables that choose the CPU kernels (instruction set, threads), and so their speed and last bits
KERNEL_ENV = ("ONEDNN_", "DNNL_", "MKL_", "OMP_", "ATEN_", "KMP_")


def kernel_env() -> list[tuple[str, str]]:
    """The KERNEL_ENV variables set now, sorted: a check or a timing made under others does not apply
    (ONEDNN_MAX_CPU_ISA=AVX2 runs AVX2 kernels on an AVX-512 CPU)."""
    return sorted((k, v) for k, v in os.environ.items() if k.startswith(KERNEL_ENV))


@functools.lru_cache(maxsize=1)
def cpuinfo() -> str:
    """/proc/cpuinfo, or "" where there is none; read once a process (the cost profile's key asks
    for the processor's name at every Step, and a busy server's file reads each give up the GIL)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _identity(w: torch.Tensor) -> tuple:
    """What must not change for a packed copy to stay the weight: storage, in-place edits, dtype."""
    version = -1 if w.is_inference() else w._version  # inference tensors cannot change in place
    return (w.data_ptr(), version, w.dtype, w.device)


def _pack_linears(model: torch.nn.Module) -> bool:
    """Swap every plain `nn.Linear` for a `PackedLinear`; False if oneDNN is missing or memory short."""
    layers = [m for m in model.modules() if type(m) is torch.nn.Linear]
    if not layers or not _onednn_works():
        return False
    need = sum(m.weight.numel() * m.weight.element_size() for m in layers)
    if need > MEMORY_SHARE * _available_bytes():
        log.info("Not packing linears: %.0f MB of copies would not fit comfortably in memory", need / 1e6)
        return False
    for m in layers:
        m.__class__ = PackedLinear
        m._pack()
    return True


def _onednn_works() -> bool:
    """oneDNN's packed linear exists in this torch build and matches F.linear on a small case."""
    try:
        if not torch.backends.mkldnn.is_available():
            return False
        w, x = torch.randn(8, 16), torch.randn(4, 16)  # float32 is enough: bf16 uses the same ops
        y = torch.ops.mkldnn._linear_pointwise(x, torch.ops.mkldnn._reorder_linear_weight(w), None,
                                               "none", [], "")
        return torch.allclose(y, F.linear(x, w), atol=1e-5)
    except (AttributeError, RuntimeError):
        return False


def _available_bytes() -> float:
    """Memory the kernel could hand out now (MemAvailable counts reclaimable page cache; free does not)."""
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return float("inf")  # unknown: the packing is the same size as the model already loaded


def _use_gqa_sdpa(model: torch.nn.Module) -> bool:
    """Switch a grouped-query SDPA model to the copy-free attention below."""
    config = getattr(model, "config", None)
    heads, kv_heads = getattr(config, "num_attention_heads", 0), getattr(config, "num_key_value_heads", 0)
    if getattr(config, "_attn_implementation", None) != "sdpa" or not kv_heads or heads == kv_heads:
        return False
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(GQA_SDPA, _gqa_sdpa)
    AttentionMaskInterface.register(GQA_SDPA, sdpa_mask)  # the masks SDPA gets are unchanged
    try:
        model.set_attn_implementation(GQA_SDPA)
    except (ValueError, AttributeError) as e:
        log.info("Keeping transformers' SDPA attention: %s", e)
        return False
    return model.config._attn_implementation == GQA_SDPA


def _gqa_sdpa(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None, **kwargs):
    """transformers' SDPA attention, except that a masked pass shares the key/value heads.

    Every other case (one query token, no mask, extras such as position bias) goes to
    transformers' own function, so only the copy is taken out.
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    groups = getattr(module, "num_key_value_groups", 1)
    plain = (groups == 1 or attention_mask is None or query.shape[2] == 1 or dropout
             or any(kwargs.get(k) is not None for k in ("position_bias", "softcap", "cache")))
    if plain:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, is_causal=is_causal, **kwargs)
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, scale=scaling,
                                         enable_gqa=True)
    return out.transpose(1, 2).contiguous(), None
