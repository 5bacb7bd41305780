"""Every CLI document is strict JSON; undefined metrics are null with a stated reason.

Case ``../shared/cases/27-zero-demand-test-window.csv`` (its README): demand is zero for the whole
test window, so WAPE is undefined -- a good product shows WAPE null with the reason "zero demand
in the test window" while MAE and RMSE are still given, and prints no NaN / Infinity token.
"""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO, SHARED_DATA
from harness import strict_loads
from hypothesis import given, settings
from hypothesis import strategies as st

from analytics.cli import output

CASES = SHARED_DATA.parent / "cases"


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
    doc = strict_loads(out)
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
    parsed = strict_loads(text)
    assert parsed["a"] is None and parsed["b"] == [1.0, None] and parsed["c"]["d"] is None
    assert parsed["null_reasons"] == {"x": "kept", "a": "not a finite number (nan)",
                                      "b[1]": "not a finite number (-inf)",
                                      "c.d": "not a finite number (inf)"}
    assert strict_loads(output.dumps([float("nan"), 2])) == [None, 2]


_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(-10**12, 10**12), st.text(max_size=8),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(allow_nan=True, allow_infinity=True).map(np.float64),
    st.integers(-1000, 1000).map(np.int64),
)
_DOCS = st.recursive(_LEAVES, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)),
    max_leaves=25)


def _non_finite_paths(value, path=""):
    """Paths (in :mod:`analytics.cli.output`'s notation) of every non-finite float."""
    if isinstance(value, float | np.floating) and not math.isfinite(value):
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items()
                for p in _non_finite_paths(v, f"{path}.{k}" if path else str(k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _non_finite_paths(v, f"{path}[{i}]")]
    return []


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=5).filter(lambda k: k != "null_reasons"), _DOCS,
                       max_size=5))
def test_every_document_the_writer_emits_is_strict_json_with_reasons(doc):
    """Property: whatever numbers a command computes, its document parses with a strict JSON
    parser, and every non-finite number became null with its path in ``null_reasons``."""
    parsed = strict_loads(output.dumps(doc))
    missing = _non_finite_paths(doc)
    assert set(missing) == set(parsed.get("null_reasons", {}))


def test_commands_no_other_test_runs_emit_strict_json(tmp_path, capsys):
    """coldstart, delete, pull --list and telemetry (no GPU here, or one) through the strict
    parser; the other commands are read through ``harness.strict_loads`` where they are tested."""
    from analytics import cli

    db = str(tmp_path / "s.duckdb")
    cases = [CASES / "27-zero-demand-test-window.csv", CASES / "15-bursty-zero-heavy-cqr.csv"]
    assert cli.main(["--db", db, "ingest", *map(str, cases)]) == 0
    strict_loads(capsys.readouterr().out)
    assert cli.main(["--db", db, "coldstart", cases[0].stem, cases[1].stem,
                     "--k-hours", "6"]) == 0
    doc = strict_loads(capsys.readouterr().out)
    assert {r["method"] for r in doc["rows"]} >= {"split", "aci"}
    assert cli.main(["--db", db, "pull", "--list"]) == 0
    assert any(e["name"] == "azure2023_conv" for e in strict_loads(capsys.readouterr().out))
    assert cli.main(["--db", db, "delete", cases[1].stem]) == 0
    strict_loads(capsys.readouterr().out)
    assert cli.main(["--db", db, "delete", cases[1].stem]) == 2  # already gone: an error doc
    assert "error" in strict_loads(capsys.readouterr().out)
    rc = cli.main(["--db", db, "telemetry", "sample", "--seconds", "0.2"])
    assert rc in (0, 1)  # 1: no NVIDIA driver on this host, said in the document
    strict_loads(capsys.readouterr().out)
