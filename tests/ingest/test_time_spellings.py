"""Issue 28 item 1: the text time spellings live in one module (analytics.timelayouts), and every
road that reads a request trace's time gives the same answer for each: the checked canonical
CSV reader, the same file attached in place (DuckDB SQL), the checked Azure reader and the Azure
one road (DuckDB in the store's transaction, which leaves a spelling it does not read to the
checked reader). Each spelling is written as one row of a real Azure trace's first rows, so
the streamed plan sees the shape it sees in the release."""

from __future__ import annotations

from datetime import datetime

import pytest
from conftest import shared

from analytics import store
from analytics.config import ParseOptions
from analytics.ingest import files as ingest
from analytics.ingest.attach import attach
from analytics.ingest.formats import FormatError, parse_file

#: spelling -> the naive UTC time it is, or None where it is no time (every road refuses)
SPELLINGS = {
    "2023-11-16 18:15:46.6805900": datetime(2023, 11, 16, 18, 15, 46, 680590),
    "2023-11-16 18:15:46": datetime(2023, 11, 16, 18, 15, 46),
    "2023-11-16T18:15:46": datetime(2023, 11, 16, 18, 15, 46),
    "2023-11-16t18:15:46.25": datetime(2023, 11, 16, 18, 15, 46, 250000),
    "2023-11-16 18:15": datetime(2023, 11, 16, 18, 15),
    " 2023-11-16 18:15:46 ": datetime(2023, 11, 16, 18, 15, 46),
    "2023-11-16 18:15:46.123456789": datetime(2023, 11, 16, 18, 15, 46, 123456),
    "2023-11-16 18:15:46+00:00": datetime(2023, 11, 16, 18, 15, 46),
    "2023-11-16 18:15:46.123456789+01:00": datetime(2023, 11, 16, 17, 15, 46, 123456),
    "2023-11-16 18:15:46.5+01:00": datetime(2023, 11, 16, 17, 15, 46, 500000),
    "2023-11-16T18:15:46Z": datetime(2023, 11, 16, 18, 15, 46),
    "2023-11-16 18:15:46-05": datetime(2023, 11, 16, 23, 15, 46),
    "2023-11-16 18:15:46+0530": datetime(2023, 11, 16, 12, 45, 46),
    "2023-11-16 18:15+02:00": datetime(2023, 11, 16, 16, 15),
    "2023-11-16": None,
    "16/11/2023 18:15:46": None,
    "2023-11-16 18:15:46 UTC": None,
    "2023-11-16 25:15:46": None,
    "2023-11-16 18:15:46+99": None,  # offsets no clock has (DuckDB's %z took them)
    "2023-11-16 18:15:46+24:00": None,
    "2023-11-16 18:15:46+12:60": None,
}


@pytest.fixture(scope="module")
def tail_rows():
    """Two real Azure conv rows after the spelling's row (their times later than any spelling:
    the trace's own 18:15:50 onward), as ``(time text, prompt, completion)``."""
    lines = shared("azure_llm/AzureLLMInferenceTrace_conv.csv").read_text().splitlines()
    return [tuple(line.split(",")) for line in lines[2:4]]


def _answer(read) -> datetime | None | str:
    try:
        return read()
    except FormatError as exc:
        return None if exc.line == 2 and exc.column in ("ts", "TIMESTAMP") else f"other: {exc}"


def _spelled(rows) -> datetime:
    return rows.loc[rows["prompt_tokens"] == 7777, "ts"].iloc[0].to_pydatetime()


def _roads(tmp_path, spelling: str, tail) -> dict:
    canon = tmp_path / "canon" / "part=0" / "trace.csv"
    canon.parent.mkdir(parents=True)
    body = "".join(f"{t},{p},{c}\n" for t, p, c in tail)
    text = f'"{spelling}",7777,44\n' + body  # 7777: the spelling's row (no real row has it)
    canon.write_text("ts,prompt_tokens,completion_tokens\n" + text)
    azure = tmp_path / "azure.csv"
    azure.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + text)
    opts = ParseOptions(max_backstep_s=1e9)

    def checked(path, fmt):
        return parse_file(path, path.name, fmt, opts).frame["ts"][0]

    def attached():
        with store.connect(tmp_path / "attached.duckdb") as con:
            attach(con, "t", str(tmp_path / "canon" / "part=*" / "*.csv"))
            return _spelled(store.dataset_rows(con, "t"))

    def one_road():
        with store.connect(tmp_path / "road.duckdb") as con:
            got = ingest.ingest_files(con, [ingest.FileIn(azure, azure.name)], opts=opts)
            assert got[0]["format"] == "azure_llm"
            return _spelled(store.dataset_rows(con, got[0]["dataset"]))

    return {"canonical, checked": _answer(lambda: checked(canon, "canonical")),
            "canonical, attached": _answer(attached),
            "azure, checked": _answer(lambda: checked(azure, None)),
            "azure, one road": _answer(one_road)}


@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_every_road_reads_each_spelling_alike(spelling, tmp_path, tail_rows):
    got = _roads(tmp_path, spelling, tail_rows)
    want = SPELLINGS[spelling]
    if spelling.endswith(".123456789"):  # the one road's layout read rounds what is below a
        assert got.pop("azure, one road") == want.replace(microsecond=123457)  # microsecond
    assert got == dict.fromkeys(got, want), got
