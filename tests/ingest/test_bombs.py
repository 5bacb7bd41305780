"""Issue 34, items 3 and 4: files that are small on disk and huge once read.

* A Parquet file's footer gives its rows and column types: a 40 M-row file of constant columns
  (a few MB on disk, 1.3 GB decoded) is refused from the footer before any row is read, naming
  rows, columns and size; a small one is read.
* A gzip BurstGPT trace that expands past the streamed road's threshold goes that road (DuckDB
  reads gzip itself, batch by batch) instead of the reader that holds a file whole: the rows of
  the real trace, repeated, all stored; a gzip file of a format without a streamed road is
  refused past the in-memory limit, naming it; a bad row in a large gzip trace is refused with
  what stopped the streamed reader.
Server RSS for these is measured in ``bench/bench_bombs.py``, not here.
"""

from __future__ import annotations

import gzip

import numpy as np
import polars as pl
import pytest
from conftest import shared
from harness import case_file, constant_parquet

from analytics import store
from analytics.ingest import fastcsv
from analytics.ingest import files as ingest
from analytics.ingest.formats import FormatError


def test_a_parquet_bomb_is_refused_from_its_footer(con, tmp_path):
    bomb = tmp_path / "bomb.parquet"
    constant_parquet(bomb, 40_000_000)
    assert bomb.stat().st_size < 20_000_000  # small on disk
    with pytest.raises(FormatError) as refused:
        ingest.ingest_files(con, [ingest.FileIn(bomb, bomb.name)])
    assert "holds 40,000,000 rows x 3 columns" in refused.value.reason
    assert "over 1,000 MB" in refused.value.reason and refused.value.line == 1
    assert store.list_datasets(con).empty


def test_a_small_parquet_file_is_still_read(con, tmp_path):
    small = tmp_path / "small.parquet"
    constant_parquet(small, 1000)
    [result] = ingest.ingest_files(con, [ingest.FileIn(small, small.name)])
    assert (result["status"], result["rows"]) == ("ingested", 1000)


def _burstgpt_gzip(path, repeats: int) -> int:
    """The real BurstGPT_1 head rows repeated ``repeats`` times with timestamps counting up one
    second a row, gzip-compressed; returns the row count."""
    real = pl.read_csv(shared("burstgpt/BurstGPT_1_head400.csv"))
    rows = pl.concat([real] * repeats)
    rows = rows.with_columns(pl.Series("Timestamp", np.arange(rows.height, dtype=np.float64)))
    with gzip.open(path, "wb", compresslevel=1) as out:
        rows.write_csv(out)
    return rows.height


@pytest.fixture(scope="module")
def big_gzip(tmp_path_factory):
    path = tmp_path_factory.mktemp("bombs") / "burstgpt-big.csv.gz"
    rows = _burstgpt_gzip(path, 4000)  # 1.6 M rows, about 73 MB of text
    return path, rows


def test_a_large_gzip_trace_takes_the_streamed_road(con, big_gzip, monkeypatch):
    path, rows = big_gzip

    def refuse(item, why=""):
        raise AssertionError(f"went to the reader that holds the file whole: {why}")

    monkeypatch.setattr(ingest, "_checked_item", refuse)
    monkeypatch.setenv("HEADROOM_MAX_IN_MEMORY_MB", "1")  # the whole-file readers are closed
    [result] = ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    assert (result["status"], result["rows"]) == ("ingested", rows)
    got = con.execute("SELECT count(*), sum(prompt_tokens) FROM requests").fetchone()
    real = pl.read_csv(shared("burstgpt/BurstGPT_1_head400.csv"))
    assert got == (rows, int(real["Request tokens"].sum()) * 4000)


def test_a_bad_row_in_a_large_gzip_trace_names_what_stopped_the_streamed_reader(con, tmp_path,
                                                                               monkeypatch):
    real = shared("burstgpt/BurstGPT_1_head400.csv").read_bytes()
    header, body = real.split(b"\n", 1)
    path = tmp_path / "bad.csv.gz"
    with gzip.open(path, "wb", compresslevel=1) as out:
        out.write(header + b"\n" + body * 10 + b"19444444.0,x,1,ChatGPT,many,1,2,Conversation log\n")
    monkeypatch.setattr(fastcsv, "FAST_MIN_BYTES", 0)
    monkeypatch.setenv("HEADROOM_MAX_IN_MEMORY_MB", "0.01")
    with pytest.raises(FormatError) as refused:
        ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    assert "the streamed reader stopped at a row it leaves to the checked reader" in \
        refused.value.reason
    assert "read only by the streamed road" in refused.value.reason
    assert store.list_datasets(con).empty


def test_a_gzip_file_without_a_streamed_road_is_refused_past_the_in_memory_limit(con, tmp_path,
                                                                               monkeypatch):
    """The real Green-DCC carbon file (gzip, as published) with the in-memory limit set to half
    its text: refused naming the size and what to do; read at the default limit."""
    path = shared("green_dcc/carbon_intensity/US-CAL-CISO_2023_hourly.csv.gz")
    text = len(gzip.decompress(path.read_bytes()))
    monkeypatch.setenv("HEADROOM_MAX_IN_MEMORY_MB", str(text / 2e6))
    with pytest.raises(FormatError) as refused:
        ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    assert "the file expands to" in refused.value.reason
    assert "split it into smaller files, or raise HEADROOM_MAX_IN_MEMORY_MB" in \
        refused.value.reason
    monkeypatch.delenv("HEADROOM_MAX_IN_MEMORY_MB")
    [result] = ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    assert result["status"] == "ingested"


def _write(path, table, **kw) -> None:
    import pyarrow.parquet as pq

    pq.write_table(table, path, compression="zstd", **kw)


def test_parquet_values_not_rows_are_counted(con, tmp_path, monkeypatch):
    """Found by the break-it review: a list column's values, not its rows, are what a reader
    decodes (1,000 lists of 1 M zeros: 43 KB on disk, over 6 GB read); and a dictionary-encoded
    string is as long as its statistics say, whatever its bytes on disk. Scaled down with a
    10 MB limit: 10 lists of 200,000 values (16 MB decoded) and 20,000 rows of one 1,000-byte
    string (20 MB decoded) are refused from the footer; a footer over the read limit is refused
    before it is parsed."""
    import numpy as np
    import pyarrow as pa

    from analytics.ingest import rawfile

    monkeypatch.setenv("HEADROOM_MAX_IN_MEMORY_MB", "10")
    nested = tmp_path / "nested.parquet"
    offsets = pa.array(np.arange(0, 2_000_001, 200_000, dtype=np.int32))
    values = pa.ListArray.from_arrays(offsets, pa.array(np.zeros(2_000_000, np.int64)))
    _write(nested, pa.table({"ts": pa.array(np.full(10, 1_700_000_000_000_000),
                                            pa.timestamp("us")),
                             "prompt_tokens": np.full(10, 1), "completion_tokens": np.full(10, 1),
                             "extra": values}))
    assert nested.stat().st_size < 100_000
    with pytest.raises(FormatError, match="holds 10 rows x 4 columns: decoded, about 16 MB"):
        ingest.ingest_files(con, [ingest.FileIn(nested, nested.name)])

    strings = tmp_path / "strings.parquet"
    n = 20_000
    model = pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array(["x" * 1000]))
    _write(strings, pa.table({"ts": pa.array(np.full(n, 1_700_000_000_000_000),
                                             pa.timestamp("us")),
                              "prompt_tokens": np.full(n, 1), "completion_tokens": np.full(n, 1),
                              "model": model}))
    assert strings.stat().st_size < 100_000
    with pytest.raises(FormatError, match=r"holds 20,000 rows x 4 columns: decoded, about 2\d MB"):
        ingest.ingest_files(con, [ingest.FileIn(strings, strings.name)])

    monkeypatch.setattr(rawfile, "MAX_PARQUET_FOOTER", 4096)  # 16 MiB in use; 200 groups here
    groups = tmp_path / "groups.parquet"
    constant_parquet(groups, 2000, group=10)
    with pytest.raises(FormatError, match="the Parquet footer .* over the 0 MiB read"):
        ingest.ingest_files(con, [ingest.FileIn(groups, groups.name)])
    assert store.list_datasets(con).empty


def test_a_json_file_counts_ten_times_its_size(con, tmp_path, monkeypatch):
    """Found by the break-it review: a 150 MB vLLM-bench-style JSON peaked at 3.65 GB. JSON
    counts 10x its size against the in-memory limit: with the limit at 1 MB, the real-shaped
    vLLM bench result of ``../shared/cases`` padded to 0.2 MB is refused naming why; at the
    default it is read."""
    import json

    src = json.loads(case_file("19-vllm-bench-request-rate-no-concurrency.json").read_text())
    src["junk"] = [{}] * 50_000
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(src))
    monkeypatch.setenv("HEADROOM_MAX_IN_MEMORY_MB", "1")
    with pytest.raises(FormatError, match="of JSON, which a reader holds at 10-25x its size"):
        ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    monkeypatch.delenv("HEADROOM_MAX_IN_MEMORY_MB")
    [result] = ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    assert result["status"] == "ingested"
