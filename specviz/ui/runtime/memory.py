"""Keep a busy server's memory near what it uses: glibc's allocator, told to give memory back.

With many request threads, glibc keeps one heap (arena) per thread it has seen, and after a large
tensor is freed it raises its mmap threshold, so later large tensors (a shared verify pass's
activations and logits) come from those heaps and stay resident when freed. Thirty sessions
stepping together then left the process gigabytes above what it held (docs/bench/2026-12-01.md). Here:
large blocks always get their own mapping (returned to the system when freed), at most a few
arenas, and `give_back` trims what the heaps hold free. Elsewhere than glibc, both do nothing.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

M_MMAP_THRESHOLD, M_ARENA_MAX = -3, -8  # mallopt parameters (malloc.h)
MMAP_THRESHOLD = 1 << 20  # blocks of 1 MiB and more are mapped apart and unmapped when freed
ARENA_MAX = 4


def _libc():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


_LIBC = _libc()


def tune_allocator() -> bool:
    """Set the two mallopt parameters above; True where glibc took them."""
    if _LIBC is None:
        return False
    ok = bool(_LIBC.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(_LIBC.mallopt(M_ARENA_MAX, ARENA_MAX))
    if not ok:
        log.info("glibc refused the allocator settings; memory after busy periods may stay high")
    return ok


def give_back() -> None:
    """Return the free memory the heaps hold to the system (cheap when there is little)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
