"""One ``toolbias-stats run`` per design folder: a lock file that names its holder. See :func:`folder_lock`.

Two runs on one folder would both send the requests still missing and both append their answers, so the
responses file would get a ``custom_id`` twice (issue 37). The lock is an advisory ``flock`` on
``.toolbias-run.lock`` inside the folder: the kernel releases it when its process ends in any way (a kill
included), so a lock left by a process that is gone never blocks; the file records the holder (process id, host,
start time) for the message a second run prints, and a record found under a released lock is reported as stale.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

from .._output import output_failure

try:  # POSIX; elsewhere an exclusive create stands in (a lock left by a killed run is then removed by hand)
    import fcntl
except ImportError:  # pragma: no cover - not on the platforms the suite runs on
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_NAME", "RunLockError", "folder_lock"]

#: The lock file a run keeps in its design folder while it runs (removed at the end).
LOCK_NAME = ".toolbias-run.lock"

#: The refusal of a second run (``folder``, ``holder``, ``lock``).
HELD_MESSAGE = ("{folder} is in use by another run ({holder}; lock file {lock}): two runs on one folder would "
                "send and record the same requests twice. Wait until it ends (or stop it) and run again.")
#: The note on a lock whose process is gone (``holder``).
STALE_NOTE = ("removed a stale lock left by {holder}: that process is gone (killed or crashed); its answers are "
              "kept and the rest is sent now")


class RunLockError(ValueError):
    """A design folder held by another run."""


def _holder(raw: bytes) -> str:
    """``process 123 on host h, started 2026-...`` from a lock file's record (or what is known of it)."""
    try:
        rec = json.loads(raw.decode("utf-8"))
        return f"process {int(rec['pid'])} on host {rec['host']}, started {rec['started']}"
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return "a process that left no readable record"


def _record() -> bytes:
    started = _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    return json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": started}).encode("utf-8")


def _read_fd(fd: int) -> bytes:
    return os.pread(fd, 4096, 0)


def _acquire_flock(path: Path, folder: Path) -> tuple[int, bytes]:
    """``(fd, previous record)`` of the locked file; refuses when another process holds it."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(_read_fd(fd))
            os.close(fd)
            raise RunLockError(HELD_MESSAGE.format(folder=folder, holder=holder, lock=path)) from None
        try:   # the previous holder may have removed the file between our open and our lock: lock the new one
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd, _read_fd(fd)
        os.close(fd)


def _acquire_exclusive(path: Path, folder: Path) -> tuple[int, bytes]:  # pragma: no cover - non-POSIX
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise RunLockError(HELD_MESSAGE.format(folder=folder, holder=_holder(path.read_bytes()), lock=path)
                           + f" If no run is going on, delete {path}.") from None
    return fd, b""


@contextlib.contextmanager
def folder_lock(folder) -> Iterator[str | None]:
    """Hold the run lock of ``folder`` for the ``with`` block; yields a note when a stale lock was taken over.

    Parameters
    ----------
    folder : path-like
        The design folder.

    Yields
    ------
    str or None
        :data:`STALE_NOTE` filled in when the lock file held the record of a process that is gone.

    Raises
    ------
    RunLockError
        Another process holds the lock (the message names it: process id, host, start time).
    toolbias_stats._output.OutputError
        The lock file cannot be written (a read-only folder, a full disk), naming its path.

    Examples
    --------
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> with folder_lock(d) as note:
    ...     (Path(d) / LOCK_NAME).exists(), note
    (True, None)
    >>> (Path(d) / LOCK_NAME).exists()
    False
    """
    folder = Path(folder)
    path = folder / LOCK_NAME
    try:
        fd, previous = (_acquire_flock if fcntl is not None else _acquire_exclusive)(path, folder)
    except OSError as exc:
        raise output_failure("the run lock", path, exc) from None
    note = STALE_NOTE.format(holder=_holder(previous)) if previous.strip() else None
    try:
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, _record(), 0)
        except OSError as exc:
            raise output_failure("the run lock", path, exc) from None
        yield note
    finally:
        with contextlib.suppress(OSError):   # removed while still locked: a waiting run then locks a new file
            os.unlink(path)
        os.close(fd)
