"""The serving policy comparison as tasks of :mod:`analytics.sweep` (issue 17): one task per
policy, each a call of :func:`run_policy` (that one policy's simulator run on the shared trace
and profiles, :func:`analytics.serving.compare.setup_run` seeded with the what-if's seed, so
every task assigns the same models and predicts the same lengths).

What couples the policies is computed after gathering, not inside tasks:

- static DVFS is provisioned from the max-clock run: the ``max_clock`` task returns the
  provisioned clocks (:func:`~analytics.serving.compare.static_clocks`) and its per-GPU
  attainment (:func:`~analytics.serving.compare.gpu_attainment`), and the ``static_dvfs`` task
  runs in a second round with them as parameters;
- every run is accounted to one horizon (the last completion of any policy): a task returns
  its run as a JSON snapshot (:func:`snapshot`) up to its own end, and the gathering step
  (:func:`restore`) extends each to the common horizon with the engine's own
  ``advance`` / ``result`` code before :func:`~analytics.serving.compare.finish` builds the
  :class:`~analytics.serving.compare.Comparison`, equal to :func:`~analytics.serving.simulate`'s.
"""

from __future__ import annotations

from dataclasses import asdict
from types import SimpleNamespace

import numpy as np
import pandas as pd

from analytics.serving.compare import (
    gpu_attainment,
    run_static_dvfs,
    setup_run,
    static_clocks,
)
from analytics.serving.engine import ServingEngine
from analytics.serving.params import ServingParams, get_policy
from analytics.sweep import Task

#: Store name of one policy run (the first part of its ``sweep_runs`` key).
ANALYSIS = "serving.policy_run"
#: The task function.
FN = "analytics.serving.policy_points:run_policy"
_DEVICE = ("on", "clock", "seg_clock", "last_t", "energy_j", "clock_tokens", "clock_changes",
           "replans", "need_bound")
_REPLICA = ("phase", "prefill_left", "prefill_rate", "dyn_w", "iterations", "itl",
            "prefill_frac")


def run_policy(params: dict, seed: int, *, trace: pd.DataFrame, profiles: list,
               fit: pd.DataFrame | None = None) -> dict:
    """One policy's run (a :mod:`analytics.sweep` task function).

    Parameters
    ----------
    params : ``serving`` (the :class:`ServingParams` fields), ``policy`` (a registered name;
        ``stage1`` is not run: it shares ``max_clock``), and for ``static_dvfs``: ``static``
        and ``base_att`` (``[[gpu, value], ...]`` from the ``max_clock`` task)
    seed : the model assignment's seed (replaces ``params["serving"]["seed"]``)
    trace, profiles, fit : as :func:`analytics.serving.simulate` (shared by every task)

    Returns
    -------
    dict: ``run`` (:func:`snapshot` of the engine at its own end), ``sim_runs`` (simulator
    passes), for ``max_clock`` also ``static`` (provisioned clocks, MHz) and ``base_att``.

    Raises
    ------
    ValueError
        As :func:`analytics.serving.simulate`.
    """
    sp = ServingParams(**{**params["serving"], "seed": int(seed)})
    pol = params["policy"]
    setup = setup_run(trace, profiles, sp, (pol,), fit=fit)
    if pol == "static_dvfs":
        sim, runs = run_static_dvfs(trace, setup, {int(g): float(v) for g, v in params["static"]},
                                    {int(g): float(v) for g, v in params["base_att"]})
    else:
        sim = ServingEngine(trace, setup.models, setup.slots, setup.gpu, setup.params,
                            get_policy(pol), pred=setup.pred)
        sim.run()
        runs = 1
    out = {"run": snapshot(sim), "sim_runs": runs}
    if pol == "max_clock":
        out["static"] = [[g, v] for g, v in static_clocks(setup.gpu, setup.slots, sim,
                                                          setup.params).items()]
        out["base_att"] = [[g, v] for g, v in gpu_attainment(sim, setup.params).items()]
    return out


def snapshot(sim: ServingEngine) -> dict:
    """What :meth:`ServingEngine.extend_to` and :meth:`~ServingEngine.result` read of a
    finished run, JSON-able (NaN times as null)."""
    def arr(a):
        return [None if not np.isfinite(x) else float(x) for x in a]

    return {"end": float(sim.end), "t_first": arr(sim.t_first), "t_done": arr(sim.t_done),
            "gpu_of": [int(g) for g in sim.gpu_of],
            "segments": [[int(s[0])] + [float(x) for x in s[1:]] for s in sim.segments],
            "gpus": [{**{k: _plain(getattr(d, k)) for k in _DEVICE},
                      "tenants": [{**{k: _plain(getattr(r, k)) for k in _REPLICA},
                                   "running": len(r.running)} for r in d.tenants.values()]}
                     for d in sim.gpus]}


def _plain(v):
    """A state value as plain JSON (NumPy scalars to Python; the same float64 values)."""
    if isinstance(v, list):
        return [float(x) for x in v]
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    return v if isinstance(v, str) else float(v)


class _Restored(SimpleNamespace):
    """A finished run rebuilt from :func:`snapshot`, with the engine's own accounting code."""

    advance = ServingEngine.advance
    extend_to = ServingEngine.extend_to
    result = ServingEngine.result
    clock_profile = ServingEngine.clock_profile


def restore(snap: dict, trace: pd.DataFrame, setup) -> _Restored:
    """A :func:`snapshot` as an object :func:`analytics.serving.compare.finish` can extend to
    the common horizon and turn into a :class:`~analytics.serving.engine.SimResult`."""
    def dev(d: dict) -> SimpleNamespace:
        tenants = {i: SimpleNamespace(**{k: t[k] for k in _REPLICA}, running=[0] * t["running"])
                   for i, t in enumerate(d["tenants"])}
        return SimpleNamespace(**{k: (list(d[k]) if isinstance(d[k], list) else d[k])
                                  for k in _DEVICE}, tenants=tenants)

    return _Restored(
        params=setup.params, kind=setup.gpu, end=snap["end"],
        arrival=trace["arrival_s"].to_numpy(float),
        output=trace["output"].to_numpy(np.int64), model_of=setup.models,
        t_first=np.array(snap["t_first"], dtype=float),
        t_done=np.array(snap["t_done"], dtype=float),
        gpu_of=np.array(snap["gpu_of"], dtype=np.int64),
        segments=[tuple(s) for s in snap["segments"]], gpus=[dev(d) for d in snap["gpus"]])


def policy_tasks(params: ServingParams, policies: list[str], base: dict | None = None
                 ) -> list[Task]:
    """One task per policy in ``policies`` (``stage1`` excluded: it shares ``max_clock``),
    seeded with ``params.seed``; ``base`` (the ``max_clock`` task's result) gives
    ``static_dvfs`` its provisioning."""
    serving = asdict(params)
    tasks = []
    for pol in policies:
        p = {"serving": serving, "policy": pol}
        if pol == "static_dvfs":
            p |= {"static": base["static"], "base_att": base["base_att"]}
        tasks.append(Task(ANALYSIS, FN, p, int(params.seed)))
    return tasks
