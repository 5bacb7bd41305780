"""Dispatch: tCO2e arithmetic, PUE model, LP constraints and optimality, real five-site run."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import shared
from harness import strict_loads

from analytics.config import GPU_CATALOG
from analytics.decisions import dispatch, sites


def test_tco2e_by_hand():
    # 2 MWh at 450 g/kWh + 500 kWh at 20 g/kWh = 900,000 g + 10,000 g = 0.91 t
    assert dispatch.tco2e([2000.0, 500.0], [450.0, 20.0]) == pytest.approx(0.91)


def test_cop_and_pue_from_sustaindc_config():
    cfg = json.loads(shared("sustaindc_dcrl/dc_config/dc_config.json").read_text())
    hvac = cfg["hvac_configuration"]
    assert (sites.COP_BASE, sites.COP_K, sites.COP_T_NOMINAL) == (
        hvac["CHILLER_COP_BASE"], hvac["CHILLER_COP_K"], hvac["CHILLER_COP_T_NOMINAL"])
    assert sites.pue(np.array([25.0]))[0] == pytest.approx(1.2)
    assert sites.pue(np.array([35.0]))[0] == pytest.approx(1.25)
    assert sites.cop(np.array([100.0]))[0] == 1.0  # floor


def test_align_hours_by_day_of_year():
    hours = pd.DatetimeIndex(["2023-01-02 00:00", "2024-12-31 23:00"])
    out = sites.align_hours(hours, 2022)
    assert out[0] == pd.Timestamp("2022-01-02 00:00")
    assert out[1] == pd.Timestamp("2022-01-01 23:00")  # day 366 wraps into a 365-day year


def _sites(ci, cap=np.inf, share=1.0):
    return [sites.Site(f"s{j}", np.asarray(col, float), None, None, cap, share)
            for j, col in enumerate(np.asarray(ci, float).T)]


def test_lp_respects_constraints_and_matches_greedy():
    rng = np.random.default_rng(4)
    hours = pd.date_range("2023-01-01", periods=24, freq="h")
    ci = rng.uniform(20, 600, size=(24, 4))
    demand = rng.uniform(100, 1000, 24)
    site_list = _sites(ci, cap=400.0, share=0.5)
    d = dispatch.dispatch(hours, demand, site_list, kwh_per_unit=1.0)
    aware = d.shares[d.shares["policy"] == "carbon_aware"].pivot(index="hour", columns="site",
                                                                 values="units").to_numpy()
    np.testing.assert_allclose(aware.sum(axis=1), demand, rtol=1e-9)
    assert (aware <= 400.0 + 1e-6).all() and (aware <= 0.5 * demand[:, None] + 1e-6).all()
    # greedy (cheapest gCO2 per unit first, up to each bound) is optimal for this LP
    pue = sites.pue(np.full(24, sites.COP_T_NOMINAL))
    want = 0.0
    for h in range(24):
        left = demand[h]
        for j in np.argsort(ci[h]):
            take = min(left, 400.0, 0.5 * demand[h])
            want += take * pue[h] * ci[h, j] / 1e6
            left -= take
    t = d.totals.set_index("policy")["tco2e"]
    assert t["carbon_aware"] == pytest.approx(want, rel=1e-9)
    assert t["carbon_aware"] <= t["home"] and t["carbon_aware"] <= t["proportional"]
    it = d.totals.set_index("policy")["it_mwh"]
    assert it.nunique() == 1 or np.ptp(it.to_numpy()) < 1e-9  # same energy served


def test_energy_per_unit_uses_the_one_power_formula():
    h100 = next(k for k in GPU_CATALOG if k.name == "H100-80GB")
    idle = h100.idle_w if h100.idle_w is not None else h100.tdp_w  # no idle source: TDP
    watts = idle + (h100.tdp_w - idle) * 0.8
    assert dispatch.kwh_per_unit(h100, "gpu_seconds", 0.8) == pytest.approx(watts / 3.6e6)
    assert dispatch.kwh_per_unit(h100, "weighted_tokens", 0.8) == pytest.approx(
        watts / h100.ref_tok_s / 3.6e6)


def test_infeasible_limits_are_refused():
    hours = pd.date_range("2023-01-01", periods=2, freq="h")
    with pytest.raises(ValueError, match="cannot serve"):
        dispatch.dispatch(hours, np.array([100.0, 100.0]), _sites(np.ones((2, 2)), share=0.4),
                          1.0)


def test_real_five_sites_cli(tmp_path, capsys):
    from analytics import cli

    db = tmp_path / "d.duckdb"
    files = [shared("burstgpt/derived/burstgpt1_week1_per_minute_tps.csv")]
    for ba in ("CISO", "ERCO", "BPAT", "PJM", "NYIS"):
        files.append(shared(f"sustaindc_dcrl/CarbonIntensity/{ba}_NG_&_avgCI.csv"))
    files += sorted(shared("sustaindc_dcrl/Weather").glob("*.epw.gz"))
    assert cli.main(["--db", str(db), "ingest", *map(str, files)]) == 0
    capsys.readouterr()
    assert cli.main(["--db", str(db), "dispatch", "burstgpt1_week1_per_minute_tps", "--sites",
                     "CISO,ERCO,BPAT,PJM,NYIS", "--scale", "1000", "--max-share", "0.4"]) == 0
    doc = strict_loads(capsys.readouterr().out)
    assert doc["carbon_aware_tco2e"] < doc["baseline_tco2e"]
    assert doc["carbon_aware_tco2e"] < doc["proportional_tco2e"]
    shares = {s: v["carbon_aware_share"] for s, v in doc["sites"].items()}
    assert sum(shares.values()) == pytest.approx(1.0)
    assert max(shares.values()) <= 0.4 + 1e-9
    assert shares["BPAT"] == pytest.approx(0.4)  # the hydro-heavy grid is filled first
    assert all(1.1 < v["mean_pue"] < 1.3 for v in doc["sites"].values())
    # issue 33, deviation 1: by default the provisioned capacity is dispatched, the
    # overbooking factor f x the rolling band. The LP is linear in each hour's demand and f is
    # one number, so every policy's tCO2e and energy are f times the upper bound's (derived
    # from the constraints: shares of an hour do not depend on its size)
    got = doc["dispatched"]
    assert got["what"] == "provisioned" and got["violation_target"] == 0.05
    f = got["overbooking_factor"]
    assert 0.5 < f < 1.5
    assert cli.main(["--db", str(db), "dispatch", "burstgpt1_week1_per_minute_tps", "--sites",
                     "CISO,ERCO,BPAT,PJM,NYIS", "--scale", "1000", "--max-share", "0.4",
                     "--dispatched", "upper"]) == 0
    upper = strict_loads(capsys.readouterr().out)
    assert upper["dispatched"] == {"what": "upper", "method": "rolling"}
    for key in ("baseline_tco2e", "proportional_tco2e", "carbon_aware_tco2e", "it_mwh"):
        assert doc[key] == pytest.approx(f * upper[key], rel=1e-9), key
    assert {s: v["carbon_aware_share"] for s, v in upper["sites"].items()} == pytest.approx(
        shares)
    # provisioned capacity is the rolling band's: another method is refused before a fit
    assert cli.main(["--db", str(db), "dispatch", "burstgpt1_week1_per_minute_tps", "--sites",
                     "CISO,ERCO", "--method", "split"]) == 2
    assert "rolling band" in json.loads(capsys.readouterr().out)["error"]


def test_the_lp_weighs_carbon_by_each_sites_pue():
    """Issue 33 (a planted bug lived: PUE dropped from the objective; every test site had one
    PUE). Facility energy is IT energy x PUE, so the LP's cost per unit is kWh x PUE x gCO2/kWh.
    Site a: 100 gCO2/kWh at 45 C, PUE 1.333 -> 133.3 g per IT kWh; site b: 115 gCO2/kWh at
    -10 C, PUE 1.118 -> 128.5 g. The cleaner grid is the dirtier choice: all 10 units go to b,
    10 x 128.5 / 1e6 tCO2e."""
    hours = pd.date_range("2023-07-01", periods=1, freq="h")
    a = sites.Site("a", np.array([100.0]), np.array([45.0]))
    b = sites.Site("b", np.array([115.0]), np.array([-10.0]))
    d = dispatch.dispatch(hours, np.array([10.0]), [a, b], kwh_per_unit=1.0)
    aware = d.shares[d.shares["policy"] == "carbon_aware"].set_index("site")["units"]
    assert aware["b"] == pytest.approx(10.0) and aware["a"] == pytest.approx(0.0)
    want = 10 * 115.0 * sites.pue(np.array([-10.0]))[0] / 1e6
    assert d.totals.set_index("policy").loc["carbon_aware", "tco2e"] == pytest.approx(want)
