"""Issue 16: inputs built to break the ingest (``../shared/cases/malformed/``, its README)
are refused cleanly -- exit 2 naming file, line and column, the store unchanged, no traceback --
and what a refusal echoes from a file is bounded."""

from __future__ import annotations

import json

import pytest
from conftest import SHARED_DATA
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
