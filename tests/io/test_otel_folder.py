"""read_otel on something that is not one trace file: a clear error naming the path, never a traceback."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from toolbias_stats.exceptions import SelectionLogError
from toolbias_stats.io.readers import offered_otel, read_otel

FIX = Path(__file__).resolve().parent / "fixtures" / "api_logs" / "otel"


def test_a_folder_is_a_clear_error(tmp_path):
    shutil.copy(FIX / "traces.json", tmp_path / "traces.json")
    with pytest.raises(SelectionLogError) as exc:
        read_otel(tmp_path, meta={"model": "m"}, model_override=True)
    assert str(exc.value) == (f"{tmp_path}: expected an OTLP JSON trace file, got a folder (read_otel reads one "
                              "file: give the path of each trace file)")
    with pytest.raises(SelectionLogError, match="got a folder"):
        offered_otel(tmp_path)
    # the file inside reads
    assert len(read_otel(tmp_path / "traces.json", meta={"model": "m"}, model_override=True).data) > 0


def test_a_device_is_a_clear_error():
    if not Path("/dev/null").exists():
        pytest.skip("no /dev/null")
    with pytest.raises(SelectionLogError, match=r"expected a regular trace file, got a device, pipe or socket"):
        read_otel("/dev/null", meta={"model": "m"}, model_override=True)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(SelectionLogError, match=re.escape("nope.json: file not found")):
        read_otel(tmp_path / "nope.json", meta={"model": "m"}, model_override=True)
