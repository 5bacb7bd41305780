"""The data behind each page's first chart (issue 15: "cold first chart < 3 s on every page"):
cheap reads, drawn before the long work, checked against the real staged files they come from.
"""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import shared
from harness import seed

from analytics import store
from analytics.envelope import pipeline
from analytics.services import advisor, decisions
from analytics.services import power as power_service


def _store(tmp_path, *rels):
    seed(tmp_path / "s.duckdb", *rels)
    return store.connect(tmp_path / "s.duckdb")


def test_split_preview_labels_the_bins_as_the_envelope_splits_them(week_grid, week_envelope):
    preview = pipeline.split_preview(week_grid, 300, pipeline.EnvelopeParams(n_boot=100))
    assert list(preview["part"]) == list(week_envelope.series["part"])
    assert (preview["y"].to_numpy() == week_envelope.series["y"].to_numpy()).all()
    with pytest.raises(ValueError, match="at least 3 bins"):
        pipeline.split_preview(week_grid.head(2), 300)


def test_site_carbon_profile_is_the_hourly_mean_of_the_sustaindc_file(tmp_path):
    rel = "sustaindc_dcrl/CarbonIntensity/CISO_NG_&_avgCI.csv"
    con = _store(tmp_path, rel)
    prof = decisions.site_carbon_profile(con, ("CISO",))
    raw = pd.read_csv(shared(rel))
    hour = pd.to_datetime(raw["timestamp"], utc=True).dt.hour
    want = raw.groupby(hour)["avg_CI"].mean()
    assert list(prof["hour_utc"]) == list(range(24)) and set(prof["basis"]) == {"avg"}
    assert prof["gco2_per_kwh"].to_numpy() == pytest.approx(want.to_numpy())
    assert prof["days"].sum() == raw["avg_CI"].notna().sum()
    with pytest.raises(KeyError):
        decisions.site_carbon_profile(con, ("NOWHERE",))


def test_bench_support_counts_every_benchmark_row(bench_db):
    con = store.connect(bench_db, read_only=True)
    try:
        support, bench = advisor.bench_support(con), store.bench_runs(con)
    finally:
        con.close()
    assert support["runs"].sum() == len(bench)
    assert not set(support["precision"]) & {"full_prec", "int8_sq"}  # canonical labels
    h100 = support[(support["hardware"] == "H100-80GB") & (support["precision"] == "fp8")].iloc[0]
    rows = bench[(bench["hardware"] == "H100-80GB") & (bench["precision"] == "fp8")]
    assert h100["runs"] == len(rows) and h100["models"] == rows["model"].nunique()
    assert h100["tp"] == ", ".join(str(int(t)) for t in sorted(set(rows["tp"])))


def test_jobs_per_day_sums_the_gpu_hours_of_the_mit_supercloud_jobs(tmp_path):
    con = _store(tmp_path, "mit_supercloud/slurm-log-queueing-clean.csv")
    name = store.list_datasets(con)["name"].iloc[0]
    daily, jobs = power_service.jobs_per_day(con, name), store.gpu_jobs(con, name)
    assert daily["jobs"].sum() == len(jobs)
    assert daily["gpu_h"].sum() == pytest.approx(
        (jobs["gpu_milli"] / 1000 * jobs["runtime_s"] / 3600).sum())
    assert daily["day"].is_monotonic_increasing and (daily["day"].dt.hour == 0).all()
