"""Draft head v2 ("specviz-draft-head/2"), trained the EAGLE-3 way, beside v1 (model.py).

v1 reads the final norm's output alone and has no attention. v2 reads three of the target's
features at the root, the last committed position t: the output of decoder layer `low`, that of
decoder layer `mid` (`aux_layers`), and the final norm's f_t. They are fused once:

    g = fuse([rms_low(low) ; rms_mid(mid) ; f_t])         3d → d

(the residual stream's raw norms run into the hundreds, so the two inner features are normalised,
with learned weights, before the fuse; f_t is already the final norm's output). Draft step
j = 1, 2, … reads h_{j-1} (h_0 = g) and the embedding of x_{t+j}, the token chosen before it:

    u_j = fc([h_{j-1} ; embed(x_{t+j})])                  2d → d
    a_j = u_j + attn(rms(u_j))    heads over steps 1..j of this path only (its own KV cache), RoPE over j
    h_j = a_j + mlp(rms(a_j))     SwiGLU d → intermediate → d
    logits_j = rms_out(h_j) · W_lm[subset]ᵀ

and step j+1 reads h_j. The logits are the target's frozen LM head restricted to the head's
vocabulary subset, as in v1 (q is 0 off the subset). Training runs the very same `step` U times
from the true features at t, each step fed the true next token (training-time test,
specviz/training/head2_train.py), so the head learns to read its own h, not the target's.
The embedding and LM head are the target's and are not stored; the file holds only the head.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

FORMAT2 = "specviz-draft-head/2"


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm in float32, as v1's (model.py reads this module to load v2 files, so it is not imported)."""
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight


@dataclass
class HeadConfig2:
    hidden: int  # the target's hidden size d
    target_vocab: int  # the target vocabulary the subset ids index into
    aux_layers: list[int] = field(default_factory=lambda: [2, 15])  # (low, mid): decoder layers read at the root
    intermediate: int = 1536
    heads: int = 4
    head_dim: int = 64
    rope_theta: float = 10000.0
    eps: float = 1e-5
    target_name: str = ""

    def __post_init__(self):
        self.aux_layers = [int(i) for i in self.aux_layers]
        if len(self.aux_layers) != 2:
            raise ValueError(f"a v2 head reads two decoder layers (low, mid), not {self.aux_layers}")


class DraftHead2(nn.Module):
    """The v2 network; `vocab_ids` are the target token ids its logits cover, most frequent first."""

    FORMAT = FORMAT2
    TRAIN = "specviz.training.head2_train"  # the script that writes it (named in load and target errors)

    def __init__(self, cfg: HeadConfig2, vocab_ids: torch.Tensor):
        super().__init__()
        d, inner = cfg.hidden, cfg.heads * cfg.head_dim
        if cfg.head_dim % 2:
            raise ValueError(f"RoPE needs an even head_dim, not {cfg.head_dim}")
        self.cfg = cfg
        self.low_norm = nn.Parameter(torch.ones(d))
        self.mid_norm = nn.Parameter(torch.ones(d))
        self.fuse = nn.Linear(3 * d, d, bias=False)
        self.fc = nn.Linear(2 * d, d, bias=False)
        self.attn_norm = nn.Parameter(torch.ones(d))
        self.qkv = nn.Linear(d, 3 * inner, bias=False)
        self.o = nn.Linear(inner, d, bias=False)
        self.mlp_norm = nn.Parameter(torch.ones(d))
        self.gate = nn.Linear(d, cfg.intermediate, bias=False)
        self.up = nn.Linear(d, cfg.intermediate, bias=False)
        self.down = nn.Linear(cfg.intermediate, d, bias=False)
        self.out_norm = nn.Parameter(torch.ones(d))
        self.register_buffer("vocab_ids", vocab_ids.to(torch.long).clone())

    @property
    def hidden_layers(self) -> tuple[int, ...]:
        """The decoder layers whose outputs it reads beside the final norm's, in the order it reads them."""
        return tuple(self.cfg.aux_layers)

    @property
    def feature_width(self) -> int:
        """Width of one row of root features: [low ; mid ; f_t]."""
        return 3 * self.cfg.hidden

    def root(self, feats: torch.Tensor) -> torch.Tensor:
        """g [..., d] from root features [..., 3d] = [layer low's output ; layer mid's ; final norm's]."""
        d, eps = self.cfg.hidden, self.cfg.eps
        low, mid, f = feats[..., :d], feats[..., d: 2 * d], feats[..., 2 * d:]
        return self.fuse(torch.cat([_rms(low, self.low_norm, eps), _rms(mid, self.mid_norm, eps), f], dim=-1))

    def empty_cache(self, rows: int, like: torch.Tensor) -> torch.Tensor:
        """Keys (or values) of no drafted position yet: [rows, heads, 0, head_dim]."""
        return like.new_zeros(rows, self.cfg.heads, 0, self.cfg.head_dim)

    def step(self, h: torch.Tensor, embeds: torch.Tensor, keys: torch.Tensor, values: torch.Tensor):
        """One draft step for a batch of paths of equal length j-1.

        h, embeds: [B, d] (h_{j-1} and the embedding of the token it continues with);
        keys, values: [B, heads, j-1, head_dim], the path's drafted positions so far.
        Returns (h_j, rms_out(h_j) for the LM head, keys and values with step j's appended)."""
        cfg = self.cfg
        B, H, D = h.shape[0], cfg.heads, cfg.head_dim
        u = self.fc(torch.cat([h, embeds], dim=-1))
        q, k, v = self.qkv(_rms(u, self.attn_norm, cfg.eps)).view(B, 3, H, D).unbind(1)
        pos = keys.shape[2]  # step j sits at RoPE position j-1
        keys = torch.cat([keys, self._rope(k, pos)[:, :, None]], dim=2)
        values = torch.cat([values, v[:, :, None]], dim=2)
        # the newest position attends to every drafted position of its own path, itself included
        a = F.scaled_dot_product_attention(self._rope(q, pos)[:, :, None], keys, values)
        u = u + self.o(a.reshape(B, H * D))
        m = _rms(u, self.mlp_norm, cfg.eps)
        h = u + self.down(F.silu(self.gate(m)) * self.up(m))
        return h, _rms(h, self.out_norm, cfg.eps), keys, values

    def _rope(self, x: torch.Tensor, pos: int) -> torch.Tensor:
        """x [B, heads, head_dim] rotated to position `pos` (rotate-half RoPE, angles in float32)."""
        half = self.cfg.head_dim // 2
        freq = self.cfg.rope_theta ** (-torch.arange(half, device=x.device, dtype=torch.float32) / half)
        angle = pos * freq
        cos, sin = torch.cat([angle.cos()] * 2), torch.cat([angle.sin()] * 2)
        x32 = x.float()
        turned = torch.cat([-x32[..., half:], x32[..., :half]], dim=-1)
        return (x32 * cos + turned * sin).to(x.dtype)


def config_for2(target_model: nn.Module, **sizes) -> HeadConfig2:
    """A v2 head as wide as the target, reading decoder layers 2 and num_layers // 2 (sizes may be overridden)."""
    c = target_model.config
    layers = int(c.num_hidden_layers)
    base = dict(hidden=c.hidden_size, target_vocab=target_model.get_output_embeddings().weight.shape[0],
                aux_layers=[min(2, layers - 1), layers // 2], eps=float(getattr(c, "rms_norm_eps", 1e-5)))
    base.update(sizes)
    return HeadConfig2(**base)
