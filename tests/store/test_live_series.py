"""The live series is a dataset that grows (issue 29 item 2): every closed bin of known demand
is appended to the run's ``demand_series`` dataset through the ingest road's append, in the
transaction that stores the bin; gaps have no row (said in the dataset's warnings); a repeat
appends nothing; a deleted series, or a run stored before schema 19, is rebuilt from the
run's stored bins at its next save.

Bins: real 5-minute token totals of the BurstGPT week 1 (per-minute TPS x 60, summed)."""

from __future__ import annotations

import pandas as pd
import pytest
from harness import shared, store_at_version

from analytics import store
from analytics.ingest import files as ingest
from analytics.services.demand import demand_grid

WEEK = "burstgpt/derived/burstgpt1_week1_per_minute_tps.csv"
T0 = pd.Timestamp("2024-03-04 00:00")


@pytest.fixture(scope="module")
def demand() -> list[float]:
    """The week's first 5-minute token totals (tokens/s x 60 s per minute, five minutes)."""
    tps = pd.read_csv(shared(WEEK))["tps"].to_numpy()
    return [float(v) for v in (tps[:60] * 60).reshape(-1, 5).sum(axis=1)]


def _records(values, start: int = 0) -> list[dict]:
    """Closed bins as the follower's records (only what the store reads): ``None`` is a gap."""
    return [{"ts": (T0 + pd.Timedelta(minutes=5 * (start + i))).isoformat(), "demand": v,
             "gap_reason": None if v is not None else "no sample in the bin"}
            for i, v in enumerate(values)]


def _config() -> dict:
    return {"model": "llama-3-8b", "history": "week", "engine": "vllm", "bin_s": 300,
            "alpha": 0.1, "w_prompt": 1.0, "w_completion": 1.0}


def _series(con, name: str) -> pd.DataFrame:
    return store.dataset_rows(con, name).sort_values("ts").reset_index(drop=True)


def test_bins_of_known_demand_are_appended_as_they_close(con, demand):
    store.start_live_run(con, "live:llama-3-8b", _config(), T0.to_pydatetime())
    v0 = store.data_version(con)
    first = [demand[0], None, demand[2]]  # the second bin is a gap of the source
    assert store.save_live_bins(con, "live:llama-3-8b", _records(first)) == 3
    run = store.live_run(con, "live:llama-3-8b")
    assert run["dataset"] == "live-llama-3-8b" and store.data_version(con) > v0
    info = store.dataset(con, "live-llama-3-8b")
    assert (info["kind"], info["format"], int(info["rows"])) == ("demand_series", "live", 2)
    rows = _series(con, "live-llama-3-8b")
    assert rows["tokens"].tolist() == [demand[0], demand[2]]
    assert rows["bin_s"].tolist() == [300, 300] and rows["requests"].isna().all()
    assert "1 bin(s) of unknown demand" in info["warnings"]
    # the next poll: a bin already stored (kept as it was) and two new ones
    v1 = store.data_version(con)
    again = _records([demand[2], demand[3], demand[4]], start=2)
    assert store.save_live_bins(con, "live:llama-3-8b", again) == 2
    rows = _series(con, "live-llama-3-8b")
    assert rows["tokens"].tolist() == [demand[0], demand[2], demand[3], demand[4]]
    info = store.dataset(con, "live-llama-3-8b")
    assert int(info["rows"]) == 4 and store.data_version(con) > v1
    assert pd.Timestamp(info["ts_max"]) == T0 + pd.Timedelta(minutes=20)
    assert info["warnings"].count("\n") == 0  # one line for the series, not one per append
    # the same poll again: nothing new, nothing appended, the version stays
    v2 = store.data_version(con)
    assert store.save_live_bins(con, "live:llama-3-8b", again) == 0
    assert store.data_version(con) == v2 and int(store.dataset(con, "live-llama-3-8b")["rows"]) == 4
    # its grid is the demand, the gap read as 0 tokens (as the warnings say)
    grid = demand_grid(con, "live-llama-3-8b", 300)
    assert grid["target"].tolist() == [demand[0], 0.0, demand[2], demand[3], demand[4]]
    with con.cursor() as cur:
        files = cur.execute("SELECT count(*) FROM dataset_files f JOIN datasets d "
                            "USING (dataset_id) WHERE d.name = 'live-llama-3-8b'").fetchone()[0]
    assert files == 2  # its creation and one append, each with its provenance
    summary = store.dataset_summary(con, "live-llama-3-8b")
    assert "vllm engine's prompt and generation token counters" in summary["sources"]["tokens"]


def test_a_deleted_series_is_rebuilt_from_the_runs_bins(con, demand):
    store.start_live_run(con, "r", _config(), T0.to_pydatetime())
    store.save_live_bins(con, "r", _records(demand[:3]))
    store.delete_dataset(con, "live-r")
    store.save_live_bins(con, "r", _records(demand[3:5], start=3))
    assert _series(con, "live-r")["tokens"].tolist() == demand[:5]


def test_a_series_name_taken_by_another_dataset_after_a_delete_starts_a_new_series(
        con, demand, tmp_path):
    """The run's series is deleted and a trace ingested under its name: the next save does not
    append live bins to that trace (another kind) but rebuilds the series under a free name."""
    store.start_live_run(con, "r", _config(), T0.to_pydatetime())
    store.save_live_bins(con, "r", _records(demand[:2]))
    store.delete_dataset(con, "live-r")
    path = tmp_path / "live-r.csv"
    path.write_bytes(shared("azure_llm/AzureLLMInferenceTrace_conv.csv").read_bytes())
    ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    assert store.save_live_bins(con, "r", _records([demand[2], float("nan")], start=2)) == 2
    assert store.live_run(con, "r")["dataset"] == "live-r-2"
    assert store.dataset(con, "live-r")["kind"] == "requests"
    assert _series(con, "live-r-2")["tokens"].tolist() == demand[:3]  # the NaN bin: no row


def test_a_taken_name_gives_the_series_another(con, demand, tmp_path):
    path = tmp_path / "live-r.csv"
    path.write_bytes(shared(WEEK).read_bytes())
    ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    before = store.dataset(con, "live-r")
    assert before["kind"] == "demand_series"
    store.start_live_run(con, "r", _config(), T0.to_pydatetime())
    store.save_live_bins(con, "r", _records(demand[:2]))
    assert store.live_run(con, "r")["dataset"] == "live-r-2"
    after = store.dataset(con, "live-r")  # the trace is untouched
    assert (after["rows"], after["ts_max"]) == (before["rows"], before["ts_max"])
    assert _series(con, "live-r-2")["tokens"].tolist() == demand[:2]


def test_a_run_stored_before_schema_19_gets_its_series(tmp_path, demand):
    db = tmp_path / "v18.duckdb"
    raw = store_at_version(db, 18)
    raw.execute("INSERT INTO live_runs VALUES ('old', '{\"bin_s\": 300, \"model\": \"m\"}', "
                "TIMESTAMP '2024-03-04 00:00', now())")
    for i, v in enumerate(demand[:3]):
        raw.execute("INSERT INTO live_bins (name, ts, demand, closed_at) VALUES ('old', ?, ?, "
                    "now())", [(T0 + pd.Timedelta(minutes=5 * i)).to_pydatetime(), v])
    raw.close()
    con = store.connect(db)  # migrates 18 -> 19
    try:
        assert store.live_run(con, "old")["dataset"] is None
        assert store.save_live_bins(con, "old", _records(demand[3:4], start=3)) == 1
        assert _series(con, store.live_run(con, "old")["dataset"])["tokens"].tolist() == \
            demand[:4]
    finally:
        con.close()


@pytest.mark.parametrize(("run", "name"), [
    ("live:meta-llama/Llama-3-8B", "live-meta-llama-Llama-3-8B"), ("my run", "live-my-run"),
    (":::", "live-run")])
def test_series_names_are_dataset_names(run, name):
    from analytics.config import check_dataset_name

    assert store.series_name(run) == check_dataset_name(name)


def test_a_deleted_series_name_taken_by_another_runs_series_is_never_appended_to(con, demand):
    """Break-it review: run A's series is deleted, run B (whose name sanitizes alike) makes its
    series under the freed name; A's next save rebuilds its own series under a free name,
    every bin of A, and B's series holds B's bins only."""
    store.start_live_run(con, "live:m", _config(), T0.to_pydatetime())
    store.save_live_bins(con, "live:m", _records(demand[:3]))
    assert store.live_run(con, "live:m")["dataset"] == "live-m"
    store.delete_dataset(con, "live-m")
    store.start_live_run(con, "m", _config(), T0.to_pydatetime())
    store.save_live_bins(con, "m", _records([v + 1 for v in demand[:2]]))
    assert store.live_run(con, "m")["dataset"] == "live-m"  # the freed name
    assert store.save_live_bins(con, "live:m", _records(demand[3:4], start=3)) == 1
    mine = store.live_run(con, "live:m")["dataset"]
    assert mine == "live-m-2"
    assert _series(con, mine)["tokens"].tolist() == demand[:4]  # rebuilt: nothing lost
    assert _series(con, "live-m")["tokens"].tolist() == [v + 1 for v in demand[:2]]


def test_a_user_file_is_not_appended_to_a_live_series(con, demand, tmp_path):
    store.start_live_run(con, "r", _config(), T0.to_pydatetime())
    store.save_live_bins(con, "r", _records(demand[:2]))
    before = int(store.dataset(con, "live-r")["rows"])
    path = tmp_path / "extra.csv"
    path.write_text("t,tps,norm\n0,1.0,0.1\n")
    from analytics.store.appends import AppendRefused

    with pytest.raises(AppendRefused, match="series of a live run: only the run appends"):
        ingest.ingest_files(con, [ingest.FileIn(path, path.name)], append_to="live-r")
    assert int(store.dataset(con, "live-r")["rows"]) == before
    assert store.save_live_bins(con, "r", _records(demand[2:3], start=2)) == 1  # still runs


def test_one_poll_with_a_bin_twice_stores_it_once_and_bad_demands_are_gaps_or_refused(
        con, demand):
    store.start_live_run(con, "r", _config(), T0.to_pydatetime())
    twice = _records([demand[0], demand[1]]) + _records([99.0], start=1)  # bin 1 twice
    assert store.save_live_bins(con, "r", twice) == 2
    assert _series(con, "live-r")["tokens"].tolist() == demand[:2]  # the first kept, once
    assert store.save_live_bins(con, "r", _records([float("inf")], start=2)) == 1
    run = store.live_run(con, "r")
    assert run["gaps"] == 1 and int(store.dataset(con, "live-r")["rows"]) == 2  # a gap
    with pytest.raises(ValueError, match="negative demand"):
        store.save_live_bins(con, "r", _records([-5.0], start=3))
    assert store.live_run(con, "r")["bins"] == 3  # nothing of the refused poll was written


def test_runs_of_non_ascii_names_get_distinct_series_names():
    names = {store.series_name(r) for r in ("live:модель", "live:模型", "live:éééé")}
    assert len(names) == 3 and all(n.startswith("live") for n in names)
