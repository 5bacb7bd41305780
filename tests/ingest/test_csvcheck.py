"""The shared CSV validator (analytics.ingest.csvcheck) on bytes and paths, and the one sha256
helper (analytics.ingest.digest)."""

from __future__ import annotations

import gzip
import hashlib
import io

import polars as pl
import pytest
from conftest import shared

from analytics import store
from analytics.ingest import csvcheck, digest
from analytics.ingest import files as ingest

PROFILE = (b"model,gpu,phase,sm_share,clock_mhz,latency_ms,power_w\n"
           b"llama-8b,H100,prefill,1.0,1980,41.5,620\n"
           b"llama-8b,H100,decode,0.5,1410,12.25,300\n")
SPEC = {"model": pl.String, "gpu": pl.String, "phase": pl.String, "sm_share": pl.Float64,
        "clock_mhz": pl.Float64, "latency_ms": pl.Float64, "power_w": pl.Float64}


def _check_profile(source, display="profile.csv") -> pl.DataFrame:
    frame = csvcheck.read_csv_checked(source, display, SPEC)
    csvcheck.check_allowed(frame, "phase", ("prefill", "decode"), display)
    csvcheck.check_range(frame, "sm_share", display, low=0.0, high=1.0, low_open=True)
    csvcheck.check_range(frame, ["clock_mhz", "latency_ms", "power_w"], display, low=0.0,
                         low_open=True)
    return frame


def test_bytes_and_path_read_the_same(tmp_path):
    path = tmp_path / "profile.csv"
    path.write_bytes(PROFILE)
    from_bytes, from_path = _check_profile(PROFILE), _check_profile(path)
    assert from_bytes.equals(from_path)
    assert from_bytes["latency_ms"].to_list() == [41.5, 12.25]
    assert csvcheck.read_head(gzip.compress(PROFILE), "p.csv.gz") == PROFILE.decode()


@pytest.mark.parametrize(("old", "new", "line", "column", "reason"), [
    (b"decode,0.5", b"decoding,0.5", 3, "phase", "'decoding' is not one of prefill, decode"),
    (b"decode,0.5", b"decode,1.5", 3, "sm_share", "1.5 is out of range (0.0, 1.0]"),
    (b"prefill,1.0,1980", b"prefill,1.0,0", 2, "clock_mhz", "0.0 is out of range (0.0, inf]"),
    (b",41.5,", b",fast,", 2, "latency_ms", "'fast' is not a number"),
    (b"power_w\n", b"watts\n", 1, "power_w", "missing column 'power_w'"),
])
def test_profile_rejections_name_line_and_column(old, new, line, column, reason):
    with pytest.raises(csvcheck.FormatError) as exc:
        _check_profile(PROFILE.replace(old, new), "mine.csv")
    assert (exc.value.file, exc.value.line, exc.value.column) == ("mine.csv", line, column)
    assert exc.value.reason.startswith(reason)
    assert str(exc.value).startswith(f"mine.csv: line {line}, column {column}: ")


def test_short_row_rejected_alike_from_bytes_and_path(tmp_path):
    short = PROFILE + b"llama-8b,H100,decode,0.5\n"
    path = tmp_path / "profile.csv"
    path.write_bytes(short)
    errors = []
    for source in (short, path):
        with pytest.raises(csvcheck.FormatError) as exc:
            _check_profile(source)
        errors.append(exc.value.as_dict())
    # a short row is refused as such, not padded with an empty cell (issue 16 corpus)
    assert errors[0] == errors[1] == {"file": "profile.csv", "line": 4, "column": 5,
                                      "reason": "row has 4 fields, header has 7"}


def test_copy_hashed_is_the_ledger_hash(con, tmp_path):
    src = shared("azure_llm/AzureLLMInferenceTrace_conv.csv")
    copy = tmp_path / "upload.csv"
    with open(src, "rb") as fin, open(copy, "wb") as fout:
        hashed = digest.copy_hashed(fin, fout, chunk_bytes=1 << 16)
    assert hashed == digest.file_sha256(src) == digest.file_sha256(copy)
    assert len(hashed) == 64
    res = ingest.ingest_files(con, [ingest.FileIn(copy, src.name, sha256=hashed)])
    assert res[0]["rows"] == 19366
    assert store.dataset(con, "AzureLLMInferenceTrace_conv")["sha256"] == hashed
    again = ingest.ingest_files(con, [ingest.FileIn(src, src.name)])  # hashed from the file
    assert again[0]["status"] == "duplicate"


def test_copy_hashed_from_memory():
    buf = io.BytesIO()
    assert digest.copy_hashed(io.BytesIO(PROFILE), buf, chunk_bytes=7) == \
        hashlib.sha256(PROFILE).hexdigest()
    assert buf.getvalue() == PROFILE
