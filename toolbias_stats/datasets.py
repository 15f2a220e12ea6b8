"""Bundled datasets: the studies and sentence-embedding vectors shipped with the package.

The files are package data (``toolbias_stats/_data``) read through :mod:`importlib.resources`, as
scikit-learn, seaborn and ArviZ ship their example data, so they are there wherever the package is installed
(from a wheel, an sdist or a checkout). The repository keeps one copy only: ``toolbias_stats/_data`` is a
symbolic link to the repository's ``data/`` folder, and the build copies the linked files into the wheel
(``[tool.setuptools.package-data]`` in ``pyproject.toml``). Provenance is in each folder's ``PROVENANCE.md``.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["data_dir", "path"]

#: The package-data folder, relative to the package.
DATA_PACKAGE_DIR = "_data"
#: The error of :func:`path` for a file that is not bundled.
ERR_NOT_BUNDLED = "no bundled file {name!r} under {root}; bundled studies: {have}"


def data_dir() -> Path:
    """The folder of the bundled datasets (package data of the installed package).

    Returns
    -------
    pathlib.Path
        The folder; each dataset is a subfolder with a ``PROVENANCE.md``: ``biasbusters``, ``choice``,
        ``embeddings``, ``experiments``, ``shadow`` and ``toolsense``.

    Notes
    -----
    Resolved with ``importlib.resources.files("toolbias_stats") / "_data"``. A checkout made without symbolic
    links (``git config core.symlinks false``, common on Windows) has a text file there instead of the link;
    the repository's ``data/`` folder beside the package is then used.

    Examples
    --------
    >>> sorted(p.name for p in data_dir().iterdir() if (p / "PROVENANCE.md").exists())[:2]
    ['biasbusters', 'choice']
    """
    root = resources.files(__package__ or "toolbias_stats") / DATA_PACKAGE_DIR
    if root.is_dir():
        # an installed wheel or a checkout: a real folder on disk (wheels are always unpacked by pip)
        return Path(str(root)).resolve()
    return Path(__file__).resolve().parent.parent / "data"   # a checkout without symbolic links


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
        When the file is not bundled; the message lists the bundled studies.

    Examples
    --------
    >>> p = path("biasbusters/study.toml")
    >>> p.name, p.exists()
    ('study.toml', True)
    """
    root = data_dir()
    p = root / name
    if not p.exists():
        have = sorted(str(x.relative_to(root)) for x in root.glob("*/*.toml"))
        raise FileNotFoundError(ERR_NOT_BUNDLED.format(name=name, root=root, have=have))
    return p
