"""Issue 14 items 1 and 3 on the shared case files and on inputs of the same kinds.

Item 1: Slurm TRES strings list a typed GPU entry and the untyped total; GPUs are counted once
(the untyped total when present, else the typed sum) and MIG profiles are kept.
Item 3: a ``vllm bench serve`` request rate is a rate, never a concurrency; without
``max_concurrency`` the concurrency is measured by Little's law and labelled measured.
"""

from __future__ import annotations

import json

import pytest
from harness import case_file, store_at_version

from analytics import store
from analytics.ingest import files as ingest
from analytics.ingest.formats import FormatError, parse_file
from analytics.ingest.formats.jobs import count_gpus, is_mig

case = case_file  # a file of ../shared/cases


# --------------------------------------------------------------------------- item 1: GPU counts
def test_case_07_sacct_typed_and_untyped_gpus_counted_once(con):
    path = case("07-sacct-alloctres-typed-gpu.txt")
    p = parse_file(path)
    f = p.frame
    assert (p.format, p.table) == ("slurm_sacct", "jobs")
    assert f["job_id"].to_list() == ["3001", "3002", "3003", "3004"]
    assert f["n_gpus"].to_list() == [1, 1, 2, 8]
    assert f["elapsed_s"].to_list() == [3600.0, 7200.0, 1800.0, 86400.0]
    gpu_hours = float((f["n_gpus"] * f["elapsed_s"]).sum()) / 3600.0
    assert gpu_hours == 196.0
    assert f["gpu_kind"].to_list() == ["a100_3g.20gb", "h100", "nvidia_geforce_rtx_2080_ti",
                                       "h100"]
    assert f["mig_slice"].to_list() == [True, False, False, False]  # job 3001 is a MIG slice
    assert any("never both" in w for w in p.warnings)
    assert any("1 jobs ran on MIG slices" in w for w in p.warnings)
    # through the store: the same numbers come back
    ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    rows = store.jobs(con)
    assert rows["n_gpus"].tolist() == [1, 1, 2, 8]
    assert float((rows["n_gpus"] * rows["elapsed_s"]).sum()) / 3600.0 == 196.0
    assert rows.loc[rows["job_id"] == "3001", "mig_slice"].item() is True


REQ_ONLY = """JobID|User|Submit|Start|End|State|ExitCode|ReqTRES
5001|carol|2024-06-01T10:00:00|2024-06-01T10:00:05|2024-06-01T11:00:05|COMPLETED|0:0|\
billing=16,cpu=16,gres/gpu:a100=2,gres/gpu:v100=2,mem=64G,node=2
5002|carol|2024-06-01T10:01:00|2024-06-01T10:02:00|2024-06-01T10:32:00|COMPLETED|0:0|\
cpu=4,gres/gpu=2,gres/gpu:a100_1g.10gb=2,node=1
5003|dave|2024-06-01T10:02:00|Unknown|Unknown|PENDING|0:0|cpu=4,gres/gpu=3,node=1
"""


def test_sacct_reqtres_only_typed_entries_sum_to_the_total(tmp_path):
    path = tmp_path / "req.txt"
    path.write_text(REQ_ONLY)
    f = parse_file(path).frame
    # typed-only entries are summed; typed + untyped counts the untyped total once
    assert f["n_gpus"].to_list() == [4, 2, 3]
    assert f["gpu_kind"].to_list() == ["a100+v100", "a100_1g.10gb", None]
    assert f["mig_slice"].to_list() == [False, True, False]
    assert f["elapsed_s"].null_count() == 3  # no Elapsed column: not made up


def test_sacct_empty_allocation_is_zero_gpus_with_the_request_named(tmp_path):
    """A pending job's AllocTRES is empty: it holds no GPUs (as AllocGRES of case 33), and the
    request it was not granted is named in a note, never counted (issue 27 item 1)."""
    text = ("JobID|Submit|State|Elapsed|AllocTRES|ReqTRES\n"
            "6001|2024-06-01T10:00:00|PENDING|00:00:00||gres/gpu:h100=4,gres/gpu=4\n"
            "6002|2024-06-01T10:00:00|RUNNING|1-02:03:04|gres/gpu=x|\n")
    path = tmp_path / "fallback.txt"
    path.write_text(text.replace("gres/gpu=x", "gres/gpu:h100=8,gres/gpu=8"))
    p = parse_file(path)
    f = p.frame
    assert f["n_gpus"].to_list() == [0, 8]
    note = next(w for w in p.warnings if getattr(w, "column", None) == "AllocTRES")
    assert list(note.lines) == [2] and "ReqTRES not counted" in note.message
    assert p.sources["n_gpus"] == "AllocTRES"
    assert f["elapsed_s"].to_list() == [0.0, 93784.0]
    bad = tmp_path / "bad.txt"
    bad.write_text(text)
    with pytest.raises(FormatError) as exc:
        parse_file(bad)
    assert (exc.value.line, exc.value.column) == (3, "AllocTRES")
    bad.write_text(text.replace("00:00:00", "a day"))
    with pytest.raises(FormatError) as exc:
        parse_file(bad)
    assert (exc.value.line, exc.value.column) == (2, "Elapsed")


def test_count_gpus_rule_and_mig_profiles():
    assert count_gpus([("h100", 1), (None, 1)]) == (1, "h100", False)
    assert count_gpus([(None, 8), ("h100", 8)]) == (8, "h100", False)
    assert count_gpus([("a100", 2), ("v100", 2)]) == (4, "a100+v100", False)
    assert count_gpus([("a100_3g.20gb", 1), (None, 1)]) == (1, "a100_3g.20gb", True)
    assert count_gpus([]) == (0, None, False)
    assert is_mig("1g.10gb") and is_mig("H100_7G.80GB") and not is_mig("rtx_2080_ti")


def test_mit_supercloud_tres_ids_are_typed_and_summed(tmp_path):
    head = "id_job,id_user,time_submit,time_start,time_end,state,tres_req\n"
    path = tmp_path / "mit.csv"
    path.write_text(head + '1,u,1609535912,1609535920,1609539520,3,"1=20,1001=2,1002=2"\n'
                           '2,u,1609535912,1609535920,1609539520,3,"1=20,2=170000"\n')
    f = parse_file(path).frame
    assert f["n_gpus"].to_list() == [4, 0]
    assert f["gpu_kind"].to_list() == ["tesla+volta", None]
    assert f["mig_slice"].to_list() == [False, False]


# --------------------------------------------------------------------------- item 3: rate vs conc.
def test_case_19_request_rate_is_not_concurrency(con):
    path = case("19-vllm-bench-request-rate-no-concurrency.json")
    p = parse_file(path)
    row = p.frame.row(0, named=True)
    assert (p.format, row["hardware"], row["tp"]) == ("vllm_bench", "H100-80GB", 1)
    assert row["request_rate"] == 4.0
    assert row["concurrency"] != 4.0
    assert row["concurrency"] == pytest.approx(36.0, abs=0.05)  # 3.937 req/s x 9.150 s
    assert row["concurrency_measured"] is True
    assert any("MEASURED by Little's law" in w for w in p.warnings)
    # the tail percentiles the result carries (issue 30 item 1): p99 by vLLM's default
    assert (row["ttft_p99_ms"], row["itl_p99_ms"], row["tpot_ms"], row["tpot_p99_ms"]) == (
        171.3, 102.5, 70.3, 83.0)
    assert row["latency_p99_s"] == pytest.approx(10.4809)
    assert (row["ttft_p90_ms"], row["itl_p90_ms"], row["latency_p90_s"]) == (None, None, None)
    ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    runs = store.bench_runs(con)
    assert runs["request_rate"].item() == 4.0
    assert runs["concurrency"].item() == pytest.approx(36.0, abs=0.05)
    assert bool(runs["concurrency_measured"].item()) is True


def _doc(**over):
    doc = json.loads(case("19-vllm-bench-request-rate-no-concurrency.json").read_text())
    doc.update(over)
    return doc


def test_vllm_string_metadata_and_configured_concurrency(tmp_path):
    path = tmp_path / "conc.json"
    # --metadata key=value pairs arrive as strings; a set max_concurrency is configured
    path.write_text(json.dumps(_doc(request_rate="8.0", max_concurrency="16", failed="0",
                                    metadata={"hardware": "A100", "tp": "2"})))
    row = parse_file(path).frame.row(0, named=True)
    assert (row["request_rate"], row["concurrency"]) == (8.0, 16.0)
    assert row["concurrency_measured"] is False and row["failed"] is False and row["tp"] == 2


def test_vllm_unbounded_rate_measures_concurrency_and_missing_latency_leaves_it_empty(tmp_path):
    path = tmp_path / "inf.json"
    path.write_text(json.dumps(_doc(request_rate="inf", duration=50.0, completed=400,
                                    mean_e2el_ms=20000.0)))
    p = parse_file(path)
    row = p.frame.row(0, named=True)
    assert row["request_rate"] is None  # all requests at once: no finite rate
    assert row["concurrency"] == pytest.approx(160.0)  # 8 req/s x 20 s
    assert any("unbounded request rate" in w for w in p.warnings)
    doc = _doc()
    del doc["mean_e2el_ms"]
    path.write_text(json.dumps(doc))
    p = parse_file(path)
    row = p.frame.row(0, named=True)
    assert row["concurrency"] is None and row["request_rate"] == 4.0
    assert any("concurrency empty" in w for w in p.warnings)


def test_migration_7_adds_the_new_columns_to_an_old_store(tmp_path):
    db = tmp_path / "old.duckdb"
    raw = store_at_version(db, 6)
    raw.close()
    con = store.connect(db)
    jobs_cols = [r[0] for r in con.execute("DESCRIBE jobs").fetchall()]
    bench_cols = [r[0] for r in con.execute("DESCRIBE bench_runs").fetchall()]
    assert {"mig_slice", "elapsed_s"} <= set(jobs_cols)
    assert {"request_rate", "concurrency_measured"} <= set(bench_cols)
    path = case("07-sacct-alloctres-typed-gpu.txt")
    ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    assert store.jobs(con)["n_gpus"].sum() == 12
    con.close()
