"""Arrow's memory pool, made to give freed memory back to the system.

Reading a parquet page or an Arrow batch allocates tens of MB that are freed a moment later. Arrow's
default pool (mimalloc in the wheels) keeps such memory for reuse, so the process's RSS climbs to
the sum of what was ever held at once; with jemalloc told to purge at once (or the system allocator
where jemalloc is not built in) RSS follows what is held now.
"""

from __future__ import annotations

import threading

_LOCK = threading.Lock()
_CHOSEN = False


def use_returning_pool() -> None:
    """Make Arrow allocate from a pool that returns freed memory (once per process; call before reading)."""
    global _CHOSEN
    with _LOCK:
        if _CHOSEN:
            return
        _CHOSEN = True
        import pyarrow as pa

        try:
            pool = pa.jemalloc_memory_pool()
            pa.jemalloc_set_decay_ms(0)
        except NotImplementedError:  # a pyarrow built without jemalloc
            pool = pa.system_memory_pool()
        pa.set_memory_pool(pool)


def release_freed() -> None:
    """Return memory Arrow has freed but its allocator still holds (after a row group, a file)."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
