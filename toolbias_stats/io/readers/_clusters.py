"""Clusters without a catalog: declared in the manifest, read from a CSV, or inferred from the tools offered.

A study needs to know which tools are functionally equivalent (a *cluster*). A team with a catalog names it
(``catalog = "tools.csv"``). A team without one can

- declare the clusters in the manifest: ``clusters = {geocoding = ["geo_a", "geo_b"], weather = [...]}``;
- name a CSV of ``tool_id, cluster_id`` rows: ``clusters_file = "clusters.csv"`` (any catalog columns may
  follow; it is read as a catalog table);
- infer them: ``clusters = "infer"`` (the default for the API-log formats when neither a catalog nor a
  declaration is given): each **exact set of tools offered** in a request is one cluster. Two requests whose
  tool sets differ but share a tool cannot be told apart by this rule and are reported as an error naming both
  lines.

:class:`ClusterSource` records which of these was used; ``Study.settings["cluster_source"]``, the log
diagnostics and the reports show it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...exceptions import ManifestError, SelectionLogError, problem
from .._catalog import ToolCatalog

__all__ = ["ClusterSource", "ClusterIndex", "declared_catalog", "infer_catalog", "inferred_cluster_id", "catalog_for",
           "declares_clusters", "study_clusters", "CLUSTER_KINDS"]

#: How the clusters of a study were obtained.
CLUSTER_KINDS = ("catalog", "declared", "file", "inferred")
#: Longest inferred cluster id spelled out in full (longer ones are shortened with a hash).
_MAX_ID = 80


@dataclass(frozen=True)
class ClusterSource:
    """Where the clusters of a study came from.

    Attributes
    ----------
    kind : {"catalog", "declared", "file", "inferred"}
    detail : str
        One sentence for reports (``"declared in study.toml: 2 clusters, 5 tools"``).
    catalog : ToolCatalog
    """

    kind: str
    detail: str
    catalog: ToolCatalog

    def to_dict(self) -> dict:
        return {"kind": self.kind, "detail": self.detail, "n_clusters": len(self.catalog.clusters),
                "n_tools": len(self.catalog)}

    def __str__(self):
        return f"{self.kind}: {self.detail}"


def declared_catalog(mapping, *, where=None, path=None) -> ToolCatalog:
    """A catalog from ``{cluster_id: [tool_id, ...]}`` (the manifest's ``clusters = {...}`` table).

    A tool may be declared in several clusters (a tournament of description variants: each pair of variants a
    cluster; issue 36): the set of tools a request lists then decides its cluster
    (:class:`ClusterIndex`).

    Raises
    ------
    ManifestError
        A value that is not a non-empty list of distinct non-empty strings, or a cluster whose tools are all tools
        of another (a list showing the larger one could not be told apart from it).
    """
    src = path if path is not None else "<clusters>"
    if not isinstance(mapping, dict) or not mapping:
        raise ManifestError(problem(src, where, "clusters", f"expected a table {{cluster = [tool, ...]}}, got "
                                                            f"{mapping!r}"))
    problems: list = []
    owner: dict = {}          # tool -> cluster id
    records: list[dict] = []
    for cid, tools in mapping.items():
        if (not isinstance(tools, list) or not tools
                or not all(isinstance(t, str) and t.strip() for t in tools)):
            problems.append(problem(src, where, f"clusters.{cid}",
                                    f"expected a non-empty list of tool names, got {tools!r}"))
            continue
        if len(set(tools)) < len(tools):
            twice = sorted({t for t in tools if tools.count(t) > 1})
            problems.append(problem(src, where, f"clusters.{cid}", f"tool(s) {twice} declared twice in this cluster"))
            continue
        for i, t in enumerate(tools, start=1):
            owner.setdefault(t, []).append(cid)
            records.append({"tool_id": t, "cluster_id": str(cid), "api_index": i})
    problems += _nested_clusters(mapping, owner, src, where)
    if problems:
        raise ManifestError(problems)
    label = f"<clusters declared in {Path(str(src)).name}>" if path is not None else "<clusters declared>"
    return ToolCatalog.from_records(records, source=label)


def _nested_clusters(mapping: dict, owner: dict, src, where) -> list:
    """Problems of declared clusters whose tools are all tools of another cluster (issue 36: tools may be shared, but
    a list showing the larger cluster would show the smaller one too, and its cluster could not be decided)."""
    out, seen = [], set()
    for cids in owner.values():
        for a in cids:
            for b in cids:
                if a == b or (a, b) in seen:
                    continue
                seen.add((a, b))
                if set(mapping[a]) <= set(mapping[b]):
                    msg = (f"every tool of cluster {a!r} is also in cluster {b!r}: a request showing {b!r}'s tools "
                           f"could not be told apart from one showing {a!r}'s")
                    out.append(problem(src, where, f"clusters.{a}", msg))
    return out


def inferred_cluster_id(tools) -> str:
    """Id of the inferred cluster offering exactly ``tools``: the sorted names joined by ``+`` (names past 80
    characters are shortened to the first names, the count and a hash of the full set)."""
    names = sorted(set(tools))
    full = "+".join(names)
    if len(full) <= _MAX_ID:
        return full
    digest = hashlib.sha256("\n".join(names).encode("utf-8")).hexdigest()[:8]
    head = full[: _MAX_ID - 24].rsplit("+", 1)[0]
    return f"{head}+...({len(names)} tools, {digest})"


def infer_catalog(tool_lists) -> ToolCatalog:
    """Clusters as the exact sets of tools offered.

    Parameters
    ----------
    tool_lists : iterable of (list of str, file, line)
        The tool names offered by each request and where the request is (lists without names are skipped:
        the reader reports them).

    Returns
    -------
    ToolCatalog
        One cluster per distinct set of tools, tools in name order; ``source`` says they were inferred.

    Raises
    ------
    SelectionLogError
        Two different tool sets that share a tool (the tool list changes within what would be one cluster),
        naming the first request of each set; or no request with tools at all.
    """
    first: dict = {}          # frozenset -> (file, line, names as offered)
    owner: dict = {}          # tool -> frozenset
    problems = []
    reported = set()
    for names, file, line in tool_lists:
        if not names:
            continue
        key = frozenset(names)
        if key in first:
            continue
        first[key] = (file, line, list(names))
        for t in key:
            if t in owner and owner[t] != key:
                other = owner[t]
                pair = frozenset((key, other))
                if pair in reported:
                    continue
                reported.add(pair)
                f0, l0, _ = first[other]
                shared = sorted(key & other)
                problems.append(problem(file, line, "tools",
                                        f"the tool list changes within one cluster: this request offers "
                                        f"{sorted(key)}, {f0}:{l0} offers {sorted(other)}; they share {shared}. "
                                        "With inferred clusters each cluster is the exact set of tools offered, "
                                        "so a tool cannot be in two sets: declare the clusters in the manifest "
                                        "(`clusters = {name = [...]}`), name a `clusters_file`, or give a "
                                        "catalog"))
            else:
                owner[t] = key
    if problems:
        raise SelectionLogError(problems)
    if not first:
        raise SelectionLogError(problem("<logs>", None, "tools", "no request offers any tool: clusters cannot be "
                                                                 "inferred"))
    records = []
    for key in sorted(first, key=inferred_cluster_id):
        cid = inferred_cluster_id(key)
        for i, t in enumerate(sorted(key), start=1):
            records.append({"tool_id": t, "cluster_id": cid, "api_index": i})
    return ToolCatalog.from_records(records, source="<clusters inferred: the exact set of tools offered>")


def describe(kind: str, catalog: ToolCatalog, where: str = "") -> ClusterSource:
    """The :class:`ClusterSource` of a catalog obtained in way ``kind``."""
    n = f"{len(catalog.clusters)} cluster(s), {len(catalog)} tool(s)"
    detail = {"catalog": f"catalog {where}: {n}",
              "declared": f"declared in the manifest{' ' + where if where else ''}: {n}",
              "file": f"clusters_file {where}: {n}",
              "inferred": f"inferred as the exact set of tools offered in each request: {n}"}[kind]
    return ClusterSource(kind, detail, catalog)


def catalog_for(tool_lists, *, catalog=None, clusters=None) -> ClusterSource:
    """The clusters a reader called on its own (not through a manifest) resolves against.

    ``catalog`` wins; else ``clusters``: a dict (declared), ``"infer"``, or a path to a ``tool_id, cluster_id``
    CSV; else (None) inferred from ``tool_lists`` (an iterable of ``(names, file, line)``).
    """
    if catalog is not None:
        if clusters is not None:
            raise ValueError("give either `catalog` or `clusters`, not both.")
        src = str(catalog.source)
        # a catalog built by read_study from declared / inferred clusters keeps its origin in `source`
        kind = ("inferred" if src.startswith("<clusters inferred") else
                "declared" if src.startswith("<clusters declared") else "catalog")
        return describe(kind, catalog, src if kind == "catalog" else "")
    if clusters is None or (isinstance(clusters, str) and clusters == "infer"):
        return describe("inferred", infer_catalog(tool_lists))
    if isinstance(clusters, dict):
        return describe("declared", declared_catalog(clusters))
    if isinstance(clusters, (str, Path)):
        from .table import read_catalog_table

        return describe("file", read_catalog_table(Path(clusters)), str(clusters))
    raise TypeError(f"`clusters` must be a dict {{cluster: [tools]}}, 'infer' or a path; got "
                    f"{type(clusters).__name__} instead.")


# ---------------------------------------------------------------------------------------
# Manifests
def is_declaration(value) -> bool:
    """Whether a manifest ``clusters`` value declares clusters (a table or ``"infer"``) rather than listing the
    clusters a condition was run on (a list, issue 8)."""
    return isinstance(value, (dict, str))


def declares_clusters(entry: dict) -> bool:
    """Whether a manifest entry (or the study level) declares clusters: ``clusters = {...}``, ``clusters =
    "infer"`` or ``clusters_file``."""
    return is_declaration(entry.get("clusters")) or "clusters_file" in entry


def study_clusters(manifest: Path, doc: dict, entries: list, *, offered, inferable) -> ClusterSource | None:
    """The study's clusters when the manifest declares them, names a ``clusters_file``, or gives no catalog for
    formats that can infer them; None when a catalog file is used (the manifest reads it as before).

    Removes the declaration keys from ``entries`` (the merged ``[[logs]]`` dicts) so that readers never see
    them. ``offered(entry)`` lists ``(names, file, line)`` of an entry's requests (for inference);
    ``inferable`` is the set of formats that can infer clusters.

    Raises
    ------
    ManifestError
        A ``clusters`` value of the wrong type, declarations that disagree between entries, a declaration
        together with a catalog, an unreadable ``clusters_file``, or no catalog for a format that cannot infer.
    """
    decls = _cluster_declarations(manifest, entries)
    kind = _declaration_kind(manifest, entries, decls, inferable)
    if kind is None:
        return None
    if kind == "declared":
        where = None if is_declaration(doc.get("clusters")) else decls[0][2]   # None: study level
        cat = declared_catalog(decls[0][1], where=where, path=manifest)
        return describe("declared", cat, f"({manifest.name})")
    if kind == "file":
        from .table import read_catalog_table

        return describe("file", read_catalog_table(decls[0][1]), str(decls[0][1]))
    bad = [i for i, e in enumerate(entries, start=1) if e.get("format") not in inferable]
    if bad:
        raise ManifestError(problem(manifest, f"logs[{bad[0]}]", "clusters",
                                    f"format {entries[bad[0] - 1].get('format')!r} cannot infer clusters; give a "
                                    f"catalog or declare them (inferable formats: {sorted(inferable)})"))
    lists = []
    for e in entries:
        lists.extend(offered(e))
    return describe("inferred", infer_catalog(lists))


def _cluster_declarations(manifest: Path, entries: list) -> list[tuple[str, Any, str | None]]:
    """``(kind, declaration, where)`` of every entry that declares clusters (``"declared"``, ``"infer"``,
    ``"file"``); the declaration keys are removed from the entries. Raises the problems of every entry."""
    problems: list = []
    decls: list[tuple[str, Any, str | None]] = []     # (kind, declaration, where)
    for i, e in enumerate(entries, start=1):
        where: str | None = f"logs[{i}]"
        cl = e.get("clusters")
        if cl is not None and not isinstance(cl, list):
            e.pop("clusters")
            if isinstance(cl, str) and cl != "infer":
                problems.append(problem(manifest, where, "clusters",
                                        f"expected a non-empty list of cluster ids, got {cl!r} (or, to declare "
                                        "clusters, a table {cluster = [tools]} or \"infer\")"))
            elif isinstance(cl, (dict, str)):
                decls.append(("infer" if isinstance(cl, str) else "declared", cl, where))
            else:
                problems.append(problem(manifest, where, "clusters",
                                        f"expected a non-empty list of cluster ids, got {cl!r} (or, to declare "
                                        "clusters, a table {cluster = [tools]} or \"infer\")"))
        if "subsets" in e and not isinstance(e["subsets"], bool):
            problems.append(problem(manifest, where, "subsets", f"expected true or false, got {e['subsets']!r}"))
        cf = e.pop("clusters_file", None)
        if cf is not None:
            if not isinstance(cf, str):
                problems.append(problem(manifest, where, "clusters_file", f"expected a path string, got {cf!r}"))
            else:
                p = Path(cf) if Path(cf).is_absolute() else (manifest.parent / cf).resolve()
                if not p.exists():
                    problems.append(problem(manifest, where, "clusters_file", f"file not found: {p}"))
                decls.append(("file", p, where))
    if problems:
        raise ManifestError(problems)
    return decls


def _declaration_kind(manifest: Path, entries: list, decls: list, inferable) -> str | None:
    """``"declared"``, ``"file"`` or ``"infer"``; None when the study uses a catalog file (or lacks one for a
    format that cannot infer: the manifest reports the missing catalog). Declarations must agree and exclude a
    catalog."""
    kinds = {(k, repr(v)) for k, v, _ in decls}
    if len(kinds) > 1:
        raise ManifestError(problem(manifest, None, "clusters", "the [[logs]] entries declare different clusters; "
                                                                "one study has one set of clusters (declare them "
                                                                "once, at the top of the manifest)"))
    with_catalog = [i for i, e in enumerate(entries, start=1) if "catalog" in e]
    if decls and with_catalog:
        raise ManifestError(problem(manifest, f"logs[{with_catalog[0]}]", "catalog",
                                    "give either a catalog or cluster declarations (`clusters = {...}`, "
                                    "`clusters = \"infer\"`, `clusters_file`), not both"))
    if decls:
        return decls[0][0]
    if with_catalog:
        without = [i for i, e in enumerate(entries, start=1) if "catalog" not in e]
        if without:
            raise ManifestError(problem(manifest, f"logs[{without[0]}]", "catalog",
                                        f"no catalog given while logs[{with_catalog[0]}] names one; one study "
                                        "has one set of clusters: give the catalog at the top of the manifest"))
        return None
    if any(e.get("format") not in inferable for e in entries):
        return None   # the manifest reports the missing catalog as before
    return "infer"


class ClusterIndex:
    """Which cluster a list of tools shown belongs to, when a tool id may belong to several clusters (issue 36:
    a tournament of description variants, each pair of variants a cluster, each variant in nine pairs).

    A tool in one cluster decides it alone; a tool shared by several clusters does not, and the cluster is decided
    by the set of tools shown: the cluster(s) all of whose tools were shown, else (a subset shown) the cluster(s)
    holding every tool shown.

    Examples
    --------
    >>> cat = ToolCatalog.from_records([{"cluster_id": c, "tool_id": t} for c, pair in
    ...                                 {"a~b": "ab", "a~c": "ac", "b~c": "bc"}.items() for t in pair])
    >>> idx = ClusterIndex(cat)
    >>> idx.of_shown(["b", "a"]), idx.of_shown(["a"]), idx.of_shown(["a", "b", "c"])
    (['a~b'], ['a~b', 'a~c'], ['a~b', 'a~c', 'b~c'])
    """

    def __init__(self, catalog: ToolCatalog):
        self.members: dict[str, frozenset] = {c: frozenset(catalog.tools(c)) for c in catalog.clusters}
        clusters_of: dict[str, list] = {}
        for c, tools in self.members.items():
            for t in tools:
                clusters_of.setdefault(t, []).append(c)
        self.clusters_of: dict[str, tuple] = {t: tuple(sorted(cs)) for t, cs in clusters_of.items()}
        #: the cluster of each tool that belongs to one only
        self.only: dict[str, str] = {t: cs[0] for t, cs in self.clusters_of.items() if len(cs) == 1}
        self.shared = len(self.only) < len(self.clusters_of)

    def of_shown(self, ids) -> list[str]:
        """The clusters the tools shown (catalog ids; None for names outside the catalog) can belong to, sorted:
        every cluster of a tool shown when no tool shown is shared; else the clusters all of whose tools were shown,
        else the clusters that hold every tool shown (empty: no cluster holds them all)."""
        known = {i for i in ids if i is not None}
        if not self.shared or all(i in self.only for i in known):
            return sorted({self.only[i] for i in known})
        touched = {c for i in known for c in self.clusters_of[i]}
        full = sorted(c for c in touched if self.members[c] <= known)
        if full:
            return full
        return sorted(c for c in touched if known <= self.members[c])

    def of_tool(self, tool, among=None) -> str | None:
        """The one cluster of ``tool`` (within ``among`` when given), or None when it has none or several."""
        cs = self.clusters_of.get(tool, ())
        if among is not None:
            cs = tuple(c for c in cs if c in among)
        return cs[0] if len(cs) == 1 else None
