"""Every CLI document is strict JSON; undefined metrics are null with a stated reason.

Case ``../shared/cases/27-zero-demand-test-window.csv`` (its README): demand is zero for the whole
test window, so WAPE is undefined -- a good product shows WAPE null with the reason "zero demand
in the test window" while MAE and RMSE are still given, and prints no NaN / Infinity token.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from conftest import REPO, SHARED_DATA

from analytics.cli import output

CASES = SHARED_DATA.parent / "cases"


def _strict_loads(text: str):
    def refuse(token):
        raise ValueError(f"non-strict JSON token {token}")
    return json.loads(text, parse_constant=refuse)


def _cli(db, *args):
    proc = subprocess.run([sys.executable, "-m", "analytics.cli", "--db", str(db), *args],
                          capture_output=True, text=True, cwd=REPO, timeout=600)
    return proc.returncode, proc.stdout


def test_zero_demand_test_window_gives_null_wape_with_reason(tmp_path):
    case = CASES / "27-zero-demand-test-window.csv"
    if not case.exists():
        pytest.fail(f"case file missing: {case}")
    db = tmp_path / "c.duckdb"
    rc, out = _cli(db, "ingest", str(case))
    assert rc == 0, out
    rc, out = _cli(db, "envelope", case.stem, "--bin", "5min")
    assert rc == 0, out
    assert "NaN" not in out and "Infinity" not in out
    doc = _strict_loads(out)
    # the staged file really has no demand in the test window, and some before it
    assert doc["split"]["test"]["bins"] > 0
    for model, metrics in doc["point"].items():
        assert metrics["wape"] is None, model
        assert doc["null_reasons"][f"point.{model}.wape"] == "zero demand in the test window"
        assert math.isfinite(metrics["mae"]) and math.isfinite(metrics["rmse"])
    assert all(m["coverage"] is None or 0 <= m["coverage"] <= 1
               for m in doc["intervals"].values())
    # ACI judges misses on the band as reported (clipped at 0, closed): no unbounded bins
    assert {name: m["infinite_bins"] for name, m in doc["intervals"].items()
            if m["infinite_bins"]} == {}


def test_output_never_writes_nan_or_infinity():
    doc = {"a": float("nan"), "b": [1.0, float("-inf")], "c": {"d": float("inf")},
           "null_reasons": {"x": "kept"}}
    text = output.dumps(doc)
    parsed = _strict_loads(text)
    assert parsed["a"] is None and parsed["b"] == [1.0, None] and parsed["c"]["d"] is None
    assert parsed["null_reasons"] == {"x": "kept", "a": "not a finite number (nan)",
                                      "b[1]": "not a finite number (-inf)",
                                      "c.d": "not a finite number (inf)"}
    assert _strict_loads(output.dumps([float("nan"), 2])) == [None, 2]
