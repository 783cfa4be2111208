"""Our fast forward's bit-for-bit check (passes/fastpath.py, `FastForward.check`), kept once passed.

The check costs about a second of every start (its passes on the model). Its verdict depends only
on what chooses the CPU kernels and the code they run: the processor and its instruction-set
flags, the thread count, the oneDNN/MKL/OpenMP environment variables, torch and transformers, our
own fast forward and speed-ups, the model's configuration (and, to be safe, a sample of its
weights). Where `remember_checks()` was called (the app's start, app.py), a passed verdict is kept
in cache_root() / FILE_NAME under a key made of all of those, and a later start with the same key
trusts it; any difference is checked again. A failed check is never kept. Off by default, so a test
process, which may patch the code under check, always checks.
"""
from __future__ import annotations

import hashlib
import json
import logging
import threading
from datetime import datetime, timezone
from pathlib import Path

import torch

from specviz.models.common import cache_root, read_cache_file, write_cache_entry
from specviz.passes import speedups

log = logging.getLogger("specviz.passes.fastpath")  # said where the fast forward's decisions are

FILE_NAME = "fastpath_checks.json"
# the code a verdict vouches for: an edit to any of them is checked again
SOURCES = tuple(Path(__file__).with_name(name) for name in ("fastpath.py", "speedups.py", "verdicts.py"))
_REMEMBER = threading.Event()


def remember_checks(on: bool = True) -> None:
    """From now on, keep passed verdicts and trust kept ones with the same verdict_key (the app's start)."""
    (_REMEMBER.set if on else _REMEMBER.clear)()


def verdict_key(model: torch.nn.Module) -> str:
    """Everything the check's verdict depends on, as one string: readable where short, hashed where not."""
    import transformers  # the model is one of its classes, so it is imported already

    info = speedups.cpuinfo().splitlines()
    cpu = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), "")
    flags = next((line for line in info if line.startswith(("flags", "Features"))), "")
    config = model.config.to_dict()
    config.pop("_name_or_path", None)  # where it was loaded from does not change a bit
    digest = hashlib.sha256()
    for part in (flags, json.dumps(config, sort_keys=True, default=str),
                 json.dumps(speedups.kernel_env()),
                 *(path.read_text(encoding="utf-8") for path in SOURCES)):
        digest.update(part.encode())
    with torch.no_grad():
        for name, w in model.named_parameters():
            flat = w.detach().reshape(-1)
            digest.update(f"{name}{tuple(w.shape)}{w.dtype}".encode())
            digest.update(torch.cat([flat[:8], flat[-8:]]).float().numpy().tobytes())
    return (f"{type(model).__name__}|torch {torch.__version__}|transformers {transformers.__version__}|"
            f"{cpu}, {torch.get_num_threads()} threads|{digest.hexdigest()[:32]}")


def kept_key(model: torch.nn.Module) -> str | None:
    """The model's verdict_key where verdicts are kept; None where they are not, or where the key
    cannot be made (the model is then checked as usual, and its verdict not kept)."""
    if not _REMEMBER.is_set():
        return None
    try:
        return verdict_key(model)
    except Exception as e:  # noqa: BLE001 -- an unreadable config or weight only costs the check
        log.info("%s: its fast forward's check is not kept (%s: %s)", type(model).__name__, type(e).__name__, e)
        return None


def remembered(key: str) -> str | None:
    """When a check under `key` passed, if one is kept; else None."""
    entry = read_cache_file(cache_root() / FILE_NAME).get(key)
    return entry.get("checked_at") if isinstance(entry, dict) and entry.get("passed") is True else None


def remember(key: str, spent_s: float) -> None:
    write_cache_entry(cache_root() / FILE_NAME, key,
                      {"passed": True, "checked_at": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                       "check_s": round(spent_s, 3)})
