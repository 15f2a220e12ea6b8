"""Safe outputs: never overwrite an input, write atomically, escape untrusted text for terminals and spreadsheets.

Every command and API function that writes a file goes through this module:

- :func:`check_output` refuses an output path that resolves (symlinks and hard links included) to one of the
  command's inputs (for a study: the manifest and every file it names), a folder where a file is expected, a file
  where a folder is expected, or a read-only file;
- :func:`atomic_path` / :func:`write_text` / :func:`atomic_folder` write next to the target under a unique temporary
  name and rename at the end, so that a failure (full disk, permission, Ctrl-C) leaves neither a partial file nor a
  temporary one, and two concurrent writers never share a temporary name;
- :func:`term_safe` escapes control characters (terminal escape sequences, bidi overrides) in text printed to a
  terminal; :func:`spreadsheet_safe` neutralises CSV cells that a spreadsheet would run as a formula.

Every refusal is an :class:`OutputError` (a ``ValueError``) naming the option and the path; the CLI turns it into
one line on stderr and exit code 2.

Examples
--------
>>> term_safe("model\\x1b[2J")
'model\\\\x1b[2J'
>>> safe_cell("=HYPERLINK(\\"http://x\\")")
'\\'=HYPERLINK("http://x")'
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import stat
import tempfile
import threading
import tomllib
from pathlib import Path

import pandas as pd

__all__ = ["OutputError", "check_output", "study_inputs", "atomic_path", "atomic_folder", "write_text",
           "write_bytes", "output_failure", "cleanup_on_signals", "term_safe", "safe_cell", "spreadsheet_safe",
           "FORMULA_PREFIXES"]

#: First characters that make a spreadsheet read a CSV cell as a formula (OWASP's list: = + - @ tab CR).
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")

#: Manifest keys whose value is a path (also when the file does not exist yet); any other string value of the
#: manifest that names an existing file is an input too.
PATH_KEYS = frozenset({"path", "catalog", "queries", "api_meta", "cluster_names", "responses", "clusters_file",
                       "subsets", "features", "tool_dates", "predictions", "items", "truth", "annotations"})

#: Largest manifest read to list its inputs (a manifest is a few KiB; this guards against /dev/zero and the like).
_MAX_MANIFEST_BYTES = 16 * 1024 * 1024


class OutputError(ValueError):
    """An output path that cannot or must not be written (an input, a folder, read-only, disk full, ...)."""


# -- what may not be overwritten --------------------------------------------------------------------------------
def study_inputs(manifest) -> list[tuple[Path, str]]:
    """The manifest and every file it names, as ``(path, label)`` pairs (paths relative to the manifest's folder).

    Reads the TOML itself (no validation: an invalid manifest still lists what it names; one that cannot be
    parsed lists only itself and fails later where it is read).

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> [label for _, label in study_inputs(tbs.datasets.path("biasbusters/study.toml"))][:2]
    ['the manifest', "the manifest's catalog"]
    """
    path = Path(manifest)
    out = [(path, "the manifest")]
    try:
        if not path.is_file() or path.stat().st_size > _MAX_MANIFEST_BYTES:
            return out
        doc = tomllib.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return out
    base = path.parent
    seen = set()

    def walk(node, where):
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{where}.{k}" if where else str(k))
        elif isinstance(node, list):
            for i, v in enumerate(node, start=1):
                walk(v, f"{where}[{i}]")
        elif isinstance(node, str) and node.strip() not in ("", ".", ".."):
            key = where.rsplit(".", 1)[-1].split("[", 1)[0]
            try:
                p = Path(node) if Path(node).is_absolute() else base / node
                named = key in PATH_KEYS or p.is_file()
            except (OSError, ValueError):
                return
            if named and p not in seen:
                seen.add(p)
                out.append((p, f"the manifest's {where}"))
            if key in PATH_KEYS and any(c in node for c in "*?[") and not Path(node).is_absolute():
                try:   # a glob of partitioned files: every file it matches now is an input
                    matches = sorted(base.glob(node))[:100_000]
                except (OSError, ValueError, NotImplementedError):
                    matches = []
                for m in matches:
                    if m not in seen:
                        seen.add(m)
                        out.append((m, f"the manifest's {where} (matched by {node})"))

    walk(doc, "")
    return out


def _identity(p: Path):
    """(resolved path, (device, inode) or None): two names of one file compare equal by either."""
    try:
        st = p.stat()   # follows symbolic links
        ino = (st.st_dev, st.st_ino)
    except (OSError, ValueError):
        ino = None
    try:
        resolved = p.resolve()
    except (OSError, RuntimeError):
        resolved = p.absolute()
    return resolved, ino


def _inside(child: Path, parent: Path) -> bool:
    return child != parent and parent in child.parents


def check_output(out, inputs=(), *, option: str = "--out", kind: str = "file") -> Path:
    """Refuse an output path that must not be written; returns it as a Path.

    Parameters
    ----------
    out : str or Path
        The output path.
    inputs : iterable of path or (path, label)
        The command's inputs (see :func:`study_inputs`). A file input may not be the output (by its resolved
        path or by device and inode: symbolic and hard links count); an input folder may not contain it; with
        ``kind="folder"`` the output folder may not contain an input.
    option : str
        How the user named the output, for messages (``"--out"``, ``"--report"``, ``"path"``).
    kind : {"file", "folder"}
        What will be written.

    Raises
    ------
    OutputError
        Naming ``option``, the path and why.

    Examples
    --------
    >>> check_output("report.html", [("log.csv", "the log")]).name
    'report.html'
    """
    out = Path(out)
    rout, iout = _identity(out)
    for item in inputs:
        p, label = item if isinstance(item, tuple) else (item, "an input")
        p = Path(p)
        rin, iin = _identity(p)
        same = rin == rout or (iin is not None and iin == iout)
        if same:
            raise OutputError(f"{option} {out} is an input of this command ({label}: {p}); refusing to overwrite "
                              "it. Choose another output path.")
        if _inside(rout, rin) and rin.is_dir():
            raise OutputError(f"{option} {out} lies inside an input folder ({label}: {p}); refusing to write "
                              "there. Choose another output path.")
        if kind == "folder" and _inside(rin, rout):
            raise OutputError(f"{option} {out} contains an input of this command ({label}: {p}); refusing to "
                              "write the folder there. Choose another output folder.")
    try:
        st = out.stat() if out.exists() else None
    except OSError:
        st = None
    if st is not None:
        if kind == "file" and stat.S_ISDIR(st.st_mode):
            raise OutputError(f"{option} {out} is a folder; give a file name (e.g. {out / 'report.html'}).")
        if kind == "folder" and not stat.S_ISDIR(st.st_mode):
            raise OutputError(f"{option} {out} exists and is not a folder; this output is a folder of files. "
                              "Give a new folder name.")
        if kind == "file" and not stat.S_ISREG(st.st_mode):
            raise OutputError(f"{option} {out} is not a regular file (a device, pipe or socket); give a file name.")
        if kind == "file" and (not (st.st_mode & 0o222) or not os.access(out, os.W_OK)):
            raise OutputError(f"{option} {out} is read-only; refusing to replace it. Make it writable or choose "
                              "another output path.")
    parent = _existing_parent(out)
    if parent is not None and not parent.is_dir():
        raise OutputError(f"{option} {out}: {parent} is not a folder.")
    return out


def _existing_parent(p: Path):
    for q in p.absolute().parents:
        if q.exists():
            return q
    return None


# -- atomic writes ----------------------------------------------------------------------------------------------
_REASONS = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "disk quota exceeded",
            errno.EACCES: "permission denied", errno.EPERM: "permission denied",
            errno.EROFS: "read-only file system", errno.EISDIR: "it is a folder",
            errno.ENOTDIR: "a parent is not a folder", errno.ENAMETOOLONG: "file name too long",
            errno.EFBIG: "file too large"}


def output_failure(option, out, exc: OSError, *, outcome: str = "nothing was written") -> OutputError:
    """The :class:`OutputError` for an ``OSError`` met while writing ``out``: names the output and the reason.

    Examples
    --------
    >>> import errno
    >>> str(output_failure("--out", "x.csv", OSError(errno.ENOSPC, "No space left on device")))
    'cannot write --out x.csv: no space left on the device; nothing was written.'
    """
    reason = (_REASONS.get(exc.errno) if exc.errno is not None else None) or (exc.strerror or str(exc)).lower()
    target = option if out is None or str(out) == "" else f"{option} {out}"
    return OutputError(f"cannot write {target}: {reason}; {outcome}.")


_failed = output_failure


# -- terminating signals ----------------------------------------------------------------------------------------
#: Signals that end a process by default and that a writer turns into clean-up first (Ctrl-C is a
#: KeyboardInterrupt already).
TERMINATING_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))
_SIGNALS: dict = {"depth": 0, "previous": {}, "pending": None, "cleaning": 0}
#: Temporary outputs being written: removed before a terminating signal ends the process, whatever line of the
#: writer the signal interrupted.
_TEMPS: set = set()


class _Terminated(BaseException):
    """Raised in the main thread by SIGTERM / SIGHUP while an output is being written."""


def _on_terminating_signal(signum, frame):
    _SIGNALS["pending"] = signum
    if not _SIGNALS["cleaning"]:
        raise _Terminated(signum)


@contextlib.contextmanager
def cleanup_on_signals():
    """While the block runs, SIGTERM and SIGHUP unwind it (its ``finally`` clauses remove temporary files);
    at the end the signal is delivered again with its default action, so the process ends as it would have
    (exit status 128 + signal number in a shell) with nothing half-written left behind.

    Only the main thread installs handlers, and only over the default ones (a handler the program set is left
    alone). Nested blocks share the outermost one's handlers.

    Examples
    --------
    >>> with cleanup_on_signals():
    ...     pass
    """
    if threading.current_thread() is not threading.main_thread() or not TERMINATING_SIGNALS:
        yield
        return
    outer = _SIGNALS["depth"] == 0
    if outer:
        _SIGNALS["pending"] = None
        for sig in TERMINATING_SIGNALS:
            if signal.getsignal(sig) is signal.SIG_DFL:
                _SIGNALS["previous"][sig] = signal.signal(sig, _on_terminating_signal)
    _SIGNALS["depth"] += 1
    try:
        yield
    finally:
        _SIGNALS["depth"] -= 1
        if outer:
            for sig, old in _SIGNALS["previous"].items():
                signal.signal(sig, old)
            _SIGNALS["previous"] = {}
            pending, _SIGNALS["pending"] = _SIGNALS["pending"], None
            if pending is not None:   # clean up what is left, then end as the signal asked
                for path in list(_TEMPS):
                    _remove(path)
                os.kill(os.getpid(), pending)


def _remove(path: Path) -> None:
    """Remove a temporary file or folder (and forget it)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink()
    _TEMPS.discard(path)


def _raise_pending() -> None:
    """Deliver a signal that arrived while a temporary output was being created (and registered)."""
    if _SIGNALS["pending"] is not None and not _SIGNALS["cleaning"] and _SIGNALS["depth"]:
        raise _Terminated(_SIGNALS["pending"])


@contextlib.contextmanager
def _cleaning():
    """A clean-up that a second signal does not interrupt (it is delivered after)."""
    _SIGNALS["cleaning"] += 1
    try:
        yield
    finally:
        _SIGNALS["cleaning"] -= 1


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _umask_mode() -> int:
    return 0o666 & ~_umask()


@contextlib.contextmanager
def atomic_path(out, *, option: str = "--out", inputs=()):
    """Context manager yielding a unique temporary path next to ``out``; renamed onto ``out`` on success.

    Whatever happens inside the block (an exception, a full disk, Ctrl-C), the temporary file is removed and
    ``out`` is left as it was. ``OSError`` while writing becomes an :class:`OutputError` naming ``option`` and
    ``out``. The file gets the permissions a new file would get (or those of the file it replaces).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> with atomic_path(d / "x.txt") as tmp:
    ...     _ = tmp.write_text("hello")
    >>> (d / "x.txt").read_text()
    'hello'
    """
    out = check_output(out, inputs, option=option)
    with cleanup_on_signals():
        with _cleaning():   # a signal here waits until the temporary file is registered for removal
            try:
                out.parent.mkdir(parents=True, exist_ok=True)
                fd, name = tempfile.mkstemp(dir=out.parent, prefix=f"{out.name}.", suffix=".tmp")
                os.close(fd)
            except OSError as exc:
                raise _failed(option, out, exc) from None
            tmp = Path(name)
            _TEMPS.add(tmp)
        try:
            _raise_pending()
            try:
                mode = stat.S_IMODE(out.stat().st_mode) if out.exists() else _umask_mode()
                os.chmod(tmp, mode)
                yield tmp
                os.replace(tmp, out)
            except OSError as exc:
                raise _failed(option, out, exc) from None
        finally:
            with _cleaning():
                _remove(tmp)


def write_in_child(write, *, what: str = "the writer") -> None:
    """Run ``write()`` in a forked child process, so that a native library that crashes on a full disk (the
    HDF5 / netCDF writer dies with SIGSEGV after ``No space left on device``, issue 37) cannot take this process
    down; its failure comes back as an ``OSError`` (``ENOSPC`` when the disk was full), which
    :func:`atomic_path` turns into one message. Where ``fork`` is missing, ``write()`` runs here.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "x.txt"
    >>> write_in_child(lambda: p.write_text("hi"))
    >>> p.read_text()
    'hi'
    >>> try:
    ...     write_in_child(lambda: 1 / 0)
    ... except OSError as exc:
    ...     print(exc.strerror)
    the writer failed (ZeroDivisionError)
    """
    if not hasattr(os, "fork"):
        write()
        return
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    import warnings

    rfd, wfd = os.pipe()
    with warnings.catch_warnings():   # JAX warns of threads; the child only writes a file and exits
        warnings.simplefilter("ignore", RuntimeWarning)
        pid = os.fork()
    if pid == 0:   # the child: quiet (the C library prints its own diagnostics), never returns
        code = 1
        try:
            import faulthandler

            faulthandler.disable()   # a crash of the writer is reported by the parent, not dumped here
            os.close(rfd)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            write()
            code = 0
        except BaseException as exc:   # any failure is reported to the parent, which gives the message
            text = str(exc)
            full = getattr(exc, "errno", None) == errno.ENOSPC or "No space left" in text or "errno = 28" in text
            os.write(wfd, (("ENOSPC " if full else "") + type(exc).__name__).encode()[:200])
        finally:
            os._exit(code)
    os.close(wfd)
    with os.fdopen(rfd, "rb") as fh:
        said = fh.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == 0:
        return
    if said.startswith("ENOSPC"):
        raise OSError(errno.ENOSPC, "No space left on device")
    cause = said or (f"killed by signal {-code}" if code < 0 else f"exit status {code}")
    raise OSError(errno.EIO, f"{what} failed ({cause})")


def write_text(out, text: str, *, option: str = "--out", inputs=()) -> Path:
    """Write ``text`` (UTF-8) to ``out`` atomically (see :func:`atomic_path`); returns the path."""
    with atomic_path(out, option=option, inputs=inputs) as tmp, open(tmp, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    return Path(out)


def write_bytes(out, data: bytes, *, option: str = "--out", inputs=()) -> Path:
    """Write ``data`` to ``out`` atomically (see :func:`atomic_path`); returns the path."""
    with atomic_path(out, option=option, inputs=inputs) as tmp, open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    return Path(out)


@contextlib.contextmanager
def atomic_folder(out, *, option: str = "--out", inputs=()):
    """Context manager yielding a temporary folder next to ``out``; its entries replace ``out``'s on success.

    A new ``out`` is the temporary folder renamed. An existing ``out`` keeps the files this writer does not
    produce; each entry it does produce replaces the old one by a rename. On any failure the temporary folder is
    removed and ``out`` is left as it was.
    """
    out = check_output(out, inputs, option=option, kind="folder")
    with cleanup_on_signals():
        with _cleaning():   # a signal here waits until the temporary folder is registered for removal
            try:
                out.parent.mkdir(parents=True, exist_ok=True)
                tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f"{out.name}.", suffix=".tmp"))
            except OSError as exc:
                raise _failed(option, out, exc) from None
            _TEMPS.add(tmp)
        yield from _fill_folder(out, tmp, option)


def _fill_folder(out: Path, tmp: Path, option: str):
    """The body of :func:`atomic_folder`: yield ``tmp``, then move its entries into ``out``; always clean up."""
    try:
        try:
            _raise_pending()
            os.chmod(tmp, 0o777 & ~_umask())
            yield tmp
            if not out.exists():
                with _cleaning():   # renamed: no longer a temporary folder
                    os.rename(tmp, out)
                    _TEMPS.discard(tmp)
                return
            old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f"{out.name}.", suffix=".old"))
            moved = []
            try:
                for entry in sorted(tmp.iterdir()):
                    dest = out / entry.name
                    if dest.exists() or dest.is_symlink():
                        os.rename(dest, old / entry.name)
                    moved.append(entry.name)
                    os.rename(entry, dest)
            except BaseException:   # a failure, Ctrl-C or a signal: put the previous entries back
                with _cleaning():
                    for name in moved:
                        with contextlib.suppress(OSError):
                            if (out / name).exists():
                                os.rename(out / name, tmp / name)
                            if (old / name).exists() or (old / name).is_symlink():
                                os.rename(old / name, out / name)
                raise
            finally:
                with _cleaning():
                    shutil.rmtree(old, ignore_errors=True)
        except OSError as exc:
            raise _failed(option, out, exc) from None
    finally:
        with _cleaning():
            _remove(tmp)


# -- untrusted text ---------------------------------------------------------------------------------------------
def _escape_char(c: str) -> str:
    return ascii(c)[1:-1]


def term_safe(text, *, keep: str = "\n") -> str:
    """Escape every non-printable character of ``text`` (except those in ``keep``) as ``\\xNN`` / ``\\uNNNN``.

    Terminal escape sequences (ESC, CSI), carriage returns, backspaces, bidi overrides and zero-width characters
    from logs then show as text instead of acting on the terminal, as ``validate`` shows them (Python's
    ``ascii`` escapes).

    Examples
    --------
    >>> term_safe("a\\x1b[31mred\\u202e")
    'a\\\\x1b[31mred\\\\u202e'
    >>> term_safe("two\\nlines")
    'two\\nlines'
    """
    text = str(text)
    plain = text
    for c in keep:
        plain = plain.replace(c, "")
    if plain.isprintable():
        return text
    return "".join(c if c.isprintable() or c in keep else _escape_char(c) for c in text)


def safe_cell(value):
    """A CSV cell a spreadsheet will not run: text starting with ``= + - @``, tab or CR gets a leading ``'``.

    Anything that is not text (numbers, missing values) is returned unchanged.

    Examples
    --------
    >>> safe_cell("@SUM(A1:A2)"), safe_cell("plain"), safe_cell(-1.5)
    ("'@SUM(A1:A2)", 'plain', -1.5)
    """
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


def spreadsheet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` whose text cells and column names are passed through :func:`safe_cell`.

    Numeric columns are left alone (a negative number is not a formula). Use it for every CSV the package
    writes; Parquet and JSON keep the raw values.

    Examples
    --------
    >>> spreadsheet_safe(pd.DataFrame({"tool": ["=1+1", "ok"], "x": [-1, 2]}))["tool"].tolist()
    ["'=1+1", 'ok']
    """
    out = frame.copy()
    for col in out.columns:
        s = out[col]
        if pd.api.types.is_object_dtype(s) or pd.api.types.is_string_dtype(s) or isinstance(s.dtype,
                                                                                            pd.CategoricalDtype):
            if isinstance(s.dtype, pd.CategoricalDtype):
                s = s.astype(object)
            out[col] = s.map(safe_cell, na_action="ignore")
    out.columns = [safe_cell(c) for c in out.columns]
    return out
