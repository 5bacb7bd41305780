"""The serving sensitivity sweep on the sweep runner (issue 17 item 5): the runner's rows equal
the direct serial computation, points are kept in ``sweep_runs`` and a rerun or a resumed
sweep computes only what is missing. A 2-minute slice of the staged Azure conv trace."""

from __future__ import annotations

import pandas as pd

from analytics import serving
from analytics.services import serving as service


def test_sensitivity_on_the_runner_equals_direct_and_is_stored(conv_inputs):
    db, params, inputs = conv_inputs
    assert set(inputs["key_inputs"]) == {"trace", "bench", "measured_profile"}
    assert inputs["key_inputs"]["measured_profile"] == "none"
    grid = {"gammas": (None, 2.0), "static_scales": (1.5,)}
    # a sweep stopped after its first setting: that one is stored
    first = service.run_sensitivity(inputs, params, store_path=db, gammas=(None,),
                                    static_scales=(1.5,))
    assert first.attrs["sweep_run"]["computed"] == 1
    # the full sweep resumes from it and equals the direct serial computation
    sens = service.run_sensitivity(inputs, params, store_path=db, **grid)
    run = sens.attrs["sweep_run"]
    assert (run["computed"], run["cached"], run["unsaved"]) == (1, 1, 0)
    sh = inputs["shared"]
    direct = serving.sensitivity(sh["trace"], sh["profiles"], params, fit=sh["fit"], **grid)
    pd.testing.assert_frame_equal(sens, direct)
    assert sens["calibrated"].tolist() == [True, False] and sens["gamma"].iloc[1] == 2.0
    # a rerun with the same store reads every setting, computes none
    again = service.run_sensitivity(inputs, params, store_path=db, **grid)
    assert again.attrs["sweep_run"]["computed"] == 0
    assert again.attrs["sweep_run"]["backend"] == "store"
    pd.testing.assert_frame_equal(again, direct)
