"""Issue 28 item 3: datasets that grow. Files appended to a stored dataset (``headroom ingest
--append``, the Data page's "Add the files as ... more rows of"), on real traces split into
drops as logs arrive:

* two drops of the Azure conv trace give the whole file's rows, summary and grid, across
  separate processes (a restart between appends);
* an overlap between drops is dropped and counted; rows that look alike are kept as a multiset
  (a row twice in the store and three times in the file: one kept);
* a repeated file is a duplicate; a site-hour stored with another value is refused naming the
  data row, the store unchanged; another table or an unknown dataset is refused (exit 2);
* a streamed (large) file appends batch by batch, with the same dropping;
* a store made before schema 14 lists each dataset's first file in ``dataset_files``.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from harness import REPO, new_app, shared, store_at_version, strict_loads, table_with

from analytics import store
from analytics.config import ParseOptions
from analytics.ingest import fastcsv
from analytics.ingest import files as ingest

CONV = shared("azure_llm/AzureLLMInferenceTrace_conv.csv")
CARBON = shared("sustaindc_dcrl/CarbonIntensity/CISO_NG_&_avgCI.csv")


def _split(src, folder, *ranges) -> list:
    """Files of ``src``'s header and the data rows ``[a, b)`` of each range."""
    lines = src.read_text().splitlines(True)
    out = []
    for i, (a, b) in enumerate(ranges):
        path = folder / f"drop{i}{src.suffix}"
        path.write_text("".join([lines[0], *lines[1 + a:1 + b]]))
        out.append(path)
    return out


def cli(db, *args):
    proc = subprocess.run([sys.executable, "-m", "analytics.cli", "--db", str(db), *args],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    return proc.returncode, strict_loads(proc.stdout)


def cli_here(capsys, db, *args):
    """The CLI in this process (where a restart is not what is tested: ~1.5 s of CPU less)."""
    from analytics.cli import main

    capsys.readouterr()
    code = main(["--db", str(db), *args])
    return code, strict_loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def drops(tmp_path_factory):
    folder = tmp_path_factory.mktemp("drops")
    return _split(CONV, folder, (0, 12000), (12000, 19366), (11900, 19366))


def test_two_drops_appended_across_restarts_equal_the_whole_file(tmp_path, drops, capsys):
    db = tmp_path / "s.duckdb"
    first, second, _ = drops
    assert cli(db, "ingest", "--name", "conv", str(first))[0] == 0
    code, [res] = cli(db, "ingest", "--append", "conv", str(second))  # a new process
    assert code == 0
    assert (res["status"], res["rows"], res["dropped"], res["dataset"]) == (
        "appended", 7366, 0, "conv")
    assert cli_here(capsys, db, "ingest", str(CONV))[0] == 0  # the whole file, to compare
    summary = {n: cli_here(capsys, db, "summary", n)[1]
               for n in ("conv", "AzureLLMInferenceTrace_conv")}
    assert {k: v for k, v in summary["conv"].items() if k != "dataset"} == {
        k: v for k, v in summary["AzureLLMInferenceTrace_conv"].items() if k != "dataset"}
    grid = {n: cli_here(capsys, db, "grid", n, "--bin", "5min")[1] for n in summary}
    assert grid["conv"] == grid["AzureLLMInferenceTrace_conv"] and grid["conv"]["bins"] == 12
    con = store.connect(db, read_only=True)
    assert con.execute("SELECT f.file, f.rows, f.dropped FROM dataset_files f JOIN datasets d "
                       "USING (dataset_id) WHERE d.name = 'conv' ORDER BY added_at").fetchall() \
        == [(str(first), 12000, 0), (str(second), 7366, 0)]
    ledger = store.dataset(con, "conv")
    assert (ledger["rows"], str(ledger["ts_max"])) == (19366, "2023-11-16 19:14:08.402527")
    con.close()


def test_an_overlap_is_dropped_and_counted_and_a_repeat_is_a_duplicate(con, drops):
    first, second, overlap = drops
    ingest.ingest_files(con, [ingest.FileIn(first, first.name, "conv")])
    version = store.data_version(con)
    [res] = ingest.ingest_files(con, [ingest.FileIn(overlap, overlap.name)], append_to="conv")
    assert (res["status"], res["rows"], res["dropped"]) == ("appended", 7366, 100)
    assert any("100 row(s) already stored in dataset 'conv'" in w["message"]
               for w in res["warnings"])
    assert store.data_version(con) == version + 1  # every cache sees the new rows
    [again] = ingest.ingest_files(con, [ingest.FileIn(overlap, overlap.name)], append_to="conv")
    assert again["status"] == "duplicate" and store.data_version(con) == version + 1
    [last] = ingest.ingest_files(con, [ingest.FileIn(second, second.name)], append_to="conv")
    assert (last["rows"], last["dropped"]) == (0, 7366)  # every row already there
    assert store.dataset(con, "conv")["rows"] == 19366


def test_rows_that_look_alike_are_kept_as_a_multiset(con, tmp_path):
    """A real request row twice in the store and three times in the appended file (with two
    later rows): one of the three is new and kept."""
    lines = CONV.read_text().splitlines(True)
    header, row, later = lines[0], lines[1], lines[2:4]
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text(header + row + row)
    b.write_text(header + row + row + row + "".join(later))
    ingest.ingest_files(con, [ingest.FileIn(a, a.name, "twice")])
    [res] = ingest.ingest_files(con, [ingest.FileIn(b, b.name)], append_to="twice")
    assert (res["rows"], res["dropped"]) == (3, 2)
    assert store.dataset(con, "twice")["rows"] == 5


def test_a_site_hour_stored_with_another_value_is_refused_naming_the_row(con, tmp_path):
    first, second = _split(CARBON, tmp_path, (0, 5000), (4990, 8760))
    lines = second.read_text().splitlines(True)
    cells = lines[4].split(",")  # data row 4 of the drop: 2022-07-28 ... hour 4993 of the year
    cells[-1] = "999.0\n"
    lines[4] = ",".join(cells)
    second.write_text("".join(lines))
    site = ParseOptions(site="CISO")  # else each drop's site is its file's name
    ingest.ingest_files(con, [ingest.FileIn(first, first.name, "ciso")], opts=site)
    before = (store.dataset(con, "ciso")["rows"], store.data_version(con))
    with pytest.raises(store.AppendRefused) as refused:
        ingest.ingest_files(con, [ingest.FileIn(second, second.name)], opts=site,
                            append_to="ciso")
    message = str(refused.value)
    assert refused.value.row == 4 and "data row 4 (site " in message
    assert "is already stored in dataset 'ciso' with other values" in message
    assert (store.dataset(con, "ciso")["rows"], store.data_version(con)) == before
    second.write_text("".join([lines[0], *lines[11:]]))  # without the overlap: appended
    [res] = ingest.ingest_files(con, [ingest.FileIn(second, second.name)], opts=site,
                                append_to="ciso")
    assert (res["status"], res["dropped"]) == ("appended", 0)
    assert store.dataset(con, "ciso")["rows"] == 8760
    other = _split(CARBON, tmp_path / "..", (0, 10))[0]  # no --site: its site is its name
    [res] = ingest.ingest_files(con, [ingest.FileIn(other, "more.csv")], append_to="ciso")
    assert any("the appended rows name site more, the rows of dataset 'ciso' site CISO" in
               w["message"] for w in res["warnings"])


def test_another_table_or_an_unknown_dataset_is_refused(tmp_path, drops, capsys):
    db = tmp_path / "s.duckdb"
    assert cli_here(capsys, db, "ingest", "--name", "conv", str(drops[0]))[0] == 0
    code, doc = cli_here(capsys, db, "ingest", "--append", "conv", str(CARBON))
    assert code == 2 and "dataset 'conv' holds requests; this file holds carbon_intensity" \
        in doc["error"]
    code, doc = cli_here(capsys, db, "ingest", "--append", "nope", str(drops[1]))
    assert code == 2 and doc["error"] == "no dataset named 'nope'"
    code, doc = cli_here(capsys, db, "ingest", "--append", "conv", "--name", "x", str(drops[1]))
    assert code == 2 and "--name and --append" in doc["error"]
    code, listed = cli_here(capsys, db, "datasets")
    assert [(d["name"], d["rows"]) for d in listed] == [("conv", 12000)]


def test_a_streamed_file_appends_batch_by_batch(con, drops, monkeypatch):
    monkeypatch.setattr(fastcsv, "FAST_MIN_BYTES", 0)  # the drops take the streamed road
    monkeypatch.setattr(fastcsv, "BATCH_ROWS", 1000)
    first, _, overlap = drops
    [made] = ingest.ingest_files(con, [ingest.FileIn(first, first.name, "conv")])
    assert made["rows"] == 12000
    [res] = ingest.ingest_files(con, [ingest.FileIn(overlap, overlap.name)], append_to="conv")
    assert (res["rows"], res["dropped"]) == (7366, 100)
    sums = con.execute("SELECT count(*), sum(prompt_tokens), sum(completion_tokens) FROM "
                       "requests r JOIN datasets d USING (dataset_id) WHERE d.name = 'conv'"
                       ).fetchone()
    assert sums == con.execute("SELECT count(*), sum(ContextTokens), sum(GeneratedTokens) "
                               "FROM read_csv(?)", [str(CONV)]).fetchone()


def test_a_store_before_schema_14_lists_each_datasets_first_file(tmp_path):
    db = tmp_path / "v13.duckdb"
    raw = store_at_version(db, 13)
    raw.execute("INSERT INTO datasets (dataset_id, name, kind, format, source, sha256, rows, "
                "ts_min, ts_max, ingested_at) VALUES (3, 'old', 'requests', 'azure_llm', "
                "'old.csv', 'abc', 2, TIMESTAMP '2024-01-01', TIMESTAMP '2024-01-02', now())")
    raw.close()
    con = store.connect(db)
    assert con.execute("SELECT dataset_id, sha256, file, rows FROM dataset_files").fetchall() \
        == [(3, "abc", "old.csv", 2)]
    con.close()


def test_the_data_page_appends_an_upload_to_a_dataset(app_env, drops):
    first, second, _ = drops
    at = new_app().run()
    at.file_uploader(key="uploads").set_value((first.name, first.read_bytes(), "text/csv"))
    at.run()
    at.button(key="ingest").click().run()
    assert "12,000 rows" in at.success[0].value
    at.selectbox(key="append_to").set_value("more rows of drop0").run()
    at.file_uploader(key="uploads_1").set_value((second.name, second.read_bytes(), "text/csv"))
    at.run()
    at.button(key="ingest").click().run()
    assert not at.exception
    assert "7,366 more rows of dataset drop0" in at.success[0].value
    ledger = table_with(at, "name")
    assert ledger[["name", "rows"]].values.tolist() == [["drop0", 19366]]
