"""Writing command output: atomically (a failed command leaves no partial file)."""

from __future__ import annotations

from pathlib import Path


def write_report(out, text: str) -> Path:
    """Write ``text`` to ``out`` via a temporary file and a rename; print what was written."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)  # nothing partial is left behind on failure
    print(f"wrote {out} ({len(text) // 1024} KiB)")
    return out
