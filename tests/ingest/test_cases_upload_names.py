"""Issue 14 item 15: files that share a base name are all ingested under unique names (folder,
``Hostname`` in the file, or a numeric suffix), in the CLI and in browser uploads; a browser
user never meets a dead end that points to a CLI flag."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
from conftest import REPO, SHARED_DATA
from harness import missing, strict_loads

from analytics import store
from analytics.config import ParseOptions
from analytics.services import data

CASE = SHARED_DATA.parent / "cases" / "28-duplicate-upload-names"
POWER = {"metrics-node-a": [101.25, 99.5], "metrics-node-b": [655.0, 640.75]}


@pytest.fixture
def case_dir():
    if not CASE.exists():
        missing(CASE)
    return CASE


class Upload(io.BytesIO):
    """A browser upload as Streamlit hands it over: the bytes and the base name only."""

    def __init__(self, path, name=None):
        super().__init__(path.read_bytes())
        self.name = name or path.name


def cli(db, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "analytics.cli", "--db", str(db), *args],
                          cwd=REPO, capture_output=True, text=True, timeout=300)


def power_by_gpu(con, name) -> list[float]:
    rows = store.dataset_rows(con, name).sort_values("gpu_id")
    return rows["power_w"].tolist()


def test_case_28_cli_names_from_the_folders(case_dir, tmp_path):
    db = tmp_path / "h.duckdb"
    run = cli(db, "ingest", *(str(p) for p in sorted(case_dir.glob("*/metrics.prom"))))
    assert run.returncode == 0, run.stderr
    doc = strict_loads(run.stdout)
    assert [(d["dataset"], d["status"], d["rows"]) for d in doc] == [
        ("metrics-node-a", "ingested", 2), ("metrics-node-b", "ingested", 2)]
    assert "2 files of this batch are called 'metrics'" in doc[0]["warnings"][0]["message"]
    con = store.connect(db)
    try:
        for name, watts in POWER.items():
            assert power_by_gpu(con, name) == watts
    finally:
        con.close()


def test_case_28_browser_upload_names_from_hostname(case_dir, con):
    ups = [Upload(case_dir / "node-a" / "metrics.prom"), Upload(case_dir / "node-b" / "metrics.prom")]
    res = data.ingest_uploads(con, ups, ParseOptions(), 10**8)
    assert [(r["file"], r["dataset"], r["status"]) for r in res] == [
        ("metrics.prom", "metrics-node-a", "ingested"), ("metrics.prom", "metrics-node-b",
                                                         "ingested")]
    assert "2 uploaded files are called 'metrics'" in res[0]["warnings"][0]["message"]
    for name, watts in POWER.items():
        assert power_by_gpu(con, name) == watts
    # the same two uploads again: the same bytes, nothing added, no error
    again = data.ingest_uploads(con, [Upload(case_dir / "node-a" / "metrics.prom")],
                                ParseOptions(), 10**8)
    assert (again[0]["status"], again[0]["dataset"]) == ("duplicate", "metrics-node-a")


def test_case_28_later_upload_reusing_a_name_gets_a_free_one(case_dir, con):
    first = data.ingest_uploads(con, [Upload(case_dir / "node-a" / "metrics.prom")],
                                ParseOptions(), 10**8)
    assert first[0]["dataset"] == "metrics"
    later = data.ingest_uploads(con, [Upload(case_dir / "node-b" / "metrics.prom")],
                                ParseOptions(), 10**8)
    assert (later[0]["status"], later[0]["dataset"]) == ("ingested", "metrics-node-b")
    msg = later[0]["warnings"][0]["message"]
    assert "already used by other content" in msg and "--name" not in msg
    assert power_by_gpu(con, "metrics") == [101.25, 99.5]
    assert power_by_gpu(con, "metrics-node-b") == [655.0, 640.75]


def vllm_result(tmp_path, folder, concurrency):
    case = SHARED_DATA.parent / "cases" / "19-vllm-bench-request-rate-no-concurrency.json"
    if not case.exists():
        missing(case)
    doc = dict(json.loads(case.read_text()), max_concurrency=concurrency)
    path = tmp_path / folder / "results.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(doc))
    return path


def test_two_vllm_results_json_in_one_upload_and_one_cli_call(tmp_path, con):
    a, b = vllm_result(tmp_path, "run-c8", 8), vllm_result(tmp_path, "run-c32", 32)
    res = data.ingest_uploads(con, [Upload(a), Upload(b)], ParseOptions(), 10**8)
    # no host or site in a bench result: the first keeps the stem, the second is numbered
    assert [(r["dataset"], r["status"]) for r in res] == [("results", "ingested"),
                                                          ("results-2", "ingested")]
    assert store.dataset_rows(con, "results-2")["concurrency"].tolist() == [32.0]
    db = tmp_path / "cli.duckdb"
    run = cli(db, "ingest", str(a), str(b))
    assert run.returncode == 0, run.stderr
    assert [d["dataset"] for d in strict_loads(run.stdout)] == ["results-run-c8", "results-run-c32"]


def test_two_same_named_csvs_in_one_call_without_telling_folders(tmp_path, con):
    # same file name, folders with the same name too: numbered
    paths = []
    for site, n in (("east", 100), ("west", 250)):
        path = tmp_path / site / "day" / "requests.csv"
        path.parent.mkdir(parents=True)
        path.write_text(f"ts,prompt_tokens,completion_tokens\n2024-01-01T00:00:00,{n},10\n")
        paths.append(path)
    res = data.ingest_paths(con, paths)
    assert [r["dataset"] for r in res] == ["requests", "requests-2"]
    assert store.dataset_rows(con, "requests-2")["prompt_tokens"].tolist() == [250]
    # a third file of that name in a later CLI call: strict name, a message saying what to do
    third = tmp_path / "requests.csv"
    third.write_text("ts,prompt_tokens,completion_tokens\n2024-01-02T00:00:00,7,1\n")
    with pytest.raises(store.NameTaken) as err:
        data.ingest_paths(con, [third])
    assert "--name NEW_NAME" in str(err.value) and "headroom delete requests" in str(err.value)
    assert data.ingest_paths(con, [third], name="requests-jan2")[0]["status"] == "ingested"


def test_upload_temporaries_live_in_one_folder_cleaned_on_start(case_dir, con, tmp_path):
    """Issue 16 item 6, issue 34 item 8: uploads stream into one folder, each named with its
    server's PID; at the next start the files of a server process that is gone are removed
    (however fresh), a live server's are kept, and a file without a PID goes only when stale."""
    import os
    import subprocess
    import sys
    import time

    folder = tmp_path / "uploads-tmp"
    folder.mkdir()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    killed = folder / f"upload-{gone}-0a1b.csv"  # fresh, but its server is gone
    live = folder / f"upload-{os.getppid()}-2c3d.csv"  # another server that still runs
    stale, fresh = folder / "upload-abc.csv", folder / "upload-def.csv"
    for path in (killed, live, stale, fresh):
        path.write_bytes(b"x" * 1000)
    old = time.time() - 7 * 3600
    os.utime(stale, (old, old))
    (folder / "notes.txt").write_text("not ours")
    assert data.clean_upload_dir(folder) == 2
    assert sorted(p.name for p in folder.iterdir()) == sorted(["notes.txt", "upload-def.csv",
                                                               live.name])
    live.unlink()
    res = data.ingest_uploads(con, [Upload(case_dir / "node-a" / "metrics.prom")],
                              ParseOptions(), 10**8, folder)
    assert res[0]["status"] == "ingested"
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt", "upload-def.csv"]
