"""Quarto and notebooks: export the parameterised template, and run it without Quarto (jupytext + nbclient).

``toolbias-stats report STUDY.toml --format qmd --out DIR/`` writes DIR/report.qmd (the template of
``templates/report.qmd`` with this study's parameters) and a copy of the study's files in DIR/data/, so that
``quarto render DIR/report.qmd`` needs nothing else. Where no ``quarto`` binary exists (it cannot be installed on
every machine), :func:`qmd_to_notebook` converts the document with jupytext and :func:`run_notebook` executes it
with nbclient: the same code, the same numbers.
"""

from __future__ import annotations

import numbers
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from .._validation import renamed_parameter

if TYPE_CHECKING:
    import os
    from collections.abc import Mapping, Sequence
    from typing import Any

    from nbformat import NotebookNode

__all__ = ["TEMPLATE", "export_quarto", "qmd_to_notebook", "run_notebook", "DEFAULT_SECTIONS"]

#: The parameterised template shipped with the package.
TEMPLATE = Path(__file__).resolve().parent / "templates" / "report.qmd"
#: Sections of the template, in order.
DEFAULT_SECTIONS = ("findings", "bias", "clusters", "api-vs-position")
#: A study folder larger than this is referenced in place instead of copied.
MAX_COPY_BYTES = 200 * 2**20

_PARAM_LINE = re.compile(r"^(?P<indent>  )(?P<key>study|sections|seed|n_resamples|by): .*$", re.M)
_CELL_LINE = re.compile(r"^(?P<key>study|sections|seed|n_resamples|by) = .*$", re.M)
_FENCE = re.compile(r"^```\{python\}[ \t]*$", re.M)


@renamed_parameter("seed", "rng", since="0.1.0")
def export_quarto(study: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
                  sections: Sequence[str] = DEFAULT_SECTIONS, rng: int = 20251121, n_resamples: int = 2000,
                  by: str = "model", option: str = "out_dir") -> Path:
    """Write a ready-to-render Quarto document for a study.

    Parameters
    ----------
    study : path-like
        The study manifest (TOML).
    out_dir : path-like
        Folder to write (created). It receives ``report.qmd`` and ``data/`` (a copy of the manifest's folder,
        when every file the manifest names lies inside it and it is under 200 MiB; otherwise the manifest is
        referenced where it is, and the returned document says so in its parameters).
    sections : sequence of str
        Any of :data:`DEFAULT_SECTIONS`.
    rng : int, default 20251121
        The seed the document's cells use (written as its ``seed`` parameter, so only an int: a
        Generator cannot be written into a file). ``seed=`` is the deprecated name.
    n_resamples : int
    by : str
        Grouping columns, comma-separated.
    option : str, default "out_dir"
        How error messages name the output (the CLI passes ``"--out"``).

    Returns
    -------
    pathlib.Path
        The written ``report.qmd``.

    Raises
    ------
    toolbias_stats._output.OutputError
        When ``out_dir`` is a file, is or contains an input of the study, or cannot be written (nothing is
        left behind: the folder is built next to it and renamed at the end).

    Examples
    --------
    >>> import tempfile
    >>> import toolbias_stats as tbs
    >>> out = tempfile.mkdtemp()
    >>> qmd = export_quarto(tbs.datasets.path("experiments/study.toml"), out, n_resamples=200, rng=1)
    >>> qmd.name, "  seed: 1" in qmd.read_text(encoding="utf-8")      # the parameters in the YAML header
    ('report.qmd', True)
    """
    seed = _seed_int(rng)
    study = Path(study).resolve()
    if not study.is_file():
        raise FileNotFoundError(f"study manifest not found: {study}")
    bad = [s for s in sections if s not in DEFAULT_SECTIONS]
    if bad:
        raise ValueError(f"`sections` must be among {list(DEFAULT_SECTIONS)}; got {bad} instead.")
    from .._output import atomic_folder, study_inputs

    out = Path(out_dir)
    folder = study.parent
    manifest_ref = str(study)
    # Built in a temporary folder next to `out` and renamed at the end: a failure leaves nothing partial, and an
    # output folder that is or contains an input is refused (issue 21).
    with atomic_folder(out, option=option, inputs=study_inputs(study)) as tmp:
        if _self_contained(study) and _size(folder) <= MAX_COPY_BYTES:
            skip = {tmp.resolve(), out.resolve()}
            shutil.copytree(folder, tmp / "data", ignore=lambda d, names: [
                n for n in names if n == "__pycache__" or n.endswith(".pyc") or n.startswith(".")
                or (Path(d) / n).resolve() in skip])
            manifest_ref = f"data/{study.name}"
        values = {"study": manifest_ref, "sections": ",".join(sections), "seed": seed,
                  "n_resamples": int(n_resamples), "by": str(by)}
        text = fill_parameters(TEMPLATE.read_text(encoding="utf-8"), values)
        (tmp / "report.qmd").write_text(text, encoding="utf-8")
    return out / "report.qmd"


def fill_parameters(text: str, values: dict) -> str:
    """Set the parameter defaults in the YAML header and in the ``parameters`` cell of the template."""
    def yaml(m):
        v = values[m.group("key")]
        return f"{m.group('indent')}{m.group('key')}: {_yaml_scalar(v)}"

    def cell(m):
        return f"{m.group('key')} = {values[m.group('key')]!r}"

    head, sep, body = text.partition("\n---\n")
    return _PARAM_LINE.sub(yaml, head) + sep + _CELL_LINE.sub(cell, body)


def qmd_to_notebook(path: str | os.PathLike[str], *, parameters: Mapping[str, Any] | None = None) -> NotebookNode:
    """Convert a Quarto document (``{python}`` chunks) to a notebook with jupytext, without Quarto.

    ``parameters`` are injected after the cell tagged ``parameters``, as Quarto and papermill do.

    Parameters
    ----------
    path : path-like
        The ``.qmd`` document (e.g. written by :func:`export_quarto`).
    parameters : mapping, optional
        ``{name: value}`` written as ``name = repr(value)`` in a cell after the ``parameters`` cell (at the top
        when there is none).

    Returns
    -------
    nbformat.NotebookNode
        The notebook (not executed): one code cell per ``{python}`` chunk, Markdown cells between them.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> doc = Path(tempfile.mkdtemp()) / "tiny.qmd"
    >>> text = "# Title\\n\\n```{python}\\n#| tags: [parameters]\\nn = 1\\n```\\n\\nText.\\n"
    >>> _ = doc.write_text(text, encoding="utf-8")
    >>> nb = qmd_to_notebook(doc, parameters={"n": 3})
    >>> [c.cell_type for c in nb.cells]
    ['markdown', 'code', 'code', 'markdown']
    >>> nb.cells[2].source
    '# injected parameters\\nn = 3'
    """
    import jupytext
    import nbformat

    text = Path(path).read_text(encoding="utf-8")
    # jupytext's own .qmd reader calls the quarto binary; its Markdown reader reads the same chunks as
    # ```python fences (chunk options stay as `#|` comments, which Python ignores)
    nb = jupytext.reads(_FENCE.sub("```python", text), fmt="md")
    if parameters:
        idx = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"
                    and "#| tags: [parameters]" in c.source), None)
        src = "# injected parameters\n" + "\n".join(f"{k} = {v!r}" for k, v in parameters.items())
        cell = nbformat.v4.new_code_cell(src)
        nb.cells.insert(0 if idx is None else idx + 1, cell)
    return nb


def run_notebook(nb: NotebookNode, *, cwd: str | os.PathLike[str] | None = None, timeout: int = 600) -> NotebookNode:
    """Execute a notebook with nbclient (the ``python3`` kernel of this environment); returns it with outputs.

    Raises nbclient's ``CellExecutionError`` naming the failing cell.

    Parameters
    ----------
    nb : nbformat.NotebookNode
        E.g. from :func:`qmd_to_notebook`; executed in place.
    cwd : path-like, optional
        Working directory of the kernel (default: the current one).
    timeout : int, default 600
        Seconds allowed per cell.

    Returns
    -------
    nbformat.NotebookNode
        ``nb`` with its outputs.

    Examples
    --------
    >>> import nbformat
    >>> nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    >>> run_notebook(nb).cells[0].outputs[0]["text"]
    '42\\n'
    """
    from nbclient import NotebookClient

    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(cwd) if cwd else "."}})
    client.execute()
    return nb


def _yaml_scalar(v) -> str:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return str(v)
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _self_contained(study: Path) -> bool:
    """Every path the manifest names lies inside its folder (so a copy of the folder is complete)."""
    from .._output import study_inputs

    folder = study.parent.resolve()
    for p, _ in study_inputs(study):
        try:
            p.resolve().relative_to(folder)
        except ValueError:
            return False
    return True


def _size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def _seed_int(rng) -> int:
    if isinstance(rng, bool) or not isinstance(rng, numbers.Integral):
        raise ValueError(f"`rng` must be an int seed (it is written into the document); got {type(rng).__name__}.")
    return int(rng)
