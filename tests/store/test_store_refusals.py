"""Issue 34, items 9 and 11: a store touches only its own files, and every way a store or an
input path cannot be used says what happened and what to do.

Through the real CLI (a subprocess on real files) and the app (AppTest): another program's DuckDB
file is refused by name and left byte for byte as it was; a reading command never migrates an
older store (``headroom migrate`` does); a directory, a FIFO, a text file and a newer schema are
named as such; a full disk (a 2 MB tmpfs) reports the full disk, not "no transaction is
active", and leaves the store as it was; a bin past a year is bad input (exit 2); the app shows
a browser user no server path.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import duckdb
import pytest
from harness import REPO, new_app, shared, store_at_version, strict_loads

from analytics import store

CONV = "azure_llm/AzureLLMInferenceTrace_conv.csv"
CODE = "azure_llm/AzureLLMInferenceTrace_code.csv"


@pytest.fixture
def cli(capsys, monkeypatch):
    """``headroom --db DB ARGS...`` in this process: ``(exit code, document)`` (the foreign-file
    test runs the real command once as a subprocess too)."""
    from analytics import cli as headroom

    monkeypatch.setenv("HEADROOM_STORE_WAIT_S", "2")

    def run(db, *args):
        capsys.readouterr()
        code = headroom.main(["--db", str(db), *args])
        return code, strict_loads(capsys.readouterr().out)
    return run


def subprocess_cli(db, *args):
    proc = subprocess.run([sys.executable, "-m", "analytics.cli", "--db", str(db), *args],
                          capture_output=True, text=True, cwd=REPO, timeout=300,
                          env={**os.environ, "HEADROOM_STORE_WAIT_S": "2"})
    return proc.returncode, strict_loads(proc.stdout)


def sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def foreign(tmp_path):
    """Another program's DuckDB file, with a ``datasets`` table of its own."""
    path = tmp_path / "other.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE datasets (id INTEGER, label VARCHAR)")
    con.execute("INSERT INTO datasets VALUES (1, 'theirs')")
    con.execute("CREATE TABLE results (x DOUBLE)")
    con.close()
    return path


def test_another_programs_duckdb_file_is_refused_and_left_untouched(foreign, cli):
    before = sha(foreign)
    for run, args in ((subprocess_cli, ("datasets",)), (cli, ("ingest", str(shared(CONV)))),
                      (cli, ("migrate",))):
        code, doc = run(foreign, *args)
        assert code == 2, args
        assert "is a DuckDB database but not a headroom store" in doc["error"]
        assert "datasets, results" in doc["error"] and str(foreign) in doc["error"]
    assert sha(foreign) == before
    con = duckdb.connect(str(foreign), read_only=True)
    assert con.execute("SELECT table_name FROM information_schema.tables ORDER BY 1"
                       ).fetchall() == [("datasets",), ("results",)]
    con.close()


def test_the_app_on_a_foreign_store_says_what_to_do_without_its_path(app_env, foreign,
                                                                    monkeypatch):
    monkeypatch.setenv("HEADROOM_DB", str(foreign))
    monkeypatch.delenv("HEADROOM_DEBUG")
    before = sha(foreign)
    at = new_app().run()
    assert not at.exception
    shown = " ".join(e.value for e in at.error)
    assert "the operator must point HEADROOM_DB at a headroom store" in shown
    assert str(foreign.parent) not in shown
    assert sha(foreign) == before


def test_a_reading_command_never_migrates_an_older_store(tmp_path, cli):
    db = tmp_path / "old.duckdb"
    store_at_version(db, 12).close()
    before = sha(db)
    code, doc = cli(db, "datasets")
    assert code == 2 and "schema 12" in doc["error"] and "headroom migrate" in doc["error"]
    assert sha(db) == before
    code, doc = cli(db, "migrate")
    assert code == 0
    assert doc == {"store": str(db), "schema_version_before": 12,
                   "schema_version": store.SCHEMA_VERSION, "migrated": True}
    assert cli(db, "datasets")[:2] == (0, [])
    assert cli(db, "migrate")[1]["migrated"] is False


def test_a_store_of_a_newer_headroom_is_refused(tmp_path, cli):
    db = tmp_path / "new.duckdb"
    store.connect(db).close()
    con = duckdb.connect(str(db))
    con.execute("INSERT INTO schema_version VALUES (99, now())")
    con.close()
    code, doc = cli(db, "ingest", str(shared(CONV)))
    assert code == 2 and "schema 99, newer than this headroom's" in doc["error"]


def test_special_paths_and_text_files_are_named_as_what_they_are(tmp_path, cli):
    fifo, folder, text = tmp_path / "pipe", tmp_path / "folder", tmp_path / "notes.duckdb"
    os.mkfifo(fifo)
    folder.mkdir()
    text.write_text("not a database\n")
    db = tmp_path / "s.duckdb"
    assert "is a FIFO (named pipe), not a file" in cli(db, "ingest", str(fifo))[1]["error"]
    assert "is a directory, not a file" in cli(db, "ingest", str(folder))[1]["error"]
    assert cli(db, "ingest", str(tmp_path / "gone.csv"))[1]["error"].endswith("no such file")
    code, doc = cli(folder, "datasets")
    assert code == 2 and "it is a directory, not a file" in doc["error"]
    code, doc = cli(fifo, "datasets")
    assert code == 2 and "it is a FIFO" in doc["error"]
    before = sha(text)
    code, doc = cli(text, "datasets")
    assert code == 2 and "is not a DuckDB database file" in doc["error"]
    assert "Restore it from a copy" in doc["error"] and "failing SQL" not in doc["error"]
    assert sha(text) == before


def test_a_bin_past_a_year_is_bad_input(tmp_path, cli):
    db = tmp_path / "s.duckdb"
    assert cli(db, "ingest", str(shared(CONV)))[0] == 0
    code, doc = cli(db, "grid", "AzureLLMInferenceTrace_conv", "--bin",
                    "100000000000000000000s")
    assert code == 2 and "longer than a year" in doc["error"]


@pytest.fixture
def tiny_disk(tmp_path):
    """A 2 MB tmpfs (skipped where this user may not mount one)."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2M", "tmpfs", str(mount)],
                          capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", str(mount)], check=False)


def test_a_full_disk_says_so_and_keeps_the_store_as_it_was(tiny_disk, cli):
    db = tiny_disk / "s.duckdb"
    assert cli(db, "ingest", str(shared(CONV)))[0] == 0
    code, doc = cli(db, "ingest", str(shared(CODE)))  # 0.3 MB more does not fit
    assert code == 1
    assert doc["error"].startswith("the disk that holds the store is full")
    assert "no transaction is active" not in doc["error"]
    code, listed = cli(db, "datasets")
    assert code == 0 and [(d["name"], d["rows"]) for d in listed] == [
        ("AzureLLMInferenceTrace_conv", 19366)]


def test_a_busy_store_tells_a_browser_user_no_server_path(app_env, tmp_path, monkeypatch):
    db = app_env["db"]
    store.connect(db).close()
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time\n"
                               f"c = duckdb.connect({str(db)!r}); print('held', flush=True)\n"
                               "time.sleep(120)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        monkeypatch.setenv("HEADROOM_STORE_WAIT_S", "1")
        at = new_app().run()
        assert not at.exception
        shown = " ".join(w.value for w in at.warning)
        assert "the store is busy" in shown and str(tmp_path) not in shown
        assert "python" not in shown and str(holder.pid) not in shown
    finally:
        holder.kill()
        holder.wait()


def _foreign(path, *sql) -> None:
    con = duckdb.connect(str(path))
    for statement in sql:
        con.execute(statement)
    con.close()


@pytest.mark.parametrize("sql", [
    ("CREATE SCHEMA app", "CREATE TABLE app.events (x INTEGER)", "INSERT INTO app.events VALUES (1)"),
    ("CREATE SEQUENCE s", "CREATE MACRO twice(x) AS x * 2", "CREATE TYPE mood AS ENUM ('ok')"),
])
def test_a_foreign_file_with_nothing_in_main_is_still_refused(tmp_path, cli, sql):
    """Found by the break-it review: a database whose objects are all outside ``main`` (or are
    a sequence, a macro, a type) was taken for an empty one and migrated into."""
    path = tmp_path / "other.duckdb"
    _foreign(path, *sql)
    before = sha(path)
    for args in (("datasets",), ("migrate",)):
        code, doc = cli(path, *args)
        assert code == 2 and "not a headroom store" in doc["error"], args
    assert sha(path) == before


def test_a_foreign_files_pending_log_is_left_as_it_is(tmp_path, cli):
    """Found by the break-it review: a writing command opened another program's database
    read-write before it was identified, which replayed and deleted its write-ahead log."""
    path = tmp_path / "other.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t (x INTEGER)")
    con.execute("CHECKPOINT")
    con.execute("PRAGMA disable_checkpoint_on_shutdown")
    con.execute("INSERT INTO t VALUES (1), (2)")
    con.close()
    wal = path.with_name(path.name + ".wal")
    assert wal.exists()
    before = (sha(path), sha(wal))
    for args in (("migrate",), ("ingest", str(shared(CONV))), ("delete", "x")):
        code, doc = cli(path, *args)
        assert code == 2 and "not a headroom store" in doc["error"], args
    assert (sha(path), sha(wal)) == before


def test_an_empty_file_becomes_a_store_and_a_fifo_log_is_refused(tmp_path, cli):
    """A 0-byte file (what a creation on a full disk leaves) is made a new store instead of
    being refused for good; a write-ahead log that is a FIFO is refused (opening it hung)."""
    empty = tmp_path / "empty.duckdb"
    empty.touch()
    assert cli(empty, "datasets") == (0, [])
    db = tmp_path / "s.duckdb"
    os.mkfifo(tmp_path / "s.duckdb.wal")
    code, doc = cli(db, "datasets")
    assert code == 2 and "s.duckdb.wal as the store: it is a FIFO" in doc["error"]


def test_a_large_dataset_is_exported_to_a_file_not_built_in_memory(tmp_path, cli, monkeypatch):
    """Found by the break-it review: the Data page built a 20 M-row dataset's download in
    memory (past 6 GB). Past EXPORT_MAX_CELLS (lowered here) the page offers no download and
    names ``headroom export``, which streams every row to a file with DuckDB's COPY."""
    import polars as pl

    from analytics.services import data

    db = tmp_path / "s.duckdb"
    assert cli(db, "ingest", str(shared(CONV)))[0] == 0
    out = tmp_path / "conv.parquet"
    code, doc = cli(db, "export", "AzureLLMInferenceTrace_conv", "--out", str(out))
    assert code == 0 and (doc["rows"], doc["format"]) == (19366, "parquet")
    # a folder that does not exist: exit 2 naming it (was exit 1 with DuckDB's COPY statement)
    code, doc = cli(db, "export", "AzureLLMInferenceTrace_conv", "--out",
                    str(tmp_path / "missing" / "x.csv"))
    assert code == 2 and "does not exist" in doc["error"] and "COPY" not in doc["error"]
    written = pl.read_parquet(out)
    con = store.connect(db, read_only=True)
    assert written.height == 19366
    assert written["prompt_tokens"].sum() == con.execute(
        "SELECT sum(prompt_tokens) FROM requests").fetchone()[0]
    monkeypatch.setattr(data, "EXPORT_MAX_CELLS", 1000)
    why = data.export_refusal(con, "AzureLLMInferenceTrace_conv")
    assert "19,366 rows: too large to build as a download here" in why
    assert "headroom export AzureLLMInferenceTrace_conv --out FILE" in why
    with pytest.raises(ValueError, match="too large"):
        data.export(con, "AzureLLMInferenceTrace_conv", "csv")
    con.close()
