"""Issue 28 item 4: request logs left where they live. The real Azure LLM 2023 conversation
trace is ingested, written out as hive-partitioned Parquet and CSV (plain and gzip) by the
store's own export, and attached: the attached dataset's grid, fields and summary equal the
stored dataset's; a bad value is refused naming file, line (Parquet: row) and column with the
store unchanged; a changed file stops every read until a refresh, which takes new files in and
moves the data version; the attachment survives a restart; deleting it leaves the files."""

from __future__ import annotations

import gzip
import json
import shutil

import pandas as pd
import pytest
from conftest import shared
from harness import strict_loads

from analytics import cli, store
from analytics.config import Weights
from analytics.ingest.attach import attach
from analytics.ingest.rawfile import FormatError
from analytics.services import data


@pytest.fixture(scope="module")
def conv(tmp_path_factory):
    """The conversation trace ingested, its rows, and partitions of it: ``parquet/part=K/``
    and ``csv/part=K/`` (K: ten-minute slice; the last CSV slice gzip)."""
    root = tmp_path_factory.mktemp("attached")
    db = root / "stored.duckdb"
    with store.connect(db) as con:
        data.ingest_paths(con, [shared("azure_llm/AzureLLMInferenceTrace_conv.csv")],
                          name="conv")
        rows = store.dataset_rows(con, "conv")
        grid = store.requests_grid(con, int(store.dataset(con, "conv")["dataset_id"]), 300,
                                   Weights())
        summary = store.dataset_summary(con, "conv")
    part = (rows["ts"] - rows["ts"].min()).dt.total_seconds() // 600
    for k, chunk in rows.groupby(part):
        (root / f"parquet/part={int(k)}").mkdir(parents=True)
        chunk.to_parquet(root / f"parquet/part={int(k)}/rows.parquet", index=False)
        (root / f"csv/part={int(k)}").mkdir(parents=True)
        text = chunk[["ts", "prompt_tokens", "completion_tokens"]].to_csv(index=False)
        if k == part.max():
            with gzip.open(root / f"csv/part={int(k)}/rows.csv.gz", "wt") as fh:
                fh.write(text)
        else:
            (root / f"csv/part={int(k)}/rows.csv").write_text(text)
    return {"root": root, "rows": rows, "grid": grid, "summary": summary,
            "parts": int(part.max()) + 1}


def _grid(con, name):
    return store.requests_grid(con, int(store.dataset(con, name)["dataset_id"]), 300, Weights())


def _copy(conv, form, dest):
    shutil.copytree(conv["root"] / form, dest)
    return dest


def test_attached_parquet_reads_what_the_stored_trace_holds(conv, con, tmp_path):
    logs = _copy(conv, "parquet", tmp_path / "logs")
    report = attach(con, "conv_attached", str(logs / "part=*" / "*.parquet"))
    assert report["status"] == "attached" and report["files"] == conv["parts"]
    assert report["rows"] == len(conv["rows"]) == 19366
    # bounds and times from the row groups' statistics: no row read for them
    assert "prompt_tokens: from the Parquet statistics" in report["checks"]
    assert report["ts_min"] == conv["rows"]["ts"].min().isoformat()
    pd.testing.assert_frame_equal(_grid(con, "conv_attached"), conv["grid"])
    info = store.dataset(con, "conv_attached")
    assert store.request_fields(con, int(info["dataset_id"])) == \
        {"tokens": True, "completion_tokens": True, "gpu_s": False, "model": False,
         "latency_s": False, "empty_tokens": False}
    summary = store.dataset_summary(con, "conv_attached")
    for key in ("requests", "prompt_tokens", "completion_tokens", "failed_requests"):
        assert summary[key] == conv["summary"][key]
    assert summary["attached"]["changed"] == [] and summary["attached"]["new"] == []
    assert store.table_counts(con)["requests"] == 0  # nothing copied into the store
    # a restart: the attachment is in the store file
    db = store.db_path(con)
    con.close()
    with store.connect(db, read_only=True) as again:
        pd.testing.assert_frame_equal(_grid(again, "conv_attached"), conv["grid"])


def test_attached_csv_plain_and_gzip(conv, con, tmp_path):
    logs = _copy(conv, "csv", tmp_path / "logs")
    report = attach(con, "conv_csv", str(logs / "part=*" / "*"))
    assert report["form"] == "csv" and report["rows"] == 19366
    assert report["assumptions"] == ["the files' ts without a zone or offset read as UTC"]
    pd.testing.assert_frame_equal(_grid(con, "conv_csv"), conv["grid"])


def test_a_bad_parquet_value_names_file_row_and_column(conv, con, tmp_path):
    logs = _copy(conv, "parquet", tmp_path / "logs")
    victim = logs / "part=2" / "rows.parquet"
    frame = pd.read_parquet(victim)
    frame.loc[41, "completion_tokens"] = -3
    frame.to_parquet(victim, index=False)
    before = store.ledger_records(con)
    with pytest.raises(FormatError) as err:
        attach(con, "bad", str(logs / "part=*" / "*.parquet"))
    assert (err.value.file, err.value.line, err.value.column) == (str(victim), 42,
                                                                 "completion_tokens")
    assert "below 0" in err.value.reason
    assert store.ledger_records(con) == before


def test_a_bad_csv_value_names_its_line(conv, con, tmp_path):
    logs = _copy(conv, "csv", tmp_path / "logs")
    victim = logs / "part=1" / "rows.csv"
    lines = victim.read_text().splitlines()
    ts, p, c = lines[9].split(",")
    lines[9] = f"{ts},{p},2.5"  # line 10: a fractional count, refused not rounded
    victim.write_text("\n".join(lines) + "\n")
    with pytest.raises(FormatError) as err:
        attach(con, "bad", str(logs / "part=*" / "*"))
    assert (err.value.file, err.value.line, err.value.column) == (str(victim), 10,
                                                                 "completion_tokens")
    assert err.value.reason == "'2.5' is not an integer"  # the checked reader's words
    lines[9] = f"{ts},{p},lots"  # a cell that is no number: DuckDB's rejects name the line
    victim.write_text("\n".join(lines) + "\n")
    with pytest.raises(FormatError) as err:
        attach(con, "bad", str(logs / "part=*" / "*"))
    assert (err.value.line, err.value.column, err.value.reason) == (
        10, "completion_tokens", "'lots' is not a number")
    assert store.ledger_records(con) == []


def test_a_changed_file_stops_reads_until_a_refresh(conv, con, tmp_path):
    logs = _copy(conv, "parquet", tmp_path / "logs")
    last = conv["parts"] - 1
    held_back = tmp_path / "later.parquet"
    shutil.move(logs / f"part={last}" / "rows.parquet", held_back)
    (logs / f"part={last}").rmdir()
    first = attach(con, "conv", str(logs / "part=*" / "*.parquet"))
    version = store.data_version(con)
    grown = _grid(con, "conv")
    assert first["rows"] < 19366 and grown["requests"].sum() == first["rows"]
    # a new partition is not read until a refresh
    (logs / f"part={last}").mkdir()
    shutil.copy(held_back, logs / f"part={last}" / "rows.parquet")
    assert store.attached_status(con, "conv")["new"] == [
        str(logs / f"part={last}" / "rows.parquet")]
    assert _grid(con, "conv")["requests"].sum() == first["rows"]
    refreshed = attach(con, "conv", refresh=True)
    assert refreshed["status"] == "refreshed" and refreshed["rows"] == 19366
    assert store.data_version(con) > version
    pd.testing.assert_frame_equal(_grid(con, "conv"), conv["grid"])
    # a validated file rewritten: every read stops, naming it; the summary says why
    victim = logs / "part=0" / "rows.parquet"
    pd.read_parquet(victim).head(10).to_parquet(victim, index=False)
    with pytest.raises(store.AttachedChanged, match="part=0/rows.parquet"):
        _grid(con, "conv")
    assert "refresh" in store.dataset_summary(con, "conv")["rows_unread"]
    assert store.demand_minutes(con).empty  # left out until refreshed, no error
    assert attach(con, "conv", refresh=True)["rows"] == 19366 - (
        (conv["rows"]["ts"] - conv["rows"]["ts"].min()).dt.total_seconds() // 600 == 0).sum() + 10


def test_appending_deleting_and_the_cli(conv, tmp_path):
    logs = _copy(conv, "parquet", tmp_path / "logs")
    db = tmp_path / "cli.duckdb"
    pattern = str(logs / "part=*" / "*.parquet")
    assert cli.main(["--db", str(db), "attach", "conv", pattern]) == 0
    assert cli.main(["--db", str(db), "attach", "conv", pattern]) != 0  # the name is held
    with store.connect(db) as con:
        with pytest.raises(store.AppendRefused, match="attached"):
            data.ingest_paths(con, [shared("azure_llm/AzureLLMInferenceTrace_code.csv")],
                              append_to="conv")
        store.delete_dataset(con, "conv")
        assert store.ledger_records(con) == []
    assert len(list(logs.glob("part=*/*.parquet"))) == conv["parts"]  # the files stay


def test_cli_documents_parse_strictly(conv, tmp_path, capsys):
    logs = _copy(conv, "parquet", tmp_path / "logs")
    db = tmp_path / "cli.duckdb"
    assert cli.main(["--db", str(db), "attach", "conv", str(logs / "*" / "*.parquet")]) == 0
    doc = strict_loads(capsys.readouterr().out)
    assert doc["rows"] == 19366 and doc["warnings"][0]["message"] == "columns not read: part"
    assert cli.main(["--db", str(db), "attach", "x", str(tmp_path / "none" / "*.parquet")]) == 2
    assert "no file matches" in json.loads(capsys.readouterr().out)["error"]
    assert cli.main(["--db", str(db), "summary", "conv"]) == 0
    assert strict_loads(capsys.readouterr().out)["attached"]["files"] == conv["parts"]


def test_data_page_shows_the_attachment_and_refreshes_it(conv, app_env, tmp_path,
                                                         monkeypatch):
    """The Data page lists an attached dataset with what it reads, warns when its files
    changed, and its Refresh button checks them again; the Demand page charts it."""
    from harness import new_app

    from analytics.ui import cache

    monkeypatch.setattr(cache, "FILES_STAT_S", 0.0)  # the file changes within the second

    logs = _copy(conv, "parquet", tmp_path / "logs")
    with store.connect(app_env["db"]) as con:
        attach(con, "conv", str(logs / "part=*" / "*.parquet"))
    at = new_app().run()
    at.switch_page("pages/data.py").run()
    assert not at.exception
    captions = " ".join(c.value for c in at.caption)
    assert f"Attached, read in place: {conv['parts']} parquet files" in captions
    victim = logs / "part=0" / "rows.parquet"
    pd.read_parquet(victim).head(10).to_parquet(victim, index=False)
    at.run()
    assert any("changed since they were checked" in w.value for w in at.warning)
    at.button(key="refresh_attached").click().run()
    assert not at.exception
    assert any("dataset conv refreshed, read in place" in s.value for s in at.success)
    at.switch_page("pages/demand.py").run()
    assert not at.exception and not at.error
    assert at.get("plotly_chart")


def _rows_frame(conv, n=50):
    return conv["rows"][["ts", "prompt_tokens", "completion_tokens"]].head(n).reset_index(
        drop=True)


def test_break_it_review_refusals(conv, con, tmp_path):
    """The break-it review of the attach road: each case ends in a refusal naming what is wrong
    (or, where the files are fine, the right values), the store unchanged."""
    rows = _rows_frame(conv)

    def parquet(rel, frame):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        frame.to_parquet(tmp_path / rel, index=False)

    # a partition without ts: its rows would have no time
    parquet("nots/p=1/a.parquet", rows)
    parquet("nots/p=2/a.parquet", rows.drop(columns="ts"))
    with pytest.raises(FormatError) as err:
        attach(con, "x", str(tmp_path / "nots/*/*.parquet"))
    assert (err.value.file.endswith("nots/p=2/a.parquet"), err.value.line, err.value.column,
            err.value.reason) == (True, 1, "ts", "empty value")
    # counts a BIGINT cannot hold: refused at attach, not at every later read
    big = rows.astype({"prompt_tokens": "uint64"})
    big.loc[3, "prompt_tokens"] = 2 ** 63 + 5
    parquet("big/a.parquet", big)
    with pytest.raises(FormatError, match="too large for a count") as err:
        attach(con, "x", str(tmp_path / "big/*.parquet"))
    assert (err.value.line, err.value.column) == (4, "prompt_tokens")
    # naive ts in one file, zoned in another
    parquet("mixtz/p=1/a.parquet", rows)
    parquet("mixtz/p=2/a.parquet", rows.assign(ts=rows["ts"].dt.tz_localize("UTC")))
    with pytest.raises(store.AttachRefused, match="ts carries a time zone"):
        attach(con, "x", str(tmp_path / "mixtz/*/*.parquet"))
    # a folder key that is also a column of the files
    parquet("clash/prompt_tokens=7/a.parquet", rows)
    with pytest.raises(store.AttachRefused, match="folder key prompt_tokens= is also a column"):
        attach(con, "x", str(tmp_path / "clash/*/*.parquet"))
    # headers only; a folder; CSV headers that differ; gzip bytes named .csv; a ragged row
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty/a.csv").write_text("ts,prompt_tokens,completion_tokens\n")
    with pytest.raises(FormatError, match="no data rows"):
        attach(con, "x", str(tmp_path / "empty/*.csv"))
    with pytest.raises(store.AttachRefused, match=r"is a folder: give a glob"):
        attach(con, "x", str(tmp_path / "empty"))
    (tmp_path / "hdr").mkdir()
    rows.to_csv(tmp_path / "hdr/a.csv", index=False)
    rows[["completion_tokens", "prompt_tokens", "ts"]].to_csv(tmp_path / "hdr/b.csv", index=False)
    with pytest.raises(store.AttachRefused, match=r"hdr/b.csv: its header .* differs"):
        attach(con, "x", str(tmp_path / "hdr/*.csv"))
    (tmp_path / "gz").mkdir()
    (tmp_path / "gz/a.csv").write_bytes(gzip.compress(rows.to_csv(index=False).encode()))
    with pytest.raises(store.AttachRefused, match="gzip-compressed but not named .gz"):
        attach(con, "x", str(tmp_path / "gz/*.csv"))
    (tmp_path / "ragged").mkdir()
    text = rows.to_csv(index=False).splitlines()
    text[6] += ",9"
    (tmp_path / "ragged/a.csv").write_text("\n".join(text) + "\n")
    with pytest.raises(FormatError) as err:
        attach(con, "x", str(tmp_path / "ragged/*.csv"))
    assert err.value.line == 7
    assert store.ledger_records(con) == []


def test_break_it_review_answers(conv, con, tmp_path, monkeypatch):
    """Where the files are fine: a model= folder fills model for CSV as for Parquet, a
    relative pattern works from another folder, the same files under a second name are
    refused naming the first, and a refresh whose files are all gone says to delete."""
    rows = _rows_frame(conv)
    for model in ("gpt4", "llama"):
        (tmp_path / f"m/model={model}").mkdir(parents=True)
        rows.to_csv(tmp_path / f"m/model={model}/a.csv", index=False)
    monkeypatch.chdir(tmp_path)
    report = attach(con, "bymodel", "m/*/*.csv")
    assert report["rows"] == 100 and report["pattern"] == str(tmp_path / "m/*/*.csv")
    monkeypatch.chdir("/")
    assert store.dataset_summary(con, "bymodel")["models"] == 2
    with pytest.raises(store.AttachRefused, match="attached already, as dataset bymodel"):
        attach(con, "again", str(tmp_path / "m" / "." / "*" / "*.csv"))
    shutil.rmtree(tmp_path / "m")
    with pytest.raises(store.AttachRefused, match="headroom delete bymodel"):
        attach(con, "bymodel", refresh=True)
