"""Grid: completeness, token conservation, weights, bin refusal, chronological split."""

from __future__ import annotations

import pandas as pd
import polars as pl
import pytest
from conftest import shared

from analytics.config import Weights
from analytics.envelope import grid
from analytics.ingest import files as ingest
from analytics.services.demand import demand_grid


def _load(con, rel):
    path = shared(rel)
    ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    return path


def test_azure_conv_grid_complete_and_conserves_tokens(con):
    path = _load(con, "azure_llm/AzureLLMInferenceTrace_conv.csv")
    g = demand_grid(con, "AzureLLMInferenceTrace_conv", "5min")
    raw = pl.read_csv(path)
    first = pd.Timestamp("2023-11-16 18:15:00")
    last = pd.Timestamp("2023-11-16 19:10:00")
    assert g["ts"].iloc[0] == first and g["ts"].iloc[-1] == last
    assert list(g["ts"]) == list(pd.date_range(first, last, freq="5min"))
    assert g["target"].sum() == raw["ContextTokens"].sum() + raw["GeneratedTokens"].sum()
    assert g["requests"].sum() == 19366


def test_weights_apply_per_token_kind_and_model(con):
    _load(con, "burstgpt/BurstGPT_1_head400.csv")
    rows = pl.read_csv(shared("burstgpt/BurstGPT_1_head400.csv"))
    g = demand_grid(con, "BurstGPT_1_head400", "1h", Weights(1.0, 3.0))
    assert g["target"].sum() == rows["Request tokens"].sum() + 3 * rows["Response tokens"].sum()
    per_model = Weights(1.0, 1.0, per_model=(("GPT-4", 2.0, 5.0),))
    g2 = demand_grid(con, "BurstGPT_1_head400", "1h", per_model)
    gpt4 = rows.filter(pl.col("Model") == "GPT-4")
    chat = rows.filter(pl.col("Model") == "ChatGPT")
    want = (chat["Total tokens"].sum() + 2 * gpt4["Request tokens"].sum()
            + 5 * gpt4["Response tokens"].sum())
    assert g2["target"].sum() == want
    no_fail = demand_grid(con, "BurstGPT_1_head400", "1h", Weights(include_failed=False))
    assert no_fail["requests"].sum() == 400 - 17


def test_per_minute_aggregate_zero_fills_absent_minutes(con):
    _load(con, "burstgpt/derived/burstgpt1_week1_per_minute_tps.csv")
    g = demand_grid(con, "burstgpt1_week1_per_minute_tps", "1min")
    assert len(g) == 10080  # 7 days of minutes, 0 .. 10079
    present = pl.read_csv(shared("burstgpt/derived/burstgpt1_week1_per_minute_tps.csv"))["t"]
    absent = g.drop(index=present.to_list())
    assert len(absent) == 10080 - 6366 and (absent["target"] == 0).all()
    assert g["requests"].isna().all()
    g5 = demand_grid(con, "burstgpt1_week1_per_minute_tps", "5min")
    assert len(g5) == 2016
    assert g5["target"].sum() == pytest.approx(g["target"].sum())


def test_finer_bin_than_data_is_a_clear_error(con):
    _load(con, "burstgpt/derived/burstgpt1_daily_requests_tokens.csv")
    with pytest.raises(grid.GridError, match="finer than the data's own 86400 s"):
        demand_grid(con, "burstgpt1_daily_requests_tokens", "1h")
    g = demand_grid(con, "burstgpt1_daily_requests_tokens", "1d")
    assert len(g) == 61 and int(g["requests"].sum()) == 1_429_737


def test_non_demand_dataset_refused(con):
    _load(con, "sustaindc_dcrl/CarbonIntensity/AZPS_NG_&_avgCI.csv")
    with pytest.raises(grid.GridError, match="not LLM demand"):
        demand_grid(con, "AZPS_NG_&_avgCI")


def test_split_days_and_fractions():
    s = grid.chronological_split(61 * 288, 300)
    assert s.mode == "days" and s.sizes == (42 * 288, 9 * 288, 10 * 288)
    assert s.fit.stop == s.calibration.start and s.calibration.stop == s.test.start
    short = grid.chronological_split(7 * 288, 300)
    assert short.mode == "fractions" and sum(short.sizes) == 7 * 288
    with pytest.raises(ValueError, match="fewer than"):
        grid.chronological_split(7 * 288, 300, days=(42, 9, 10))
    with pytest.raises(ValueError, match="sum to 1"):
        grid.chronological_split(100, 300, fractions=(0.5, 0.5, 0.5))


def test_gpu_seconds_target_for_lora_trace(con):
    _load(con, "alibaba_gpu_traces/v2026_genai/lora_request_trace.csv")
    g = demand_grid(con, "lora_request_trace", "1h", Weights(target="gpu_seconds"))
    raw = pl.read_csv(shared("alibaba_gpu_traces/v2026_genai/lora_request_trace.csv"))
    assert g["target"].sum() == raw["exec_time_seconds"].sum()
    assert g["requests"].sum() == 26823
    with pytest.raises(grid.GridError, match="no token counts"):
        demand_grid(con, "lora_request_trace", "1h")
    _load(con, "azure_llm/AzureLLMInferenceTrace_code.csv")
    with pytest.raises(grid.GridError, match="no GPU execution time"):
        demand_grid(con, "AzureLLMInferenceTrace_code", "5min",
                         Weights(target="gpu_seconds"))


def test_default_weight_fast_path_equals_per_row_weights(con):
    """The default weights skip the per-row target expression and the per-model join (issue
    15): the grid must be the one the general path (a per-model weight of 1, 1) computes."""
    _load(con, "burstgpt/BurstGPT_3_slice400.csv")
    name = "BurstGPT_3_slice400"
    for include_failed in (True, False):
        fast = demand_grid(con, name, "5min", Weights(include_failed=include_failed))
        general = demand_grid(con, name, "5min", Weights(
            per_model=(("no-such-model", 1.0, 1.0),), include_failed=include_failed))
        pd.testing.assert_frame_equal(fast, general, check_exact=True)
        assert fast["ts"].is_monotonic_increasing and fast["ts"].diff().iloc[1:].nunique() == 1


def test_a_series_longer_than_61_days_splits_its_last_61():
    """Issue 33 (a planted bug lived: the split took the *first* 61 days). Derived: a 70-day
    5-min grid (20,160 bins) skips its first 9 days (2,592 bins); fit is days 10-51, calibration
    days 52-60, test days 61-70, ending at the last bin."""
    s = grid.chronological_split(70 * 288, 300)
    assert s.mode == "days"
    assert (s.fit.start, s.fit.stop) == (9 * 288, 51 * 288)
    assert (s.calibration.start, s.calibration.stop) == (51 * 288, 60 * 288)
    assert (s.test.start, s.test.stop) == (60 * 288, 70 * 288)
