"""Bundled datasets (the repository's ``data/`` folder), with provenance in each folder's PROVENANCE.md."""

from __future__ import annotations

from pathlib import Path

__all__ = ["data_dir", "path"]


def data_dir() -> Path:
    """The bundled ``data/`` folder (next to the package in the repository checkout).

    Returns
    -------
    pathlib.Path
        The folder; each dataset is a subfolder with a ``PROVENANCE.md``.

    Examples
    --------
    >>> sorted(p.name for p in data_dir().iterdir() if (p / "PROVENANCE.md").exists())[:2]
    ['biasbusters', 'choice']
    """
    return Path(__file__).resolve().parent.parent / "data"


def path(name: str) -> Path:
    """Path of a bundled file, e.g. ``path("biasbusters/study.toml")``.

    Parameters
    ----------
    name : str
        The file's path relative to :func:`data_dir`, with ``/`` separators.

    Returns
    -------
    pathlib.Path
        The absolute path of the file (it exists).

    Raises
    ------
    FileNotFoundError
        When the file is not bundled; the message lists what is.

    Examples
    --------
    >>> p = path("biasbusters/study.toml")
    >>> p.name, p.exists()
    ('study.toml', True)
    """
    p = data_dir() / name
    if not p.exists():
        have = sorted(str(x.relative_to(data_dir())) for x in data_dir().glob("*/*.toml"))
        raise FileNotFoundError(f"no bundled file {name!r} under {data_dir()}; bundled studies: {have}")
    return p
