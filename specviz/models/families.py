"""Model families: where each keeps its decoder layers, and tiny random twins of each for tests.

The picker offers four families, and each has its own shape that decoding must respect:

- ``llama`` (SmolLM2): rotary positions, every layer attends to the whole context;
- ``qwen2`` (Qwen2.5): like Llama, with biases on q/k/v;
- ``gemma3`` (Gemma 3): sliding-window layers alternate with global ones;
- ``gpt2`` (GPT-2, DistilGPT-2): learned absolute positions and its layers in ``transformer.h``.

A twin is built from its family's own transformers config class, small enough to run in
milliseconds on a CPU. Spec form: ``tiny-random:family=gemma3,window=16,layers=4``; adding
``draft=1`` gives the twin's draft: the same target cut to its first layer (same vocabulary).

This module must stay free of UI libraries (gradio, plotly).
"""
from __future__ import annotations

import copy

import torch

from specviz.models.loaded import wrap

FAMILIES = ("llama", "qwen2", "gemma3", "gpt2")
# Substrings of a model spec that name its family; the picker's presets must all resolve here.
_FAMILY_NEEDLES = {"llama": ("bundled", "smollm", "llama"), "qwen2": ("qwen2",),
                   "gemma3": ("gemma-3", "gemma3"), "gpt2": ("gpt2",)}
GEMMA3_GLOBAL_EVERY = 3  # Gemma 3 has 5 sliding layers per global one; 2:1 keeps both kinds in 3 layers
_INT_KEYS = {"vocab": "vocab_size", "hidden": "hidden_size", "layers": "layers", "heads": "heads",
             "kv_heads": "kv_heads", "intermediate": "intermediate", "seed": "seed",
             "max_positions": "max_positions", "window": "window", "draft": "draft_layers"}
TINY_KEYS = ("family", *_INT_KEYS)


def family_of(spec: str) -> str | None:
    """The family a model spec belongs to, read off its name; None when it is not one we know."""
    spec = (spec or "").lower()
    if spec.startswith("tiny-random"):
        return parse_tiny(spec).get("family", "llama")
    return next((fam for fam, needles in _FAMILY_NEEDLES.items() if any(n in spec for n in needles)), None)


def tiny_config(family: str = "llama", vocab_size=32, hidden_size=64, layers=2, heads=4, kv_heads=2,
                intermediate=128, max_positions=512, window: int | None = None):
    """The family's own config class, sized small; no BOS/EOS/PAD, so a random EOS cannot stop runs."""
    import transformers as tf

    special = dict(bos_token_id=None, eos_token_id=None, pad_token_id=None, attn_implementation="sdpa")
    if window is not None and family != "gemma3":
        raise ValueError(f"a sliding window applies to the gemma3 family only, not {family!r}")
    if family in ("llama", "qwen2"):
        cls = tf.LlamaConfig if family == "llama" else tf.Qwen2Config
        return cls(vocab_size=vocab_size, hidden_size=hidden_size, num_hidden_layers=layers,
                   num_attention_heads=heads, num_key_value_heads=kv_heads, intermediate_size=intermediate,
                   max_position_embeddings=max_positions, **special)
    if family == "gemma3":
        kinds = ["full_attention" if (i + 1) % GEMMA3_GLOBAL_EVERY == 0 else "sliding_attention"
                 for i in range(layers)]
        head_dim = hidden_size // heads
        return tf.Gemma3TextConfig(vocab_size=vocab_size, hidden_size=hidden_size, num_hidden_layers=layers,
                                   num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=head_dim,
                                   query_pre_attn_scalar=head_dim, intermediate_size=intermediate,
                                   sliding_window=16 if window is None else window, layer_types=kinds,
                                   max_position_embeddings=max_positions, **special)
    if family == "gpt2":
        return tf.GPT2Config(vocab_size=vocab_size, n_embd=hidden_size, n_layer=layers, n_head=heads,
                             n_inner=intermediate, n_positions=max_positions, **special)
    raise ValueError(f"unknown model family {family!r}: choose one of {', '.join(FAMILIES)}")


_MODEL_CLASSES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                  "gemma3": "Gemma3ForCausalLM",  # text only: the Auto class would pick the multimodal one
                  "gpt2": "GPT2LMHeadModel"}


def tiny_random(vocab_size=32, hidden_size=64, layers=2, heads=4, kv_heads=2, intermediate=128, seed=0,
                max_positions=512, tokenizer=None, eos_ids=None, name="tiny-random", family="llama",
                window=None, draft_layers=None):
    """A small random model of `family` (fp32, CPU, eval); the same seed always gives the same weights.

    With `draft_layers`, the twin's draft instead: the same model cut to its first layers.
    """
    cfg = tiny_config(family, vocab_size, hidden_size, layers, heads, kv_heads, intermediate,
                      max_positions, window)
    torch.manual_seed(seed)
    import transformers as tf

    model = getattr(tf, _MODEL_CLASSES[family])(cfg).to(torch.float32)
    model.generation_config.eos_token_id = None
    loaded = wrap(model, tokenizer, name)
    loaded.eos_ids = set(int(e) for e in eos_ids) if eos_ids else set()
    if draft_layers is not None:
        loaded = derive_draft(loaded, layers=draft_layers)
        loaded.name = name
    return loaded


def derive_draft(target, noise: float = 0.0, layers: int | None = None, seed: int = 0):
    """A draft copied from the target: optionally only its first `layers` layers, plus weight noise.

    Noise is gaussian, scaled by `noise` times each parameter's own std, so `noise` sets how far
    the draft drifts from the target (and hence the acceptance rate) whatever the layer's scale.
    """
    model = copy.deepcopy(target.model)
    if layers is not None:
        _truncate_layers(model, layers)
    if noise:
        _add_noise(model, float(noise), seed)
    parts = [f"noise={noise:g}"] if noise else []
    if layers is not None:
        parts.append(f"layers={layers}")
    name = f"{target.name}~draft({','.join(parts)})" if parts else f"{target.name}~copy"
    draft = wrap(model, target.tokenizer, name)
    draft.eos_ids = set(target.eos_ids)
    return draft


@torch.no_grad()
def _add_noise(model, noise: float, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    for p in model.parameters():
        if p.numel() < 2:
            continue
        std = p.detach().float().std()
        z = torch.randn(p.shape, generator=gen) * (noise * std.item())
        p.add_(z.to(device=p.device, dtype=p.dtype))


def final_norm(model) -> torch.nn.Module:
    """The norm after the last decoder layer, whose output the LM head reads (Llama, Qwen2 and
    Gemma 3 call it `norm`, GPT-2 `ln_f`)."""
    base = getattr(model, "base_model", model)
    norm = getattr(base, "norm", None) or getattr(base, "ln_f", None)
    if norm is None:
        raise ValueError(f"{type(model).__name__} has no final norm named 'norm' or 'ln_f'")
    return norm


def decoder_layers(model) -> tuple[torch.nn.Module, str]:
    """(module, attribute) holding the decoder layers: `model.layers` in most families, `.h` in GPT-2."""
    base = getattr(model, "base_model", model)
    for attr in ("layers", "h"):
        if isinstance(getattr(base, attr, None), torch.nn.ModuleList):
            return base, attr
    raise ValueError(f"{type(model).__name__} keeps its decoder layers neither in .layers nor in .h, "
                     "so layers cannot be cut or skipped")


def _truncate_layers(model, layers: int) -> None:
    """Keep the first `layers` decoder layers and make the config agree."""
    base, attr = decoder_layers(model)
    stack = getattr(base, attr)
    if not 1 <= layers <= len(stack):
        raise ValueError(f"layers must be between 1 and {len(stack)}, got {layers}.")
    setattr(base, attr, torch.nn.ModuleList(list(stack)[:layers]))
    model.config.num_hidden_layers = layers
    if getattr(model.config, "layer_types", None) is not None:
        model.config.layer_types = list(model.config.layer_types)[:layers]


def parse_tiny(spec: str) -> dict:
    """'tiny-random:family=gpt2,layers=2' -> keyword arguments for tiny_random (ValueError if malformed)."""
    _, _, rest = spec.partition(":")
    if spec != "tiny-random" and not spec.startswith("tiny-random:"):
        raise ValueError(f"'{spec}' is not a tiny-random spec; write e.g. 'tiny-random:vocab=32,layers=2'.")
    kwargs: dict = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = (s.strip() for s in part.partition("="))
        if not eq or key not in TINY_KEYS:
            raise ValueError(f"'{part}' in '{spec}' is not understood; keys are {', '.join(TINY_KEYS)}.")
        if key == "family":
            if value not in FAMILIES:
                raise ValueError(f"'{part}' in '{spec}': the family must be one of {', '.join(FAMILIES)}.")
            kwargs["family"] = value
            continue
        try:
            kwargs[_INT_KEYS[key]] = int(value)
        except ValueError as e:
            raise ValueError(f"'{part}' in '{spec}' needs a whole number.") from e
    return kwargs
