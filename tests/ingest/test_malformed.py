"""Issue 16: inputs built to break the ingest (``../shared/cases/malformed/``, its README)
are refused cleanly -- exit 2 naming file, line and column, the store unchanged, no traceback --
and what a refusal echoes from a file is bounded."""

from __future__ import annotations

import json

import pytest
from conftest import REPO, SHARED_DATA
from harness import strict_loads

from analytics import cli, store
from analytics.ingest import files as ingest
from analytics.ingest.csvcheck import ECHO_REASON_CHARS
from analytics.ingest.formats import FormatError, parse_file

MALFORMED = SHARED_DATA.parent / "cases" / "malformed"


def _case(name: str):
    path = MALFORMED / name
    if not path.exists():
        pytest.fail(f"case file missing: {path}")
    return path


@pytest.mark.parametrize("name", ["m48_openmeteo_nested_10k.json",
                                  "m100_jsonl_nested_10k_first_line.jsonl"])
def test_json_nested_10k_deep_is_refused_not_a_recursion_error(tmp_path, capsys, name):
    db = tmp_path / "s.duckdb"
    assert cli.main(["--db", str(db), "ingest", str(_case(name))]) == 2
    doc = strict_loads(capsys.readouterr().out)
    assert doc["detail"]["line"] == 1 and "nested deeper" in doc["detail"]["reason"]
    with store.connect(db) as con:
        assert store.table_counts(con)["datasets"] == 0


@pytest.mark.parametrize("text", [
    "[" * 5000 + "]" * 5000 + "\n",                                   # a JSON array
    '{"timestamp": ' + "[" * 5000 + "]" * 5000 + "}\n",               # JSON Lines, Mooncake key
    '{"a": ' * 5000 + "1" + "}" * 5000,                                # objects, no newline
])
def test_other_deep_json_shapes_are_refused(tmp_path, text):
    path = tmp_path / "deep.jsonl"
    path.write_text(text)
    with pytest.raises(FormatError) as err:
        parse_file(path)
    assert err.value.line == 1


def test_first_run_bootstrap_survives_a_deep_json_file(tmp_path):
    """A file like m100 in the data folder must not break the first run of every session."""
    folder = tmp_path / "raw"
    folder.mkdir()
    (folder / "deep.jsonl").write_bytes(_case("m100_jsonl_nested_10k_first_line.jsonl")
                                        .read_bytes())
    (folder / "mooncake.jsonl").write_text(
        "".join(json.dumps({"timestamp": t, "input_length": 600, "output_length": 20,
                            "hash_ids": [1, 2]}) + "\n" for t in (0, 250, 900)))
    with store.connect(tmp_path / "s.duckdb") as con:
        results = ingest.bootstrap(con, folder)
        assert [(r["file"], r["status"]) for r in results] == [("mooncake.jsonl", "ingested")]


@pytest.mark.parametrize("header,row,column", [
    ("TIMESTAMP,ContextTokens,GeneratedTokens", "2023-11-16 18:15:46.6,{big},2", "ContextTokens"),
    ("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type",
     "5,ChatGPT,{big},1,2,API log", "Request tokens"),
])
def test_a_huge_bad_cell_gives_a_short_message(tmp_path, header, row, column):
    """A 5 MB cell (the probe used 100 MB) is echoed as a few dozen characters."""
    big = "9" * 5_000_000 + "x"
    path = tmp_path / "big.csv"
    path.write_text(f"{header}\n{row.format(big='1')}\n{row.format(big=big)}\n")
    with pytest.raises(FormatError) as err:
        parse_file(path)
    assert (err.value.line, err.value.column) == (3, column)
    assert len(str(err.value)) < ECHO_REASON_CHARS + 200
    assert "chars]" in str(err.value)


@pytest.mark.parametrize("name,line,column", [("m13_azure_far_past_0001.csv", 2, "TIMESTAMP"),
                                              ("m17_canonical_ts_year_3000.csv", 3, "ts")])
def test_implausible_timestamps_are_refused_with_the_range(tmp_path, capsys, name, line, column):
    db = tmp_path / "s.duckdb"
    assert cli.main(["--db", str(db), "ingest", str(_case(name))]) == 2
    detail = strict_loads(capsys.readouterr().out)["detail"]
    assert (detail["line"], detail["column"]) == (line, column)
    assert "1980-01-01 to 2099-12-31 UTC" in detail["reason"]


@pytest.mark.parametrize("text,column", [
    # DCGM: epoch milliseconds of year 3000 (caught by the check every parsed file passes)
    ('DCGM_FI_DEV_POWER_USAGE{gpu="0",Hostname="n1"} 100.5 1715342400000\n'
     'DCGM_FI_DEV_POWER_USAGE{gpu="0",Hostname="n1"} 101.5 32503680000000\n', "timestamp_ms"),
    # nvidia-smi: a 1970 clock (an unset RTC)
    ("timestamp, index, power.draw [W]\n1970/01/01 00:00:05.000, 0, 100.0 W\n", "timestamp"),
])
def test_implausible_times_of_other_formats_are_refused(tmp_path, text, column):
    path = tmp_path / ("dcgm.prom" if "DCGM" in text else "smi.csv")
    path.write_text(text)
    with pytest.raises(FormatError) as err:
        parse_file(path)
    assert "outside the accepted range" in err.value.reason and err.value.column == column
    assert err.value.line == 2


def test_zero_width_bin_is_refused_not_a_zero_division(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    assert cli.main(["--db", str(db), "ingest",
                     str(_case("m93_canonical_demand_bin_zero.csv"))]) == 2
    detail = strict_loads(capsys.readouterr().out)["detail"]
    assert (detail["line"], detail["column"]) == (2, "bin_s")


def test_a_grid_over_the_bin_cap_asks_for_a_coarser_bin(tmp_path, capsys):
    """Two timestamps 30 years apart (both accepted) at 10 s bins would be 95 M bins."""
    path = tmp_path / "span.csv"
    path.write_text("ts,prompt_tokens,completion_tokens\n"
                    "1990-01-01 00:00:00,10,2\n2020-01-01 00:00:00,10,2\n")
    db = str(tmp_path / "s.duckdb")
    assert cli.main(["--db", db, "ingest", str(path)]) == 0
    capsys.readouterr()
    assert cli.main(["--db", db, "grid", "span", "--bin", "10s"]) == 2
    err = strict_loads(capsys.readouterr().out)["error"]
    assert "2,000,000-bin cap" in err and "choose 15min or coarser" in err
    assert cli.main(["--db", db, "grid", "span", "--bin", "1h"]) == 0
    assert strict_loads(capsys.readouterr().out)["bins"] == 262_969


@pytest.mark.parametrize("name,table,rows", [
    ("azure_llm/AzureLLMInferenceTrace_code.csv", "requests", 8819),
    ("sustaindc_dcrl/CarbonIntensity/CISO_NG_&_avgCI.csv", "carbon_intensity", 8760),
])
def test_a_pandas_index_column_is_dropped(tmp_path, name, table, rows):
    """Issue 16 item 8: ``df.to_csv(path)`` adds an unnamed index column; the file is read as
    the format it otherwise is, with a note, the lines unchanged (plain and gzip)."""
    import gzip

    import pandas as pd
    from conftest import shared

    src = shared(name)
    frame = pd.read_csv(src)
    plain_csv = tmp_path / "with_index.csv"
    frame.to_csv(plain_csv)  # the index column, header ''
    gz = tmp_path / "with_index.csv.gz"
    gz.write_bytes(gzip.compress(plain_csv.read_bytes()))
    reread = tmp_path / "reread.csv"
    pd.read_csv(plain_csv).to_csv(reread, index=False)  # header 'Unnamed: 0'
    for path in (plain_csv, gz, reread):
        parsed = parse_file(path)
        assert (parsed.table, parsed.frame.height) == (table, rows)
        assert "index column" in parsed.warnings[0]
    bad = plain_csv.read_text().replace("\n5,", "\nfive,", 1)  # not an index: still refused
    (tmp_path / "bad.csv").write_text(bad)
    with pytest.raises(FormatError):
        parse_file(tmp_path / "bad.csv")


def test_a_decompression_bomb_is_refused_while_streaming(tmp_path, monkeypatch):
    """Issue 16 item 2: the cap is on the decompressed bytes (and the expansion ratio), checked
    while streaming in 1 MiB chunks, before any reader holds the file in memory."""
    import gzip
    import subprocess
    import sys

    header = b"TIMESTAMP,ContextTokens,GeneratedTokens\n"
    line = b"2023-11-16 18:15:46.6,100,20\n"
    bomb = tmp_path / "bomb.csv.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as fh:  # 90 MB of text in well under 1 MB
        fh.write(header)
        for _ in range(90):
            fh.write(line * (1_000_000 // len(line)))
    assert bomb.stat().st_size < 1_000_000
    with pytest.raises(FormatError, match="decompression bomb") as err:
        parse_file(bomb)
    assert "over 200x its compressed" in err.value.reason and err.value.line == 1
    # peak memory of a fresh process refusing it: the 90 MB never sit in memory at once
    probe = ("import resource, sys\nfrom analytics.ingest.formats import parse_file\n"
             "try:\n    parse_file(sys.argv[1])\nexcept (ValueError, OSError):\n    pass\n"
             "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", probe, str(bomb)], capture_output=True,
                         text=True, cwd=REPO, timeout=120)
    baseline = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "missing.csv")],
                              capture_output=True, text=True, cwd=REPO, timeout=120)
    grown_mb = (int(out.stdout.split()[-1]) - int(baseline.stdout.split()[-1])) / 1024
    assert grown_mb < 40, grown_mb
    monkeypatch.setenv("HEADROOM_MAX_DECOMPRESSED_MB", "1")  # the absolute cap, any ratio
    small = tmp_path / "small.csv.gz"
    small.write_bytes(gzip.compress(header + line * 60_000, compresslevel=1))
    with pytest.raises(FormatError, match="over the 1 MB limit"):
        parse_file(small)


#: The README of ``../shared/cases/malformed``, as (file, refused at (line, column) or None for
#: accepted, a phrase of the message or of the warning that names the line)
CORPUS = [
    ("m09_duplicate_header_names.csv", (1, "ContextTokens"), "appears 2 times (fields 2, 3)"),
    ("m13_azure_far_past_0001.csv", (2, "TIMESTAMP"), "outside the accepted range"),
    ("m17_canonical_ts_year_3000.csv", (3, "ts"), "outside the accepted range"),
    ("m29_unterminated_quote_line100.csv", (100, 1), "a quote opens on this line"),
    ("m48_openmeteo_nested_10k.json", (1, 1), "nested deeper"),
    ("m57_prom_nan_value.prom", None, "line 2, column DCGM_FI_DEV_POWER_USAGE"),
    ("m59_prom_negative_power.prom", (2, "DCGM_FI_DEV_POWER_USAGE"), "below 0"),
    ("m65_smi_nan_power.csv", None, "lines 2, 3, column power.draw"),
    ("m69_sacct_end_before_start.txt", None, "line 2, column End: End before Start"),
    ("m73_sacct_negative_gpus.txt", (2, "AllocTRES"), "is negative"),
    ("m79_epw_temp_nan.epw", (11, "field 7 dry bulb"), "not a finite number"),
    ("m89_parquet_tokens_float_fraction.parquet", (1, "prompt_tokens"), "not a whole number"),
    ("m93_canonical_demand_bin_zero.csv", (2, "bin_s"), "out of range"),
    ("m100_jsonl_nested_10k_first_line.jsonl", (1, 1), "nested deeper"),
]


@pytest.mark.parametrize("name,refused,phrase", CORPUS, ids=[c[0][:3] for c in CORPUS])
def test_malformed_corpus(tmp_path, capsys, name, refused, phrase):
    """Each file exits 2 naming line and column with the store unchanged, or is accepted with
    a warning that names the line; never a traceback."""
    db = tmp_path / "s.duckdb"
    with store.connect(db) as con:
        before = store.table_counts(con)
    code = cli.main(["--db", str(db), "ingest", str(_case(name))])
    doc = strict_loads(capsys.readouterr().out)
    if refused:
        assert code == 2, doc
        assert (doc["detail"]["line"], doc["detail"]["column"]) == refused
        assert phrase in doc["detail"]["reason"]
        with store.connect(db) as con:
            assert store.table_counts(con) == before
    else:
        assert code == 0 and doc[0]["status"] == "ingested"
        assert any(phrase in w["text"] for w in doc[0]["warnings"]), doc[0]["warnings"]
