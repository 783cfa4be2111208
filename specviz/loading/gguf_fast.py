"""Converting a Llama GGUF with a byte-level BPE vocabulary (the bundled SmolLM2) in a few seconds.

transformers' GGUF path takes 10–13 s for the bundled model on a 2-core CPU, a fresh Space's
every cold start: it parses the whole file three times through `gguf.GGUFReader` (every one of
its ~100 k vocabulary and merge strings as its own numpy slice), turns every field into Python
values again for each of the tokenizer, the config and the weights, and builds the model twice.
This module writes the same folder from one pass over the file:

- **metadata and tensor table**: read here with `struct` (the format is a header, key-value
  pairs and a table of tensors; llama.cpp's gguf-py docs describe it);
- **weights**: each tensor's blocks de-quantized by `gguf.quants.dequantize`, the function
  transformers calls, then q and k un-permuted as transformers' Llama processor does (llama.cpp
  interleaves their rotary halves), named as the model's state dict names them, saved with
  safetensors as `save_pretrained` saves them;
- **config**: a `LlamaConfig` from the `llama.*` keys, as transformers' GGUF config mapping reads them;
- **tokenizer**: transformers' own builder from a GGUF (`TokenizersBackend` with `gguf_file=`),
  which reads only the vocabulary and merges, with its fast reader.

It is the same folder, byte for byte where it matters: tests/loading/test_gguf_fast.py converts
the bundled GGUF both ways and compares every file (the weights tensor by tensor). Anything it
was not written for (another architecture or tokenizer, a tensor name or type it does not know)
raises `Unsupported`, and the caller converts through transformers instead.
"""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

MAGIC = b"GGUF"
VERSIONS = (2, 3)
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_NUMPY = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "?", 10: "<u8", 11: "<i8", 12: "<f8"}
_STRING, _ARRAY = 8, 9
DEFAULT_ALIGNMENT = 32

# GGUF tensor name (after "blk.N.") -> the Llama state dict's name (after "model.layers.N.")
_LAYER_NAMES = {
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
}
_TOP_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}


class Unsupported(Exception):
    """The file is not one this converter was written for (the message says what differs)."""


class _Cursor:
    """Reads little-endian GGUF values from a bytes-like object, front to back."""

    def __init__(self, buf):
        self.buf, self.at = buf, 0

    def scalar(self, fmt: str):
        (value,) = struct.unpack_from(fmt, self.buf, self.at)
        self.at += struct.calcsize(fmt)
        return value

    def string(self) -> str:
        n = self.scalar("<Q")
        text = bytes(self.buf[self.at:self.at + n]).decode("utf-8", errors="replace")
        self.at += n
        return text

    def value(self, kind: int):
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            item, count = self.scalar("<I"), self.scalar("<Q")
            if item == _STRING:
                return [self.string() for _ in range(count)]
            if item in _NUMPY:
                width = np.dtype(_NUMPY[item]).itemsize
                out = np.frombuffer(self.buf, dtype=_NUMPY[item], count=count, offset=self.at).tolist()
                self.at += width * count
                return out
            return [self.value(item) for _ in range(count)]  # arrays of arrays: none in the files we read
        if kind in _SCALARS:
            return self.scalar(_SCALARS[kind])
        raise Unsupported(f"a metadata value of unknown type {kind}")


def read_header(buf) -> tuple[dict, list[tuple[str, tuple[int, ...], int, int]], int]:
    """(metadata, tensors, data_start) of a GGUF held in `buf` (bytes or a memory map): tensors as
    (name, shape in torch order, ggml type, offset from data_start)."""
    cur = _Cursor(buf)
    if bytes(buf[:4]) != MAGIC:
        raise Unsupported("not a GGUF file (no GGUF magic)")
    cur.at = 4
    version = cur.scalar("<I")
    if version not in VERSIONS:
        raise Unsupported(f"GGUF version {version}")
    n_tensors, n_kv = cur.scalar("<Q"), cur.scalar("<Q")
    meta = {}
    for _ in range(n_kv):
        key = cur.string()
        meta[key] = cur.value(cur.scalar("<I"))
    tensors = []
    for _ in range(n_tensors):
        name = cur.string()
        dims = [cur.scalar("<Q") for _ in range(cur.scalar("<I"))]
        kind, offset = cur.scalar("<I"), cur.scalar("<Q")
        tensors.append((name, tuple(reversed(dims)), kind, offset))
    align = int(meta.get("general.alignment", DEFAULT_ALIGNMENT))
    start = -(-cur.at // align) * align
    return meta, tensors, start


def _unpermute(w, heads: int):
    """Undo llama.cpp's interleaving of each head's rotary halves in q or k (rows = heads × dim; numpy or torch)."""
    half = w.shape[0] // heads // 2
    return w.reshape(heads, half, 2, *w.shape[1:]).swapaxes(2, 1).reshape(w.shape)


def _dequantize(raw: np.ndarray, qtype, shape: tuple[int, ...]):
    """A float32 tensor of `shape` from the file's blocks. Q4_1 and Q8_0 (the bundled model's) are
    computed here on the whole tensor at once with torch, in the same float32 operations gguf's
    numpy code does (d · q + m, and d · q), so in the same bits; any other type goes to gguf."""
    import torch
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    if qtype == GGMLQuantizationType.Q4_1:  # per 32 weights: d, m (f16), 16 bytes of 4-bit q, low nibbles first
        blocks = torch.from_numpy(np.array(raw).reshape(-1, 20))
        d = blocks[:, 0:2].contiguous().view(torch.float16).float()
        m = blocks[:, 2:4].contiguous().view(torch.float16).float()
        packed = blocks[:, 4:]
        q = torch.cat([packed & 0x0F, packed >> 4], dim=1).float()
        return (d * q + m).reshape(shape)
    if qtype == GGMLQuantizationType.Q8_0:  # per 32 weights: d (f16), 32 signed bytes
        blocks = torch.from_numpy(np.array(raw).reshape(-1, 34))
        d = blocks[:, 0:2].contiguous().view(torch.float16).float()
        q = blocks[:, 2:].contiguous().view(torch.int8).float()
        return (q * d).reshape(shape)
    return torch.from_numpy(np.array(dequantize(raw, qtype).reshape(shape), dtype=np.float32))


def _hf_name(name: str) -> str:
    stem, _, kind = name.rpartition(".")
    if kind not in ("weight", "bias"):
        raise Unsupported(f"the tensor {name}")
    if stem.startswith("blk."):
        _, block, part = stem.split(".", 2)
        if part not in _LAYER_NAMES:
            raise Unsupported(f"the tensor {name}")
        return f"model.layers.{int(block)}.{_LAYER_NAMES[part]}.{kind}"
    if stem not in _TOP_NAMES:
        raise Unsupported(f"the tensor {name}")
    return f"{_TOP_NAMES[stem]}.{kind}"


# the llama.* keys transformers' GGUF mapping reads, and the config field each becomes
_CONFIG_KEYS = {
    "llama.context_length": "max_position_embeddings", "llama.block_count": "num_hidden_layers",
    "llama.feed_forward_length": "intermediate_size", "llama.embedding_length": "hidden_size",
    "llama.rope.dimension_count": "head_dim", "llama.rope.freq_base": "rope_theta",
    "llama.attention.head_count": "num_attention_heads", "llama.attention.head_count_kv": "num_key_value_heads",
    "llama.attention.layer_norm_rms_epsilon": "rms_norm_eps", "llama.vocab_size": "vocab_size",
}
_TOKEN_IDS = {"tokenizer.ggml.bos_token_id": "bos_token_id", "tokenizer.ggml.eos_token_id": "eos_token_id",
              "tokenizer.ggml.padding_token_id": "pad_token_id", "tokenizer.ggml.unknown_token_id": "unk_token_id"}


def _config(meta: dict, tied: bool):
    """The LlamaConfig transformers' GGUF mapping makes of these keys: the keys present, and
    LlamaConfig's defaults for the rest (checked against transformers' own in the tests)."""
    from transformers import LlamaConfig

    arch = meta.get("general.architecture")
    if arch != "llama" or "mistral" in str(meta.get("general.name", "")).lower():
        raise Unsupported(f"the architecture {arch!r}")
    if meta.get("tokenizer.ggml.model") != "gpt2":
        raise Unsupported(f"the tokenizer model {meta.get('tokenizer.ggml.model')!r}")
    other = sorted(k for k in meta if k.startswith("llama.") and k not in _CONFIG_KEYS)
    if other:  # a rope scaling, an expert count…: what transformers would read and this would not
        raise Unsupported(f"the keys {', '.join(other)}")
    if "llama.vocab_size" not in meta:
        raise Unsupported("no llama.vocab_size")
    fields = {field: meta[key] for key, field in (_CONFIG_KEYS | _TOKEN_IDS).items() if key in meta}
    theta = fields.pop("rope_theta", None)
    if theta is not None:
        fields["rope_parameters"] = {"rope_theta": theta, "rope_type": "default"}
    config = LlamaConfig(tie_word_embeddings=tied, dtype="float32", **fields)
    if "general.name" in meta:
        config._model_name_or_path = meta["general.name"]
    config.architectures = ["LlamaForCausalLM"]
    return config


def convert(path: Path, out: Path) -> None:
    """Write `out` (an existing empty folder) as transformers' conversion of the GGUF at `path`
    followed by `save_pretrained` would: config.json, generation_config.json, model.safetensors,
    tokenizer.json, tokenizer_config.json and chat_template.jinja. Raises Unsupported before
    writing anything when the file is not a Llama with a byte-level BPE vocabulary."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
    from safetensors.torch import save_file
    from transformers import GenerationConfig
    from transformers.tokenization_utils_tokenizers import TokenizersBackend

    try:
        data = np.memmap(path, dtype=np.uint8, mode="r")
        meta, tensors, start = read_header(data)
    except (ValueError, IndexError, struct.error) as e:  # empty, cut short, not GGUF: transformers says what
        raise Unsupported(f"a file it cannot read ({type(e).__name__}: {e})") from e
    names = {name for name, *_ in tensors}
    config = _config(meta, tied="output.weight" not in names)
    plan = []
    for name, shape, kind, offset in tensors:
        try:
            qtype = GGMLQuantizationType(kind)
        except ValueError as e:
            raise Unsupported(f"the tensor type {kind} of {name}") from e
        block, size = GGML_QUANT_SIZES[qtype]
        if shape[-1] % block:
            raise Unsupported(f"{name}'s rows ({shape[-1]}) are not whole blocks of {block}")
        row_bytes = shape[-1] // block * size
        plan.append((name, _hf_name(name), shape, qtype, start + offset, row_bytes))
    weights = {}
    for name, hf, shape, qtype, at, row_bytes in plan:
        rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
        raw = data[at:at + rows * row_bytes].reshape(*shape[:-1], row_bytes)
        w = _dequantize(raw, qtype, shape)
        if ".attn_q." in name:
            w = _unpermute(w, config.num_attention_heads)
        elif ".attn_k." in name:
            w = _unpermute(w, config.num_key_value_heads)
        weights[hf] = w.contiguous()
    if config.tie_word_embeddings:
        weights.pop("lm_head.weight", None)
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(out)
    GenerationConfig.from_model_config(config).save_pretrained(out)
    tok = TokenizersBackend.from_pretrained(str(path.parent), gguf_file=path.name)
    tok.save_pretrained(out)
