"""Parameter records of the power simulator (:class:`SimParams`, :class:`Scenario`): bounds
checked by :func:`analytics.params.check` with messages naming the field, help from one place."""

from __future__ import annotations

import pytest

from analytics import params
from analytics import power as powersim


@pytest.mark.parametrize(("cls", "field", "value"), [
    (powersim.Scenario, "inference_share", 1.5), (powersim.Scenario, "utilization", 0.0),
    (powersim.Scenario, "days", 0.0), (powersim.Scenario, "warmup_days", -1.0),
    (powersim.Scenario, "speed", "X"), (powersim.Scenario, "cap_factor", 0.9),
    (powersim.Scenario, "n_gpus", 0), (powersim.Scenario, "scheduler", "lifo"),
    (powersim.Scenario, "checkpoint_min", 0.0), (powersim.SimParams, "capacity_gpus", 0),
    (powersim.SimParams, "scheduler", "lifo"), (powersim.SimParams, "checkpoint_min", -5.0)])
def test_out_of_range_fields_are_rejected_by_name(cls, field, value):
    with pytest.raises(ValueError, match=rf"^{field} = .* is out of range"):
        cls(**{field: value})


def test_defaults_are_valid_and_help_comes_from_the_knob():
    scenario = powersim.Scenario()
    params.check(scenario)
    assert (scenario.inference_share, scenario.utilization, scenario.n_gpus, scenario.days,
            scenario.warmup_days, scenario.checkpoint_min) == (0.5, 0.8, 256, 7.0, 2.0, 60.0)
    assert powersim.Scenario(checkpoint_min=None).checkpoint_min is None  # None: no checkpoints
    assert params.help_of(powersim.Scenario, "inference_share").endswith("(0 to 1)")
    assert "one of fcfs, swf" in params.help_of(powersim.SimParams, "scheduler")
    assert params.help_of(powersim.Scenario, "days").startswith("measured window (days; (0, inf")
