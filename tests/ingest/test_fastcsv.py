"""Issue 15: the streamed ingest of large request traces (analytics.ingest.fastcsv) stores the
same rows and warnings as the checked reader, and every file it does not judge is refused by
the checked reader with its line, column and reason, the store unchanged.

The real staged files are small, so the size threshold is lowered to 0 and batches are made a
few rows long (the time-order check and the notes then cross batch boundaries)."""

from __future__ import annotations

import polars as pl
import pytest
from conftest import shared

from analytics import store
from analytics.ingest import fastcsv
from analytics.ingest import files as ingest
from analytics.ingest.formats import FormatError, parse_file


@pytest.fixture
def fast(monkeypatch):
    monkeypatch.setattr(fastcsv, "FAST_MIN_BYTES", 0)
    monkeypatch.setattr(fastcsv, "BATCH_ROWS", 7)


@pytest.fixture
def no_fallback(monkeypatch):
    """Fail when the streamed file goes back to the checked reader."""
    def refuse(item):
        raise AssertionError("the fast path refused the file")
    monkeypatch.setattr(ingest, "_checked_item", refuse)


def _stored(con, name: str) -> pl.DataFrame:
    """The dataset's rows as the ``requests`` view shows them, in file order: read from the
    stored table that holds them (a view has no ``rowid``) with the view's columns."""
    table = _stored_in(con, name)
    rows = con.sql(f"SELECT {_AS_VIEW[table]} FROM {table} t JOIN datasets d USING (dataset_id) "
                   "WHERE d.name = ? ORDER BY t.rowid", params=[name]).pl()
    return rows.with_columns(pl.col("ts").cast(pl.Datetime("us")))


#: The ``requests`` view's columns over each stored table (migrations 13 and 18).
_AS_VIEW = {"requests_full": "t.* EXCLUDE (dataset_id)",
            "requests_tokens": "ts, NULL::VARCHAR AS model, prompt_tokens, completion_tokens, "
                               "false AS failed, NULL::VARCHAR AS session_id, "
                               "NULL::DOUBLE AS latency_s, NULL::DOUBLE AS gpu_s",
            "requests_models": "t.* EXCLUDE (dataset_id), NULL::VARCHAR AS session_id, "
                               "NULL::DOUBLE AS latency_s, NULL::DOUBLE AS gpu_s"}


def _stored_in(con, name: str) -> str:
    """The one stored table that holds the dataset's request rows."""
    [table] = [t for t in _AS_VIEW if con.execute(
        f"SELECT count(*) FROM {t} JOIN datasets d USING (dataset_id) WHERE d.name = ?",
        [name]).fetchall()[0][0]]
    return table


def _checked(path) -> tuple[pl.DataFrame, tuple]:
    parsed = parse_file(path, path.name, stream=False)
    return parsed.frame, parsed.warnings


def _text(path, edit) -> str:
    return edit(path.read_text())


@pytest.mark.parametrize("rel", ["burstgpt/BurstGPT_1_head400.csv",
                                 "burstgpt/BurstGPT_3_slice400.csv",
                                 "azure_llm/AzureLLMInferenceTrace_code.csv"])
def test_streamed_rows_and_warnings_equal_the_checked_reader(fast, no_fallback, con, tmp_path,
                                                              rel):
    path = shared(rel)
    if "Azure" in rel:  # a few hundred rows suffice; an empty GeneratedTokens gives a note
        lines = path.read_text().splitlines()[:300]
        lines[5] = lines[5].rsplit(",", 1)[0] + ","
        path = tmp_path / path.name
        path.write_text("\n".join(lines) + "\n")
    if "BurstGPT_3" in rel:  # an empty Session ID and Elapsed time on two lines
        lines = path.read_text().splitlines()
        cells = lines[9].split(",")
        cells[1] = cells[2] = ""
        lines[9] = ",".join(cells)
        path = tmp_path / path.name
        path.write_text("\n".join(lines) + "\n")
    assert parse_file(path, stream=True).stream is not None  # the streamed path is taken
    [result] = ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    frame, warnings = _checked(path)
    assert _stored(con, result["dataset"]).equals(frame)
    assert result["rows"] == frame.height
    assert result["ts_min"] == frame["ts"].min().isoformat()
    assert result["ts_max"] == frame["ts"].max().isoformat()
    report = [w["text"] for w in result["warnings"]]
    assert report == list(warnings)
    checked_notes = [(w.column, w.lines, w.count) for w in warnings if hasattr(w, "lines")]
    streamed = [(w["column"], tuple(w["lines"]), w["count"]) for w in result["warnings"]
                if w["lines"]]
    assert streamed == [n for n in checked_notes if n[1]]
    if "BurstGPT_3" in rel or "Azure" in rel:
        assert streamed  # the notes name their lines


_BURST = "burstgpt/BurstGPT_1_head400.csv"
_AZURE = "azure_llm/AzureLLMInferenceTrace_code.csv"


def _line(text: str, n: int, edit) -> str:
    lines = text.splitlines()
    lines[n - 1] = edit(lines[n - 1])
    return "\n".join(lines) + "\n"


def _cell(col: int, value: str):
    def edit(line: str) -> str:
        cells = line.split(",")
        cells[col] = value
        return ",".join(cells)
    return edit


@pytest.mark.parametrize("rel, edit", [
    (_BURST, lambda t: _line(t, 50, _cell(2, "12.5"))),          # fractional count
    (_BURST, lambda t: _line(t, 60, _cell(4, "1"))),             # Total != Request + Response
    (_BURST, lambda t: _line(t, 70, _cell(0, "-3"))),            # negative time
    (_BURST, lambda t: _line(t, 80, _cell(0, "5"))),             # steps back beyond tolerance
    (_BURST, lambda t: _line(t, 90, _cell(3, ""))),              # empty required cell
    (_BURST, lambda t: _line(t, 95, lambda s: s + ",extra")),    # ragged row
    (_BURST, lambda t: _line(t, 99, _cell(0, "inf"))),           # non-finite time
    (_AZURE, lambda t: _line(t, 40, _cell(0, "2023-11-16 25:00:00"))),  # not a time
    (_AZURE, lambda t: _line(t, 41, _cell(0, "2023-11-16"))),    # a date DuckDB would take
    (_AZURE, lambda t: _line(t, 42, _cell(1, "7.5"))),           # fractional count
    (_AZURE, lambda t: _line(t, 43, _cell(2, "-5"))),            # negative count
    (_AZURE, lambda t: _line(t, 44, _cell(0, "1900-01-01 00:00:00"))),  # outside the range
    (_AZURE, lambda t: _line(t, 45, _cell(1, "inf"))),           # non-finite count
    (_AZURE, lambda t: _line(t, 46, _cell(2, "nan"))),           # not a number
    (_AZURE, lambda t: _line(t, 47, _cell(1, ""))),              # empty required count
    (_AZURE, lambda t: _line(t, 48, _cell(1, "-2.5"))),          # negative and fractional
    # an empty GeneratedTokens sends the file to the batches, which meet the bad count
    (_AZURE, lambda t: _line(_line(t, 30, _cell(2, "")), 50, _cell(1, "-4"))),
    (_AZURE, lambda t: _line(_line(t, 30, _cell(2, "")), 51, _cell(2, "inf"))),
])
def test_refusals_are_the_checked_readers_and_leave_the_store_as_it_was(
        fast, con, tmp_path, rel, edit):
    src = shared(rel)
    path = tmp_path / src.name
    path.write_text(edit("\n".join(src.read_text().splitlines()[:120]) + "\n"))
    with pytest.raises(FormatError) as checked:
        parse_file(path, path.name, stream=False)
    before = con.execute("SELECT count(*) FROM requests").fetchone()[0]
    version = store.data_version(con)
    with pytest.raises(FormatError) as streamed:
        ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    assert streamed.value.as_dict() == checked.value.as_dict()
    assert con.execute("SELECT count(*) FROM requests").fetchone()[0] == before
    assert con.execute("SELECT count(*) FROM datasets").fetchone()[0] == 0
    assert store.data_version(con) == version


def test_a_file_the_fast_reader_leaves_but_the_checked_accepts_is_stored(fast, con, tmp_path):
    """A timestamp in ISO ``T`` form is not in the layouts the fast path reads: the checked
    reader (which accepts it) stores the file."""
    src = shared(_AZURE)
    path = tmp_path / src.name
    text = "\n".join(src.read_text().splitlines()[:50]) + "\n"
    path.write_text(_line(text, 10, lambda s: s.replace(" ", "T", 1)))
    [result] = ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    frame, warnings = _checked(path)
    assert result["rows"] == frame.height == 49
    assert _stored(con, result["dataset"]).equals(frame)
    assert [w["text"] for w in result["warnings"]] == list(warnings)


def test_every_size_and_form_takes_the_one_road(tmp_path):
    """Issue 28: a 400-row trace, plain, gzip, with a byte-order mark, UTF-16 or with a pandas
    index column, is read by DuckDB (the streamed road; the last two from a UTF-8 copy made as
    a stream first)."""
    import gzip

    src = shared(_BURST)
    plain, packed, bom = (tmp_path / n for n in ("b.csv", "b.csv.gz", "bom.csv"))
    plain.write_bytes(src.read_bytes())
    packed.write_bytes(gzip.compress(src.read_bytes()))
    bom.write_bytes(b"\xef\xbb\xbf" + src.read_bytes())
    for path in (plain, packed, bom):
        assert parse_file(path, stream=True).stream is not None, path.name
    utf16, indexed = tmp_path / "u16.csv", tmp_path / "idx.csv"
    utf16.write_bytes(src.read_text().encode("utf-16"))
    lines = src.read_text().splitlines()
    indexed.write_text("\n".join([f",{lines[0]}", *(f"{i},{row}" for i, row in
                                                    enumerate(lines[1:]))]) + "\n")
    for path in (utf16, indexed):
        assert parse_file(path, stream=True).stream is not None, path.name


@pytest.mark.parametrize("offset", ["+00:00", "+02:00", "-0530"])
def test_azure_2024_offsets_are_converted_as_the_checked_reader_does(fast, no_fallback, con,
                                                                    tmp_path, offset):
    """The 2024 release writes ``+00:00`` (six fraction digits or none): with an offset on the
    first value the fast path reads every value with one, converted to UTC."""
    lines = shared(_AZURE).read_text().splitlines()[:60]
    body = [f"{ln.split(',', 1)[0][:26]}{offset},{ln.split(',', 1)[1]}" for ln in lines[1:]]
    body[3] = body[3].replace(body[3][19:26], "", 1)  # a value with no fraction
    path = tmp_path / "AzureLLMInferenceTrace_code_1week.csv"
    path.write_text("\n".join([lines[0], *body]) + "\n")
    [result] = ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    frame, warnings = _checked(path)
    assert _stored(con, result["dataset"]).equals(frame)
    assert [w["text"] for w in result["warnings"]] == list(warnings)


@pytest.mark.parametrize("limit", [None, "3.0 GiB"])
def test_streamed_ingest_bounds_then_restores_the_store_memory_limit(fast, no_fallback, con,
                                                                     limit):
    """The store's memory_limit is held at STREAM_MEMORY while a streamed file is written
    (flat peak RSS, issue 15) and is the caller's again afterwards, default or set."""
    if limit:
        con.execute(f"SET memory_limit = '{limit}'")
    before = con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    seen = []
    real = fastcsv.Streamed.direct_sql  # the file's one road: the direct read (issue 28)

    def direct_sql(self, cur):
        seen.append(con.execute("SELECT current_setting('memory_limit')").fetchone()[0])
        return real(self, cur)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fastcsv.Streamed, "direct_sql", direct_sql)
        [result] = ingest.ingest_files(con, [ingest.FileIn(shared(_BURST), "b.csv")])
    assert result["status"] == "ingested" and result["rows"] > 0
    assert seen == ["244.1 MiB"]  # store.writes.STREAM_MEMORY, as DuckDB prints 256 MB
    assert con.execute("SELECT current_setting('memory_limit')").fetchone()[0] == before


@pytest.fixture
def no_batches(monkeypatch):
    """Fail when the streamed file is read batch by batch (not by the direct INSERT)."""
    def refuse(self):
        raise AssertionError("the direct read left the file to the batches")
    monkeypatch.setattr(fastcsv.Streamed, "reader", refuse)


def _azure_head(tmp_path, rows: int = 80, edit=None):
    lines = shared(_AZURE).read_text().splitlines()[:rows + 1]
    text = "\n".join(lines) + "\n"
    path = tmp_path / shared(_AZURE).name
    path.write_text(edit(text) if edit else text)
    return path


def test_a_clean_azure_trace_is_one_insert_with_the_checked_readers_rows(
        fast, no_fallback, no_batches, con, tmp_path):
    """Issue 15: DuckDB reads and stores a clean 2023 trace by one INSERT ... SELECT (no
    batch passes through Python); rows, span and warnings are the checked reader's."""
    path = _azure_head(tmp_path)
    [result] = ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    frame, warnings = _checked(path)
    assert _stored(con, result["dataset"]).equals(frame)
    assert (result["rows"], result["ts_min"], result["ts_max"]) == (
        frame.height, frame["ts"].min().isoformat(), frame["ts"].max().isoformat())
    assert [w["text"] for w in result["warnings"]] == list(warnings)
    # its rows fill only time and tokens: kept in the narrow table, shown by the view with
    # failed false and the other columns empty, as the checked reader's frame has them
    assert _stored_in(con, result["dataset"]) == "requests_tokens"
    assert frame["failed"].to_list() == [False] * frame.height and frame["model"].null_count() \
        == frame.height


def test_a_step_back_within_tolerance_goes_to_the_batches_which_count_it(
        fast, no_fallback, con, tmp_path):
    """A row earlier than the one before (within the tolerance) stops the direct read; the
    batches store the file with the checked reader's count of steps back."""
    def swap(text):
        lines = text.splitlines()
        lines[20], lines[21] = lines[21], lines[20]
        return "\n".join(lines) + "\n"
    path = _azure_head(tmp_path, edit=swap)
    [result] = ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    frame, warnings = _checked(path)
    assert _stored(con, result["dataset"]).equals(frame)
    assert [w["text"] for w in result["warnings"]] == list(warnings)
    assert any("step back in time" in w for w in warnings)


def test_a_time_out_of_range_found_on_the_stored_rows_is_named_by_the_checked_reader(
        fast, con, tmp_path):
    """A 2023-layout time before 1980 passes DuckDB's reader; the check of the stored rows
    refuses it, the transaction rolls back and the checked reader names line and column."""
    path = _azure_head(tmp_path, edit=lambda t: _line(t, 30, _cell(0, "1970-01-01 00:00:00.0000000")))
    with pytest.raises(FormatError) as checked:
        parse_file(path, path.name, stream=False)
    with pytest.raises(FormatError) as streamed:
        ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    assert streamed.value.as_dict() == checked.value.as_dict()
    assert con.execute("SELECT count(*) FROM requests").fetchone()[0] == 0
    assert con.execute("SELECT count(*) FROM datasets").fetchone()[0] == 0


def test_a_file_read_again_after_another_files_refusal_counts_from_its_first_line(
        fast, no_fallback, con, tmp_path):
    """One ingest of a BurstGPT file (batches) and an Azure trace whose direct read goes to the
    batches: the transaction runs again, and the BurstGPT file's second reading starts afresh
    (rows, time order, notes), so both datasets equal the checked reader's."""
    lines = shared("burstgpt/BurstGPT_3_slice400.csv").read_text().splitlines()[:60]
    cells = lines[9].split(",")
    cells[1] = ""
    lines[9] = ",".join(cells)
    burst = tmp_path / "b.csv"
    burst.write_text("\n".join(lines) + "\n")

    def swap(text):
        rows = text.splitlines()
        rows[20], rows[21] = rows[21], rows[20]
        return "\n".join(rows) + "\n"
    azure = _azure_head(tmp_path, edit=swap)
    results = ingest.ingest_files(con, [ingest.FileIn(burst, burst.name),
                                        ingest.FileIn(azure, azure.name)])
    for path, result in zip([burst, azure], results, strict=True):
        frame, warnings = _checked(path)
        assert result["rows"] == frame.height
        assert _stored(con, result["dataset"]).equals(frame)
        assert [w["text"] for w in result["warnings"]] == list(warnings)
        assert [tuple(w["lines"]) for w in result["warnings"]] == [
            tuple(getattr(w, "lines", ()) or ()) for w in warnings]


def test_the_direct_read_converts_offsets_to_utc_whatever_the_stores_time_zone(
        fast, no_fallback, no_batches, con, tmp_path):
    """The direct read runs in the store's connection: a session ``TimeZone`` other than UTC
    does not shift the 2024 release's times (``+02:00`` read as UTC, not as local time)."""
    con.execute("SET GLOBAL TimeZone = 'Europe/Berlin'")
    lines = shared(_AZURE).read_text().splitlines()[:60]
    body = [f"{ln.split(',', 1)[0][:26]}+02:00,{ln.split(',', 1)[1]}" for ln in lines[1:]]
    path = tmp_path / "AzureLLMInferenceTrace_code_1week.csv"
    path.write_text("\n".join([lines[0], *body]) + "\n")
    [result] = ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    frame, _ = _checked(path)
    assert _stored(con, result["dataset"]).equals(frame)
    assert result["ts_min"] == frame["ts"].min().isoformat()


@pytest.mark.parametrize("newline", [True, False])
def test_a_last_line_past_the_line_limit_is_refused_not_dropped(con, tmp_path, newline):
    """Issue 34 item 10: DuckDB's reader silently dropped a file's last line of over ~30 MB
    (exit 0, the row gone). A 70 MB BurstGPT-shaped file (real rows repeated) whose last line is
    3 MB is refused naming that line; the store stays empty."""
    real = shared("burstgpt/BurstGPT_1_head400.csv").read_bytes()
    header, body = real.split(b"\n", 1)
    body = body.rstrip(b"\n") + b"\n"
    path = tmp_path / "long-last-line.csv"
    repeats = 70_000_000 // len(body) + 1
    last = b"19444444.0,x," + b"G" * 3_000_000 + b",ChatGPT,1,1,2,Conversation log"
    with open(path, "wb") as out:
        out.write(header + b"\n" + body * repeats + last + (b"\n" if newline else b""))
    rows = body.count(b"\n") * repeats
    assert path.stat().st_size >= fastcsv.FAST_MIN_BYTES  # the streamed road's file
    with pytest.raises(FormatError) as refused:
        ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    assert refused.value.line == rows + 2  # the header, the rows, then the long one
    assert f"is {len(last):,} bytes long, over the 2,097,152 bytes" in refused.value.reason
    assert store.list_datasets(con).empty


@pytest.mark.parametrize("bad, column, reason", [
    ("{ts},1393", 3, "row has 2 fields, header has 3"), (",", 3, "row has 2 fields, header has 3")])
def test_a_ragged_row_in_a_file_too_large_for_the_checked_walk_is_named(con, tmp_path,
                                                                       monkeypatch, bad,
                                                                       column, reason):
    """Found by the break-it review: in an Azure file over the size whose rows the checked
    reader walks (64 MB; lowered here to 1 MB for a 2.5 MB file of the real code trace's token
    counts, one request every 10 ms), a 2-field row was stored with an empty count and ``,`` /
    ``,,`` lines vanished, because the fast road's refusal went to a checked reader that does
    not walk such files. The rows are walked on that way now: refused naming the line and
    column, the store unchanged. (A ``,,`` line, every field empty, is a blank row that both
    readers skip, as they skip an empty line: :func:`test_a_blank_row_is_skipped_on_both_roads`.)"""
    from datetime import datetime, timedelta

    from analytics.ingest import csvcheck

    monkeypatch.setattr(csvcheck, "STRUCTURE_WALK_MAX_BYTES", 1_000_000)
    lines = shared(_AZURE).read_text().splitlines()
    counts = [line.split(",", 1)[1] for line in lines[1:]] * 8  # about 2.5 MB
    start = datetime(2023, 11, 16, 18, 0)
    rows = [f"{start + timedelta(milliseconds=10 * i):%Y-%m-%d %H:%M:%S.%f}0,{c}"
            for i, c in enumerate(counts)]
    rows.insert(40_000, bad.format(ts=rows[40_000].split(",")[0]))
    path = tmp_path / "az.csv"
    path.write_text("\n".join([lines[0], *rows]) + "\n")
    with pytest.raises(FormatError) as refused:
        ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    assert (refused.value.line, refused.value.column) == (40_002, column)
    assert refused.value.reason.startswith(reason), refused.value.reason
    assert store.list_datasets(con).empty


def test_a_blank_row_is_skipped_on_both_roads(con, tmp_path):
    """A row whose every field is empty (Excel ends exports with them) is skipped by the checked
    reader and by the one road alike: the same rows stored."""
    lines = shared(_AZURE).read_text().splitlines()[:200]
    lines.insert(100, ",,")
    path = tmp_path / "blank.csv"
    path.write_text("\n".join(lines) + "\n")
    [result] = ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    frame, _ = _checked(path)
    assert result["rows"] == frame.height == 199
    assert _stored(con, result["dataset"]).equals(frame)



@pytest.mark.parametrize("ending, packed", [("\n", True), ("", True), ("\n\n", False),
                                            ("\r\n", False)])
def test_a_long_last_line_is_named_whatever_ends_the_file(con, tmp_path, ending, packed):
    """The break-it review's numbering slips: a long last line of a gzip file ending in a
    newline, and of a plain file ending in a blank line, were named one line too far."""
    import gzip

    real = shared("burstgpt/BurstGPT_1_head400.csv").read_text()
    last = "19444444.0,x," + "G" * 2_200_000 + ",ChatGPT,1,1,2,Conversation log"
    text = real.rstrip("\n") + "\n" + last + ending
    path = tmp_path / ("long.csv.gz" if packed else "long.csv")
    path.write_bytes(gzip.compress(text.encode(), 1) if packed else text.encode())
    with pytest.raises(FormatError) as refused:
        ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    assert refused.value.line == 402  # the header, 400 rows, the long one
    assert f"is {len(last):,} bytes long" in refused.value.reason


@pytest.mark.parametrize("form", ["utf-16", "utf-16 gzip", "pandas index", "utf-16 + index"])
def test_utf16_and_an_index_column_take_the_one_road(form, fast, no_fallback, con, tmp_path):
    """Issue 28 item 1: a UTF-16 export (with its byte-order mark, plain or gzip) and a CSV with
    pandas' index column are decoded / stripped as a stream into a UTF-8 copy that the one road
    reads: the same rows and warnings as the checked reader, and the copy is gone after."""
    import gzip

    from analytics import tempfiles

    lines = shared(_BURST).read_text().splitlines()
    if "index" in form:
        lines = [("," if i == 0 else f"{i - 1},") + line for i, line in enumerate(lines)]
    text = "\r\n".join(lines) + "\r\n"
    data = text.encode("utf-16") if "utf-16" in form else text.encode()
    path = tmp_path / ("trace.csv.gz" if "gzip" in form else "trace.csv")
    path.write_bytes(gzip.compress(data) if "gzip" in form else data)
    parsed = parse_file(path, stream=True)
    assert parsed.stream is not None  # the one road, not the checked reader
    del parsed
    [result] = ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    frame, warnings = _checked(path)
    assert _stored(con, result["dataset"]).equals(frame)
    assert [w["text"] for w in result["warnings"]] == list(warnings)
    assert ("UTF-16" in warnings[0]) == ("utf-16" in form)
    assert any("index column" in w for w in warnings) == ("index" in form)
    import gc

    gc.collect()
    import tempfile
    from pathlib import Path

    mine = (tempfiles.prefix("headroom-utf8"), tempfiles.prefix("headroom-noindex"))
    assert not [p for p in Path(tempfile.gettempdir()).iterdir() if p.name.startswith(mine)]


def _canonical(tmp_path, edit=None, spell=lambda ts, i: ts.replace(" ", "T")[:26]):
    """The real Azure code trace's first 300 rows as a canonical requests CSV (ts as ``spell``
    writes each: by default ``T`` and six fraction digits, no offset; a model and failed
    column, an extra column), edited by ``edit(lines)``."""
    lines = shared(_AZURE).read_text().splitlines()[:300]
    out = ["ts,prompt_tokens,completion_tokens,model,failed,extra"]
    for i, line in enumerate(lines[1:]):
        ts, p, c = line.split(",")
        out.append(f"{spell(ts, i)},{p},{c},{'llama' if i % 2 else 'mistral'},"
                   f"{'true' if i % 11 == 0 else 'false'},x{i}")
    if edit is not None:
        edit(out)
    path = tmp_path / "canonical_trace.csv"
    path.write_text("\n".join(out) + "\n")
    return path


_SPELL = {"layout T": None, "layout space, no fraction": lambda ts, i: ts[:19],
          "every offset": lambda ts, i: ts[:26] + ("+00:00" if i % 2 else "Z"),
          "ISO without layout": lambda ts, i: ts[:19].replace(" ", "t") + ".5",
          "mixed offsets": lambda ts, i: ts[:26] + ("+00:00" if i % 7 == 3 else "")}


@pytest.mark.parametrize("spelling", list(_SPELL))
@pytest.mark.parametrize("variant", ["as is", "empty counts", "no optional"])
def test_a_canonical_requests_csv_takes_the_one_road(variant, spelling, fast, con, tmp_path,
                                                      monkeypatch):
    """Issue 28 item 1: a canonical requests CSV (users' own traces) has a plan: the same rows,
    warnings, sources and assumptions as the checked reader. Only a file that mixes times with
    and without an offset goes back to the checked reader (which counts both kinds)."""
    went_back = []
    checked_item = ingest._checked_item
    monkeypatch.setattr(ingest, "_checked_item",
                        lambda *a: went_back.append(1) or checked_item(*a))

    def edit(lines):
        if variant == "empty counts":
            for n in (5, 17, 140):
                cells = lines[n].split(",")
                cells[1 if n == 5 else 2] = ""
                lines[n] = ",".join(cells)
        if variant == "no optional":
            lines[:] = [",".join(ln.split(",")[:3]) for ln in lines]

    spell = _SPELL[spelling]
    path = _canonical(tmp_path, edit, *(() if spell is None else (spell,)))
    parsed = parse_file(path, stream=True)
    assert parsed.stream is not None and parsed.format == "canonical"
    del parsed
    [result] = ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    assert bool(went_back) == (spelling == "mixed offsets")
    checked = parse_file(path, path.name, stream=False)
    assert _stored(con, result["dataset"]).equals(checked.frame)
    assert [w["text"] for w in result["warnings"]] == list(checked.warnings)
    assert result["assumptions"] == list(checked.assumptions)
    assert result["sources"] == dict(checked.sources)
    if spelling == "mixed offsets":
        assert result["assumptions"][0].startswith("time zone assumed: 256 of 299")


def _canon_cell(n: int, col: int, value: str):
    def edit(lines):
        cells = lines[n].split(",")
        cells[col] = value
        lines[n] = ",".join(cells)
    return edit


@pytest.mark.parametrize("edit", [
    _canon_cell(9, 1, "2.5"), _canon_cell(12, 2, "-4"),
    _canon_cell(30, 0, "16/11/2023 18:15:46"), _canon_cell(44, 4, "yes"),
    _canon_cell(50, 0, "1970-01-01 00:00:00"), _canon_cell(60, 0, ""),
    _canon_cell(70, 1, "lots"), _canon_cell(80, 2, "inf"),
    _canon_cell(90, 0, "2023-11-16 17:00:00")],
    ids=["fraction", "negative", "spelling", "failed", "range", "empty ts", "text",
         "infinite", "step back"])
def test_a_bad_canonical_row_is_named_as_the_checked_reader_names_it(edit, fast, con, tmp_path):
    path = _canonical(tmp_path, edit)
    with pytest.raises(FormatError) as checked:
        parse_file(path, path.name, stream=False)
    before = store.ledger_records(con)
    with pytest.raises(FormatError) as road:
        ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    assert str(road.value) == str(checked.value)
    assert store.ledger_records(con) == before


def test_failed_requests_in_a_narrow_header_go_to_the_batches(fast, no_fallback, con, tmp_path):
    """A canonical file of ts, counts and failed only fits the narrow table until a request
    failed: that row sends the direct insert to the batches (the wide table), not the checked
    reader, which holds a file whole and refuses a large one (break-it review)."""
    def edit(lines):
        lines[:] = [",".join(ln.split(",")[:3] + [ln.split(",")[4]]) for ln in lines]

    path = _canonical(tmp_path, edit)
    [result] = ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    checked = parse_file(path, path.name, stream=False)
    assert _stored(con, result["dataset"]).equals(checked.frame)
    assert int(checked.frame["failed"].sum()) == 28


@pytest.mark.parametrize("empty", [False, True], ids=["direct", "batches"])
def test_a_time_leaving_the_first_ones_layout_is_read_again_not_refused(empty, fast,
                                                                        no_fallback, con,
                                                                        tmp_path):
    """The first ts has a fraction, a later one none (Python's isoformat writes whole seconds
    so): read_csv's own layout stops there, and the file is read again with the ISO spellings
    (direct, or batches where a count is empty), never by the checked reader (break-it
    review: a large file was refused by that reader's size limit)."""
    def edit(lines):
        cells = lines[150].split(",")
        cells[0] = cells[0][:19]
        lines[150] = ",".join(cells)
        if empty:
            cells = lines[40].split(",")
            cells[2] = ""
            lines[40] = ",".join(cells)

    path = _canonical(tmp_path, edit)
    [result] = ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    checked = parse_file(path, path.name, stream=False)
    assert _stored(con, result["dataset"]).equals(checked.frame)
    assert [w["text"] for w in result["warnings"]] == list(checked.warnings)
    assert result["assumptions"] == list(checked.assumptions)
