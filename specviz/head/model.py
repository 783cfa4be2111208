"""A small draft head that drafts for one target model, in the spirit of EAGLE and Medusa.

The head reads the target's last hidden state f_t (the output of its final norm, the vector its
LM head turns into logits) together with the embedding of the token x_{t+1} chosen from it, and
predicts the next hidden state f_{t+1}. Its logits are the target's own frozen LM head applied to
that prediction, restricted to a frequency-ranked subset of the vocabulary (FR-Spec style): the
head's q is 0 outside the subset, which the verify rules handle exactly (the residual covers it).

Network, one position at a time:
    z = fc([f_t ; embed(x_{t+1})])        2d → d
    z = z + mlp(norm(z))                  SwiGLU, `blocks` times
    f̂_{t+1} = norm_out(z)
To draft the token after next it reads its own f̂_{t+1}. It has no attention and so no cache:
f_t already summarises the context, and on this little data an attention layer measured worse
(held-out top-1 agreement 0.34 against 0.40, docs/HEAD.md).
The embedding and LM head are the target's and are not stored; the file holds only the head.

This is head v1 ("specviz-draft-head/1"). Head v2 (v2.py) also reads two decoder layers and has
one attention layer over its own drafted positions; `load_head` reads either, by the format its
file's metadata names, and `save_head` writes either.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from specviz.head.v2 import FORMAT2, DraftHead2, HeadConfig2
from specviz.loading.loader import ModelLoadError

FORMAT = "specviz-draft-head/1"
DEFAULT_PATH = Path(__file__).resolve().parents[2] / "assets" / "head" / "head.safetensors"
RETRAIN = "rebuild it with `python -m specviz.training.head_train`"


@dataclass
class HeadConfig:
    hidden: int  # the target's hidden size d
    intermediate: int
    target_vocab: int  # the target vocabulary the subset ids index into
    blocks: int = 1
    eps: float = 1e-5
    target_name: str = ""


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight


class _Block(nn.Module):
    """Pre-norm SwiGLU MLP with a residual connection."""

    def __init__(self, d: int, inner: int):
        super().__init__()
        self.norm = nn.Parameter(torch.ones(d))
        self.gate = nn.Linear(d, inner, bias=False)
        self.up = nn.Linear(d, inner, bias=False)
        self.down = nn.Linear(inner, d, bias=False)

    def forward(self, z: torch.Tensor, eps: float) -> torch.Tensor:
        m = _rms(z, self.norm, eps)
        return z + self.down(F.silu(self.gate(m)) * self.up(m))


class DraftHead(nn.Module):
    """The head network; `vocab_ids` are the target token ids its logits cover, most frequent first."""

    FORMAT = FORMAT
    TRAIN = "specviz.training.head_train"  # the script that writes it (named in load and target errors)

    def __init__(self, cfg: HeadConfig, vocab_ids: torch.Tensor):
        super().__init__()
        self.cfg = cfg
        self.fc = nn.Linear(2 * cfg.hidden, cfg.hidden, bias=False)
        self.blocks = nn.ModuleList(_Block(cfg.hidden, cfg.intermediate) for _ in range(cfg.blocks))
        self.out_norm = nn.Parameter(torch.ones(cfg.hidden))
        self.register_buffer("vocab_ids", vocab_ids.to(torch.long).clone())

    def forward(self, feats: torch.Tensor, embeds: torch.Tensor) -> torch.Tensor:
        """Predicted next hidden states [..., d] from hidden states and next-token embeddings [..., d]."""
        z = self.fc(torch.cat([feats, embeds], dim=-1))
        for block in self.blocks:
            z = block(z, self.cfg.eps)
        return _rms(z, self.out_norm, self.cfg.eps)


# -- the target's side ---------------------------------------------------------------------------
def target_parts(model: nn.Module) -> tuple[nn.Module, nn.Module, nn.Module]:
    """The target's (embedding, final norm, LM head); a clear error when it lacks them."""
    base = getattr(model, "base_model", None)
    norm = getattr(base, "norm", None)
    embed, head = model.get_input_embeddings(), model.get_output_embeddings()
    if norm is None or embed is None or head is None:
        raise ValueError(f"a draft head needs a decoder with embeddings, a final norm and an LM head; "
                         f"{type(model).__name__} does not expose them")
    return embed, norm, head


def config_for(target_model: nn.Module, **sizes) -> HeadConfig:
    """A head as wide as the target, with the target's MLP width (sizes may be overridden)."""
    c = target_model.config
    base = dict(hidden=c.hidden_size, intermediate=c.intermediate_size,
                target_vocab=target_model.get_output_embeddings().weight.shape[0],
                eps=float(getattr(c, "rms_norm_eps", 1e-5)))
    base.update(sizes)
    return HeadConfig(**base)


def check_target(head: nn.Module, target_model: nn.Module, path) -> None:
    """Refuse a target the head (v1 or v2) was not trained for: hidden size and vocabulary must
    match, and a v2 head's decoder layers must exist in it."""
    cfg = head.cfg
    d = target_model.config.hidden_size
    vocab = target_model.get_output_embeddings().weight.shape[0]
    trained = f" ({cfg.target_name})" if cfg.target_name else ""
    retrain = f"use it with that target only, or train one for this target (`python -m {head.TRAIN}`)"
    if (d, vocab) != (cfg.hidden, cfg.target_vocab) or int(head.vocab_ids.max()) >= vocab:
        raise ValueError(f"the draft head {path} was trained for a target with hidden size {cfg.hidden} and "
                         f"vocabulary {cfg.target_vocab}{trained}, but this target has {d} and {vocab}: {retrain}")
    layers, read = int(getattr(target_model.config, "num_hidden_layers", 0)), getattr(head, "hidden_layers", ())
    if any(not 0 <= i < layers for i in read):
        raise ValueError(f"the draft head {path} reads decoder layers {list(read)}{trained}, "
                         f"but this target has {layers} layers: {retrain}")


# -- files ---------------------------------------------------------------------------------------
def save_head(head: nn.Module, path, dtype: torch.dtype = torch.bfloat16) -> None:
    """Write a head (v1 or v2) as safetensors; weights in `dtype` (bf16 halves the file), its
    format and config in the metadata."""
    from safetensors.torch import save_file

    tensors = {k: (v if k == "vocab_ids" else v.to(dtype)).contiguous() for k, v in head.state_dict().items()}
    meta = {"format": head.FORMAT, "config": json.dumps(asdict(head.cfg))}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path), metadata=meta)


def _kinds() -> dict[str, tuple[type, type]]:
    """Each file format with (its config class, its network class): v1 here, v2 in v2.py."""
    return {FORMAT: (HeadConfig, DraftHead), FORMAT2: (HeadConfig2, DraftHead2)}


def load_head(path=None, dtype: torch.dtype = torch.float32, device=None) -> nn.Module:
    """Read a head written by `save_head`, v1 or v2 as its metadata says; any problem is a
    ModelLoadError naming the file."""
    path = Path(path) if path is not None else DEFAULT_PATH
    if not path.is_file():
        raise ModelLoadError(f"no draft head at {path}: {RETRAIN}")
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as e:  # noqa: BLE001 -- a truncated or foreign file: say which and what to do
        raise ModelLoadError(f"the draft head {path} is not a readable safetensors file ({e}); {RETRAIN}") from e
    kinds = _kinds()
    if meta.get("format") not in kinds or "config" not in meta:
        raise ModelLoadError(f"{path} is not a specviz draft head (format {meta.get('format')!r}); {RETRAIN}")
    config_class, network = kinds[meta["format"]]
    try:
        cfg = config_class(**json.loads(meta["config"]))
        head = network(cfg, tensors["vocab_ids"])
        head.load_state_dict({k: v.to(torch.float32) if k != "vocab_ids" else v for k, v in tensors.items()})
    except (KeyError, TypeError, ValueError, RuntimeError) as e:
        raise ModelLoadError(f"the draft head {path} does not match its own config "
                             f"(wrong or missing tensor shapes: {str(e).splitlines()[0]}); "
                             f"rebuild it with `python -m {network.TRAIN}`") from e
    return head.to(device=device, dtype=dtype).eval()

