"""Issue 37: the Parquet NUL / cell-size scan reads dictionary-coded text columns as dictionaries (it scans the
dictionary, not every row); the findings must be those of the row-by-row scan, whatever the encoding."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from toolbias_stats.io.readers.table import _locate_parquet


@pytest.mark.parametrize("dictionary", [True, False, ["model"]])
@pytest.mark.parametrize("bad", ["nul", "big", None])
def test_same_finding_with_and_without_dictionaries(tmp_path, dictionary, bad):
    values = ["a", "b", "c"] * 1000
    if bad == "nul":
        values[2500] = "x\x00y"
    if bad == "big":
        values[1700] = "z" * 200_000
    path = tmp_path / "log.parquet"
    # three row groups; ["model"]: one column with a dictionary, the other plain
    pq.write_table(pa.table({"model": ["m"] * 3000, "chosen_tool": values}), path, use_dictionary=dictionary,
                   row_group_size=1000)
    found = _locate_parquet(path)
    if bad is None:
        assert found is None
    elif bad == "nul":
        assert found is not None and "log.parquet:2501:chosen_tool:" in str(found) and "NUL" in str(found)
    else:
        assert found is not None and "log.parquet:1701:chosen_tool:" in str(found) and "200000 bytes" in str(found)
