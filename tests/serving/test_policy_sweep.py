"""The serving policy comparison on the sweep runner (issue 17 item 5): one task per policy,
static DVFS provisioned from the max-clock task after gathering, every run extended to the
common horizon after gathering; the result equals the direct :func:`analytics.serving.simulate`,
a resumed run computes only the missing policies and a rerun with the same store computes
nothing. A 2-minute slice of the staged Azure conv
trace, serial backend."""

from __future__ import annotations

import pandas as pd

from analytics import serving
from analytics.services import serving as service


def test_policies_on_the_runner_equal_simulate_and_are_stored(conv_inputs):
    db, params, inputs = conv_inputs
    # a run stopped after two policies: those are stored
    _, first = service.run_policies(inputs, params, ("max_clock", "festina"), store_path=db)
    assert (first["computed"], first["rounds"]) == (2, 1)
    # every policy resumes from them; static DVFS runs in a second round
    seen = []
    comp, run = service.run_policies(inputs, params, store_path=db,
                                     progress=lambda d, t, _l: seen.append((d, t)))
    assert (run["computed"], run["cached"], run["unsaved"], run["rounds"]) == (4, 2, 0, 2)
    assert "stage1" not in run["policies"] and seen[-1] == (6, 6)
    sh = inputs["shared"]
    direct = serving.simulate(sh["trace"], sh["profiles"], params, service.ALL_POLICIES,
                              fit=sh["fit"])
    assert serving.to_json(comp) == serving.to_json(direct)
    pd.testing.assert_frame_equal(comp.table(), direct.table())
    assert comp.notes == direct.notes and comp.prediction == direct.prediction
    for pol, r in direct.results.items():
        pd.testing.assert_frame_equal(comp.results[pol].requests, r.requests)
        pd.testing.assert_frame_equal(comp.results[pol].segments, r.segments)
        assert comp.results[pol].sim_runs == r.sim_runs
    # a rerun with the same store reads every policy, computes none
    again, run2 = service.run_policies(inputs, params, store_path=db)
    assert (run2["computed"], run2["cached"]) == (0, 6)
    assert serving.to_json(again) == serving.to_json(direct)
