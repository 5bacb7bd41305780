"""The synthetic demo (issue 31 item 9): one labelled dataset per kind of input, stored in one
transaction, never preferred over measured benchmarks."""

from __future__ import annotations

import pytest
from harness import shared

from analytics import serving, store
from analytics.config import SYNTHETIC_SOURCE
from analytics.hardware.catalog import CATALOG
from analytics.ingest import demo
from analytics.ingest import files as ingest

BENCH = ("ml_energy/leaderboard_v3/all_task_configurations_flat.csv",
         "llm_inference_bench_argonne/Fig_21__all_results_TTFT.csv")


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("demo") / "d.duckdb"
    con = store.connect(db)
    first = demo.ingest_demo(con)
    again = demo.ingest_demo(con)
    con.close()
    return db, first, again


def test_demo_stores_one_synthetic_dataset_per_kind_once(demo_db):
    db, first, again = demo_db
    assert [r["dataset"] for r in first] == list(demo.NAMES.values())
    assert {r["status"] for r in first} == {"ingested"}
    assert {r["status"] for r in again} == {"duplicate"}  # a second click adds nothing
    con = store.connect(db, read_only=True)
    ledger = store.list_datasets(con).set_index("name")
    con.close()
    for table, name in demo.NAMES.items():
        assert ledger.loc[name, "kind"] == table
        assert bool(ledger.loc[name, "synthetic"]) is True
    # sizes follow from the stated shapes: 3 sites x 14 days x 24 h; 8 GPUs x 6 h of 5-s samples
    assert ledger.loc["synthetic_demo_carbon", "rows"] == 3 * 14 * 24
    assert ledger.loc["synthetic_demo_telemetry", "rows"] == 8 * 6 * 3600 // 5
    # 10 jobs/h over 14 days, Poisson: within 4 standard deviations of 3,360
    assert abs(ledger.loc["synthetic_demo_jobs", "rows"] - 3360) < 4 * 3360 ** 0.5


def test_demo_request_trace_is_the_one_the_demo_always_had(demo_db):
    """The request trace keeps its digest and rows (a store holding it sees a duplicate)."""
    db, first, _ = demo_db
    assert first[0]["rows"] == 161193
    con = store.connect(db, read_only=True)
    sha = store.dataset(con, "synthetic_demo_14d")["sha256"]
    con.close()
    assert sha == "synthetic-seed0-days14"


def test_roofline_grid_stays_near_the_measured_reference(demo_db):
    """The grid is a model, not a measurement, but the H100 8 B BF16 TP1 batch-256 point lands
    within 25 % of ML.ENERGY v3's measured 9,806 tok/s at its highest-throughput batch
    (the catalog's ``ref_tok_s``; the grid's largest batch is 256)."""
    db, _, _ = demo_db
    con = store.connect(db, read_only=True)
    b = store.bench_runs(con)
    con.close()
    assert set(b["source"]) == {SYNTHETIC_SOURCE}
    row = b[(b["hardware"] == "H100-80GB") & (b["model"] == "synthetic/dense-8b")
            & (b["precision"] == "bf16") & (b["tp"] == 1) & (b["concurrency"] == 256)].iloc[0]
    ref = CATALOG["H100-80GB"].ref_tok_s
    assert 0.75 * ref < row["throughput_tok_s"] < 1.25 * ref
    # per-GPU power within the spec's idle..max range at every point
    per_gpu = b["power_w"] / b["n_gpus"]
    idle = b["hardware"].map(lambda k: CATALOG[k].idle_w)
    tdp = b["hardware"].map(lambda k: CATALOG[k].tdp_w)
    assert ((per_gpu > 0.9 * idle) & (per_gpu < 1.1 * tdp)).all()
    # a 70 B model in BF16 (140 GB) never runs on one 40 GB A100
    a100 = b[(b["hardware"] == "A100-40GB") & (b["model"] == "synthetic/dense-70b")]
    assert a100["tp"].min() >= 4


def test_demo_profiles_serve_when_nothing_measured_and_say_synthetic(demo_db):
    db, _, _ = demo_db
    con = store.connect(db, read_only=True)
    bench = store.bench_runs(con)
    con.close()
    assert serving.available_gpus(bench) == ["H100-80GB", "A100-40GB"]
    profs = serving.profiles_from_bench(bench, "H100-80GB")
    # single-GPU profiles: the 70 B model (140 GB in BF16) does not fit one 80 GB H100
    assert [p.model for p in profs] == ["synthetic/dense-14b", "synthetic/dense-8b"]
    tok_s, cite = serving.prefill_reference(bench, "H100-80GB")
    assert cite.startswith("SYNTHETIC") and "not measured" in cite
    # 8 B x 2 FLOP per token at 50 % of 989.5 TFLOP/s: about 31,000 prefill tokens/s
    assert tok_s == pytest.approx(0.5 * 989.5e12 / (2 * 8e9), rel=0.1)


def test_measured_benchmarks_win_over_the_demo(tmp_path):
    """With ML.ENERGY and Argonne rows stored beside the demo, the serving profiles and the
    prefill reference come from the measured rows only."""
    con = store.connect(tmp_path / "m.duckdb")
    demo.ingest_demo(con)
    for rel in BENCH:
        path = shared(rel)
        ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    bench = store.bench_runs(con)
    con.close()
    profs = serving.profiles_from_bench(bench, "H100-80GB")
    assert profs and not any(p.model.startswith("synthetic/") for p in profs)
    assert all("ML.ENERGY v3" in p.rows for p in profs)
    tok_s, cite = serving.prefill_reference(bench, "H100-80GB")
    assert cite.startswith("Argonne")
    assert tok_s == pytest.approx(16 * 1024 / 0.425665008)


def _cli(capsys, db, *args) -> dict:
    from harness import strict_loads

    from analytics.cli import main

    capsys.readouterr()
    code = main(["--db", str(db), *args])
    out, err = capsys.readouterr()
    assert code == 0, (args, err[-2000:])
    return strict_loads(out)


def test_every_analysis_answers_on_the_demo_and_names_its_synthetic_inputs(demo_db, capsys,
                                                                          monkeypatch, tmp_path):
    """The CLI side of the demo: each analysis answers on it, and its document names the
    synthetic datasets it was computed from (a document from measured data has no such key:
    tests/cli/test_cli.py's golden documents are unchanged)."""
    monkeypatch.setenv("HEADROOM_CACHE_DIR", str(tmp_path / "cache"))
    db = demo_db[0]
    trace = "synthetic_demo_14d"
    expect = {
        ("capacity", trace): [trace],
        ("dispatch", trace, "--sites", "SYN-SOLAR,SYN-HYDRO"): [trace, "synthetic_demo_carbon"],
        ("powersim", "--jobs", "synthetic_demo_jobs", "--days", "1", "--warmup-days", "1"):
            [trace, "synthetic_demo_jobs"],
        ("telemetry", "summary", "synthetic_demo_telemetry"): ["synthetic_demo_telemetry"],
        ("serve-energy", trace, "--models", "2", "--policy", "festina", "--window-s", "600"):
            [trace, "synthetic_demo_bench"],
        ("advise", "--model", "synthetic/dense-8b", "--params-b", "8", "--concurrency", "64",
         "--in-len", "600", "--out-len", "180", "--task", "chat", "--no-store"):
            ["synthetic_demo_jobs", "synthetic_demo_bench"],
    }
    for args, names in expect.items():
        doc = _cli(capsys, db, *args)
        assert doc["synthetic_datasets"] == names, args
    dispatch = _cli(capsys, db, "dispatch", trace, "--sites", "SYN-SOLAR,SYN-COAL,SYN-HYDRO")
    # the LP moves load to the low-carbon made-up site: carbon-aware below all-at-home
    assert dispatch["carbon_aware_tco2e"] < dispatch["baseline_tco2e"]


def test_advise_queue_weight_and_restart_cost_are_flags(demo_db, capsys, monkeypatch, tmp_path):
    """Issue 33 item 7: the queue weight and restart cost (headroom's constants: the paper names
    the terms without values) are flags. Derived from the utility's terms (decide.utility):
    utility = value - compute - queue_weight x wait_h x rate - (1 - p_launch) x restart_h x
    rate. The demo's jobs wait 0-10 min and all complete (p_launch = 1), so doubling the queue
    weight from 1 to 2 lowers the arm's utility by exactly what 0 to 1 did, and the restart
    cost changes nothing."""
    monkeypatch.setenv("HEADROOM_CACHE_DIR", str(tmp_path / "cache"))
    base = ("advise", "--model", "synthetic/dense-8b", "--params-b", "8", "--concurrency", "64",
            "--in-len", "600", "--out-len", "180", "--task", "chat", "--no-store")
    db = demo_db[0]

    def utility_of(*flags) -> dict:
        doc = _cli(capsys, db, *base, *flags)
        return {(a["hardware"], a["tp"], a["precision"]): a for a in doc["arms"]}

    w0, w1, w2 = (utility_of("--queue-weight", w) for w in ("0", "1", "2"))
    arm = next(k for k, a in w1.items() if a["rank"] == 1)
    assert w1[arm]["p_launch"] == 1.0
    step = w0[arm]["utility"] - w1[arm]["utility"]
    assert step > 0 and w1[arm]["utility"] - w2[arm]["utility"] == pytest.approx(step)
    r5 = utility_of("--restart-h", "5")
    assert r5[arm]["utility"] == pytest.approx(w1[arm]["utility"])
