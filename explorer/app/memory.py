"""The process's resident memory, and giving freed memory back to the system.

glibc keeps what a program frees in its heaps, one arena per thread that ever allocated in parallel
(up to 8 per core), so a server's resident memory settles well above what it still holds. `release`
hands free heap pages back (`malloc_trim`) after the app drops a model or runs; `limit_arenas` caps
the arenas for threads that start later, as MALLOC_ARENA_MAX does for a whole process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
from functools import cache

M_ARENA_MAX = -8  # glibc's mallopt parameter


def rss_bytes(pid: int | str = "self") -> int:
    """Resident memory of a process now (Linux /proc), 0 where it cannot be read."""
    try:
        with open(f"/proc/{pid}/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def release() -> None:
    """Collect garbage and return free heap memory to the system (glibc only; elsewhere a no-op)."""
    gc.collect()
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


def limit_arenas(count: int) -> bool:
    """Cap glibc's malloc arenas at `count` for threads that allocate from now on; False if not glibc."""
    libc = _glibc()
    return bool(libc is not None and libc.mallopt(M_ARENA_MAX, count))


@cache
def _glibc():
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None
