"""analytics.params: one place per knob (help, unit, bounds) for checks, CLI flags and widgets."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np
import pytest

from analytics import params
from analytics.params import knob


@dataclass(frozen=True)
class Pool:
    n_gpus: int = knob(8, "GPUs in the pool", lo=1, flag="--gpus", aliases=("--n-gpus",))
    margin: float = knob(0.05, "slack kept below each SLO (Festina: 5 %)", lo=0, hi=0.99)
    days: float = knob(7.0, "measured window", "days", lo=0, lo_open=True)
    scheduler: str = knob("fcfs", "queue order", choices=("fcfs", "swf"))
    capped: bool = knob(False, "cap inference")
    window_s: float | None = knob(None, "simulate only the first seconds", "s", lo=0,
                                  lo_open=True)


def test_check_names_the_field_and_its_range_numpy_values_included():
    with pytest.raises(ValueError, match=r"^n_gpus = 0 is out of range \[1, inf\): GPUs"):
        params.check(Pool(n_gpus=0))
    with pytest.raises(ValueError, match="n_gpus"):
        params.check(Pool(n_gpus=np.int64(0)))
    with pytest.raises(ValueError, match=r"days = nan is out of range \(0, inf\)"):
        params.check(Pool(days=float("nan")))
    with pytest.raises(ValueError, match="one of fcfs, swf"):
        params.check(Pool(scheduler="lifo"))
    params.check(Pool(window_s=None))  # None means "not set"


def test_cli_flags_come_from_the_knobs_and_refuse_out_of_range_values(capsys):
    ap = argparse.ArgumentParser()
    params.add_arguments(ap, Pool)
    ns = ap.parse_args(["--n-gpus", "16", "--days", "2.5", "--capped", "--window-s", "60"])
    assert params.from_namespace(Pool, ns) == Pool(n_gpus=16, days=2.5, capped=True,
                                                   window_s=60.0)
    assert params.from_namespace(Pool, ap.parse_args([])) == Pool()
    with pytest.raises(SystemExit):
        ap.parse_args(["--gpus", "0"])
    assert "out of range [1, inf)" in capsys.readouterr().err
    help_text = ap.format_help()  # a '%' in a help sentence must not break argparse
    assert "Festina: 5 %" in help_text and "GPUs in the pool" in help_text


def test_widget_help_carries_unit_and_range():
    assert params.help_of(Pool, "margin") == "slack kept below each SLO (Festina: 5 %) (0 to 0.99)"
    assert params.help_of(Pool, "days") == "measured window (days; (0, inf))"
    with pytest.raises(KeyError):
        params.help_of(Pool, "nope")
