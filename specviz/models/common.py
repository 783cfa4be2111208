"""What every loading module shares: the two errors a load raises, where converted models and
timing caches live and how they are read and written, and how a progress message is said. Imports
nothing of specviz."""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Callable

log = logging.getLogger("specviz.models")


class TokenizerMismatch(ValueError):
    """The draft and the target do not map the same ids to the same tokens."""


class ModelLoadError(RuntimeError):
    """A model spec could not be loaded; the message says what to do."""


SPACE_STORAGE = Path("/data")  # a Hugging Face Space's persistent storage, where it has some


def cache_root() -> Path:
    """Where converted models live: $SPECVIZ_CACHE_DIR; else, on a Hugging Face Space (SPACE_ID set)
    with persistent storage mounted, /data/specviz, which outlives a restart; else ~/.cache/specviz."""
    chosen = os.environ.get("SPECVIZ_CACHE_DIR")
    if chosen:
        return Path(chosen).expanduser()
    if os.environ.get("SPACE_ID") and SPACE_STORAGE.is_dir() and os.access(SPACE_STORAGE, os.W_OK):
        return SPACE_STORAGE / "specviz"
    return Path("~/.cache/specviz").expanduser()


def say(progress: Callable[[str], None] | None, msg: str) -> None:
    (progress or log.info)(msg)


def read_cache_file(path: Path | None) -> dict:
    """A JSON cache file's entries; {} where it is missing, unreadable or not an object."""
    if path is None:
        return {}
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_cache_entry(path: Path, key: str, entry) -> None:
    """Add one entry (a dict, or anything with `to_dict`), through a temporary file so a reader
    never sees half a file."""
    data = read_cache_file(path)
    data[key] = entry.to_dict() if hasattr(entry, "to_dict") else entry
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass  # an unwritable cache only costs a re-measurement next time
