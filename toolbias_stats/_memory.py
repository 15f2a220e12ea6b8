"""Running under a memory cap (issue 37): the address-space limit of the process, the allocator that respects it,
and the one message when memory runs out.

A process started under ``ulimit -v`` / ``prlimit --as`` counts every *reserved* byte against its limit. pyarrow's
default allocator (mimalloc, used by pandas 3 for its text columns) reserves a 1 GiB arena on first use: under a
2 GB cap that left DuckDB too little to start and it died with SIGSEGV on a 168-row study. Under a cap we switch
pyarrow to the system allocator (``ARROW_DEFAULT_MEMORY_POOL=system``, set before pyarrow loads), which reserves
nothing ahead (measured: 1.41 GB -> 0.37 GB of address space after reading a CSV with pandas).
"""

from __future__ import annotations

import os
import sys

__all__ = ["address_space_limit", "adapt_to_address_limit", "out_of_memory_message", "check_headroom",
           "MemoryCapError", "READ_FACTOR"]


def address_space_limit() -> int | None:
    """The soft address-space limit of this process in bytes (``RLIMIT_AS``), or None when there is none.

    Examples
    --------
    >>> limit = address_space_limit()
    >>> limit is None or limit > 0
    True
    """
    try:
        import resource
    except ImportError:   # not a POSIX system
        return None
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft in (resource.RLIM_INFINITY, -1) else int(soft)


def adapt_to_address_limit() -> bool:
    """Under an address-space limit, make pyarrow allocate with the system allocator; whether it did.

    The environment variable is read by pyarrow when it loads; when pyarrow is loaded already its default pool is
    replaced. A ``ARROW_DEFAULT_MEMORY_POOL`` set by the user is kept.

    Examples
    --------
    >>> adapt_to_address_limit() in (True, False)
    True
    """
    if address_space_limit() is None or "ARROW_DEFAULT_MEMORY_POOL" in os.environ:
        return False
    os.environ["ARROW_DEFAULT_MEMORY_POOL"] = "system"
    if "pyarrow" in sys.modules:
        import pyarrow as pa

        pa.set_memory_pool(pa.system_memory_pool())
    return True


def out_of_memory_message(detail: str = "") -> str:
    """The one message when memory ran out: the limit in force and what to change.

    Examples
    --------
    >>> "TOOLBIAS_DUCKDB_MEMORY_LIMIT" in out_of_memory_message()
    True
    """
    limit = address_space_limit()
    cap = (f"this process may use at most {limit / 1e9:.1f} GB of address space (ulimit -v / prlimit --as); "
           "raise that limit, or " if limit is not None else "")
    said = f" (said: {detail})" if detail else ""
    return (f"out of memory{said}: {cap}lower what one run needs: --n-resamples with fewer replicates or 0, the "
            "DuckDB engine (--engine duckdb, which spills to its temporary folder; its own limit is the environment "
            "variable TOOLBIAS_DUCKDB_MEMORY_LIMIT, e.g. 4GB), or a smaller study")


#: Address space pandas needs to read a CSV or JSONL file, per byte of the file (measured: a 39 MB CSV of 2M rows
#: raised the peak address space by 563 MB, 14.5x; pandas' parser threads die with SIGSEGV when an allocation fails,
#: so under a cap the room is checked before reading).
READ_FACTOR = 16


class MemoryCapError(ValueError):
    """What a step needs does not fit under the process's address-space limit (the message names the limit)."""


def _address_space_used() -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def check_headroom(need: int, what: str) -> None:
    """Under an address-space limit, refuse a step that needs ``need`` bytes more than are left (one message
    naming the limit and what to change) instead of letting a library crash; no-op without a limit.

    Examples
    --------
    >>> check_headroom(1, "reading log.csv")   # one byte always fits (or there is no limit)
    """
    limit = address_space_limit()
    used = _address_space_used() if limit is not None else None
    if limit is None or used is None or used + need <= limit:
        return
    raise MemoryCapError(f"{what} needs about {need / 1e9:.2f} GB more address space and "
                         f"{max(limit - used, 0) / 1e9:.2f} GB are left under the limit of {limit / 1e9:.1f} GB "
                         "(ulimit -v / prlimit --as): raise that limit, or use --engine duckdb (it reads the file in "
                         "place and spills to its temporary folder)")
