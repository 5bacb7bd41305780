"""Issue 14 item 12 in dispatch: trace hours without a site value are named before any fitting,
or filled by the method the user chose, and the document says how many at which site.

Dispatch aligns a trace hour onto the site-data year by day-of-year and hour
(:func:`analytics.decisions.sites.align_hours`): the BurstGPT week (t0 2023-01-02) has its test
window at 2023-01-07 21:00 .. 2023-01-08 23:00, which takes the carbon hours 2022-01-07 21:00 ..
2022-01-08 23:00. The real CISO file with 2022-01-08 05:00 blanked and 06:00, 07:00 deleted
therefore leaves trace hours 2023-01-08 05:00, 06:00 and 07:00 without carbon intensity.
"""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest
from conftest import shared

from analytics import cli, store
from analytics.decisions import sites
from analytics.envelope import pipeline
from analytics.ingest import files as ingest
from tests.ingest.test_carbon_hourly import sustaindc_with_gaps

WEEK = "burstgpt/derived/burstgpt1_week1_per_minute_tps.csv"
MISSING = ["2023-01-08T05:00:00", "2023-01-08T06:00:00", "2023-01-08T07:00:00"]


def _db(tmp_path, *paths) -> str:
    db = tmp_path / "d.duckdb"
    con = store.connect(db)
    ingest.ingest_files(con, [ingest.FileIn(p, p.name) for p in paths])
    con.close()
    return str(db)


def _never_fit(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("the envelope was fitted before the missing hours were checked")
    monkeypatch.setattr(pipeline, "run_envelope", fail)


def test_cli_refuses_before_fitting_and_names_trace_hours(tmp_path, capsys, monkeypatch):
    db = _db(tmp_path, shared(WEEK), sustaindc_with_gaps(tmp_path),
             shared("sustaindc_dcrl/CarbonIntensity/ERCO_NG_&_avgCI.csv"))
    _never_fit(monkeypatch)
    code = cli.main(["--db", db, "dispatch", "burstgpt1_week1_per_minute_tps", "--sites",
                     "CISO,ERCO", "--bin", "1h"])
    assert code == 2
    err = json.loads(capsys.readouterr().out)["error"]
    assert ("CISO: 3 trace hours without carbon intensity: 2023-01-08 05:00, 2023-01-08 06:00, "
            "2023-01-08 07:00 (site-data hours 2022-01-08 05:00, 2022-01-08 06:00, "
            "2022-01-08 07:00)") in err
    assert "ERCO" not in err.split("Nothing was fitted")[0]  # ERCO's series is complete
    assert "--fill-missing" in err


@pytest.mark.parametrize("method", ["ffill", "interpolate"])
def test_cli_fills_by_the_chosen_method_and_counts(tmp_path, capsys, method):
    db = _db(tmp_path, shared(WEEK), sustaindc_with_gaps(tmp_path),
             shared("sustaindc_dcrl/CarbonIntensity/ERCO_NG_&_avgCI.csv"))
    capsys.readouterr()
    assert cli.main(["--db", db, "dispatch", "burstgpt1_week1_per_minute_tps", "--sites",
                     "CISO,ERCO", "--bin", "1h", "--fill-missing", method]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["fill_missing"] == method
    assert doc["filled_hours"] == [{
        "site": "CISO", "series": "carbon_intensity", "series_site": "CISO", "hours": 3,
        "trace_hours": MISSING,
        "site_data_hours": [h.replace("2023", "2022") for h in MISSING], "method": method}]
    for key in ("baseline_tco2e", "proportional_tco2e", "carbon_aware_tco2e", "it_mwh"):
        assert np.isfinite(doc[key]) and doc[key] > 0
    assert doc["carbon_aware_tco2e"] <= doc["baseline_tco2e"] + 1e-15
    assert any(n.startswith(f"filled by {method}: CISO: 3 trace hours") for n in doc["notes"])


def _ciso_series(tmp_path) -> pd.DataFrame:
    from analytics.ingest.formats import parse_file

    f = parse_file(sustaindc_with_gaps(tmp_path)).frame.to_pandas()
    return f.rename(columns={"gco2_per_kwh": "value"})[["ts", "value"]]


def test_fill_values_in_site_time_from_the_real_file(tmp_path):
    """ffill carries 04:00 forward; interpolate draws the line from 04:00 to 08:00."""
    real = pd.read_csv(shared("sustaindc_dcrl/CarbonIntensity/CISO_NG_&_avgCI.csv"))
    v4, v8 = real["avg_CI"].iloc[7 * 24 + 4], real["avg_CI"].iloc[7 * 24 + 8]
    series = {("carbon_intensity", "CISO", "avg"): _ciso_series(tmp_path)}
    src = [sites.SiteSources("CISO", "avg", None, None)]
    hours = pd.date_range("2023-01-08 03:00", "2023-01-08 09:00", freq="h")
    gaps = sites.site_gaps(src, series, hours)
    assert [h.hour for h in gaps[0].trace_hours] == [5, 6, 7]
    ff = sites.build_sites(src, series, hours, fill="ffill")[0].gco2_per_kwh
    np.testing.assert_allclose(ff[2:5], [v4, v4, v4])
    lin = sites.build_sites(src, series, hours, fill="interpolate")[0].gco2_per_kwh
    np.testing.assert_allclose(lin[2:5], v4 + (v8 - v4) * np.array([1, 2, 3]) / 4)
    assert sites.site_gaps(src, series, hours, fill="interpolate") == []
    raw = sites.build_sites(src, series, hours)[0].gco2_per_kwh  # none: left NaN
    assert np.isnan(raw[2:5]).all() and np.isfinite(raw[[0, 1, 5, 6]]).all()


def test_price_hours_absent_are_refused_naming_the_price_zone(tmp_path, capsys, monkeypatch):
    """CISO takes prices from the Green-DCC zone US-CAL-CISO (2023): three hours deleted in the
    test window are named, in trace time, as missing prices."""
    with gzip.open(shared("green_dcc/electricity_prices/US-CAL-CISO_electricity_prices_2023"
                          ".csv.gz"), "rt") as fh:
        lines = fh.read().splitlines()
    rows = lines[1:]
    cut = 7 * 24 + 10  # 2023-01-08 10:00, 11:00, 12:00
    assert rows[cut].startswith("2023-01-08 10:00")
    prices = tmp_path / "US-CAL-CISO_electricity_prices_2023.csv"
    prices.write_text("\n".join([lines[0], *rows[:cut], *rows[cut + 3:]]) + "\n")
    db = _db(tmp_path, shared(WEEK), shared("sustaindc_dcrl/CarbonIntensity/CISO_NG_&_avgCI.csv"),
             prices)
    _never_fit(monkeypatch)
    assert cli.main(["--db", db, "dispatch", "burstgpt1_week1_per_minute_tps", "--sites",
                     "CISO", "--bin", "1h"]) == 2
    err = json.loads(capsys.readouterr().out)["error"]
    assert ("CISO: 3 trace hours without price (from US-CAL-CISO): 2023-01-08 10:00, "
            "2023-01-08 11:00, 2023-01-08 12:00") in err
