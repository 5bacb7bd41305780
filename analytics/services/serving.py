"""Serving service (Festina paper): the ONE pipeline from a stored request trace and the stored
benchmarks to a comparison of serving policies, used by ``headroom serve-energy`` and the
Serving page alike.

trace rows (store) -> :func:`analytics.serving.trace_arrays` -> profiles from
``bench_runs`` (optionally replaced by a measured profile CSV) -> simulate every policy ->
table / timeseries / CDFs / JSON.
"""

from __future__ import annotations

import pandas as pd

from analytics import serving, store

#: Every registered policy, in registration order: the baselines, the ablation, Festina (a
#: policy added with ``serving.register_policy`` is compared too).
ALL_POLICIES = tuple(serving.POLICY_REGISTRY)


def inputs(con) -> dict:
    """What the Serving what-if can run on: ``traces`` (request datasets with prompt and
    completion tokens), ``gpus`` (GPU kinds with usable bench profiles), ``why`` (when none)
    and ``synthetic`` (trace -> bool)."""
    ledger = store.list_datasets(con)
    traces = []
    for _, row in ledger[ledger["kind"] == "requests"].iterrows():
        has = store.request_fields(con, int(row["dataset_id"]))
        if has["tokens"] and has["completion_tokens"]:
            traces.append(row["name"])
    bench = store.bench_runs(con)
    gpus, why = [], ""
    try:
        gpus = serving.available_gpus(bench)
        if gpus:
            serving.prefill_reference(bench, gpus[0])
    except ValueError as exc:
        gpus, why = [], str(exc)
    synthetic = dict(zip(ledger["name"], ledger["synthetic"], strict=True))
    return {"traces": traces, "gpus": gpus, "why": why,
            "synthetic": {t: bool(synthetic[t]) for t in traces}}


def profiles(con, gpu: str, measured: bytes | None = None, measured_name: str = "uploaded profile",
             bench_datasets: tuple[str, ...] | None = None) -> list:
    """Serving profiles of every benchmarked model on ``gpu``: from ``bench_runs`` (all bench
    datasets, or only ``bench_datasets``), with a measured profile CSV (bytes) replacing the
    DVFS model where given. Raises ValueError (no profile, bad CSV naming line and column)."""
    bench = store.bench_runs(con)
    if bench_datasets:
        missing = sorted(set(bench_datasets) - set(bench["dataset"]))
        if missing:
            raise ValueError(f"--bench {missing[0]!r}: no bench dataset of that name")
        bench = bench[bench["dataset"].isin(bench_datasets)]
    profs = serving.profiles_from_bench(bench, gpu)
    if measured:
        profs = serving.apply_measured(
            profs, serving.parse_measured_profiles(measured, measured_name))
    return profs


def trace(con, name: str, window_s: float | None = None) -> pd.DataFrame:
    """A stored request trace as simulator arrivals (first ``window_s`` seconds, or all).
    Raises ValueError when the dataset is not a request trace."""
    return serving.trace_arrays(_rows(con, name), window_s)


def _rows(con, name: str) -> pd.DataFrame:
    info = store.dataset(con, name)
    if info["kind"] != "requests":
        raise ValueError(f"{name!r} is a {info['kind']} dataset; serve-energy needs a request "
                         "trace (e.g. AzureLLMInferenceTrace_conv)")
    return store.dataset_rows(con, name)


def arrivals(con, name: str, params, replay_after_fit: bool = False
             ) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """``(replay, fit)`` of a stored request trace for ``params``: with the quantile length
    predictor (or ``replay_after_fit``) the fit window is the trace's first ``length_fit_s``
    seconds and the replay (first ``window_s`` seconds, or all) starts after it, so no replayed
    request is in the fit; with the oracle the replay starts at the first request and ``fit``
    is None. Raises ValueError when the dataset is not a request trace."""
    rows = _rows(con, name)
    if params.length_predictor == "quantile" or replay_after_fit:
        return (serving.trace_arrays(rows, params.window_s, start_s=params.length_fit_s),
                serving.trace_arrays(rows, params.length_fit_s))
    return serving.trace_arrays(rows, params.window_s), None


def compare(con, trace_name: str, params, policies: tuple[str, ...] = ALL_POLICIES,
            measured: bytes | None = None, measured_name: str = "uploaded profile",
            bench_datasets: tuple[str, ...] | None = None):
    """Simulate ``policies`` on a stored trace; returns the :class:`~analytics.serving.Comparison`
    (per-policy energy_kwh, TTFT/TBT attainment, results, notes).

    Raises ValueError for an unknown policy, a bad parameter or no usable profile.
    """
    _check(params, policies)  # before any read
    replay, fit = arrivals(con, trace_name, params)
    return _compare(con, replay, params, policies, measured, measured_name, bench_datasets,
                    fit=fit)


def _check(params, policies: tuple[str, ...]) -> None:
    unknown = [p for p in policies if p not in ALL_POLICIES]
    if unknown:
        raise ValueError(f"policy {unknown[0]!r}: choose all or one of {', '.join(ALL_POLICIES)}")
    serving.check_params(params)


def _compare(con, replay: pd.DataFrame, params, policies, measured, measured_name,
             bench_datasets, on_step=None, fit=None):
    _check(params, policies)
    profs = profiles(con, params.gpu, measured, measured_name, bench_datasets)
    return serving.simulate(replay, profs, params, policies, on_step=on_step, fit=fit)


def run_views(con, trace_name: str, params, measured: bytes | None = None,
              _on_step=None) -> dict:
    """Every policy plus what the Serving page draws: ``table``, per-minute ``timeseries``,
    Festina's TTFT / TBT latency CDFs per model (``cdf``, ``cdf_tbt``), ``notes``, ``json``
    (the CLI document) and the bench ``profiles`` used. ``_on_step(done, total, policy)``
    hears of each policy run (underscored: not part of a cache key)."""
    _check(params, ALL_POLICIES)
    tr, fit = arrivals(con, trace_name, params)  # read once: simulated and binned
    comp = _compare(con, tr, params, ALL_POLICIES, measured, "uploaded profile", None,
                    on_step=_on_step, fit=fit)
    return views(comp, tr)


def views(comp, tr: pd.DataFrame) -> dict:
    """What the Serving page draws of a :class:`~analytics.serving.Comparison` of every policy
    on the replayed trace ``tr`` (the keys of :func:`run_views`)."""
    ts = pd.concat([serving.timeseries(r, tr).assign(policy=k)
                    for k, r in comp.results.items()], ignore_index=True)
    cdfs = {}
    for metric in ("ttft_ms", "tbt_ms"):
        cdf = serving.latency_cdf(comp.results["festina"], metric)
        cdf["model"] = [f"m{j:02d} {comp.slots[j].model.split('/')[-1]}" for j in cdf["model"]]
        cdfs[metric] = cdf
    return {"table": comp.table(), "timeseries": ts, "cdf": cdfs["ttft_ms"],
            "cdf_tbt": cdfs["tbt_ms"], "notes": comp.notes, "json": serving.to_json(comp),
            "profiles": sorted({(p.model, p.rows) for p in comp.slots})}


def sensitivity(con, trace_name: str, params, measured: bytes | None = None,
                measured_name: str = "uploaded profile",
                bench_datasets: tuple[str, ...] | None = None, _on_step=None) -> pd.DataFrame:
    """Festina vs max-clock over the DVFS exponent x static power grid, in this process and
    kept nowhere (:func:`run_sensitivity` on :func:`sensitivity_inputs`); ``_on_step(done,
    total, label)`` hears of each setting (underscored: not part of a cache key)."""
    return run_sensitivity(sensitivity_inputs(con, trace_name, params, measured, measured_name,
                                              bench_datasets), params, progress=_on_step)


def sensitivity_inputs(con, trace_name: str, params, measured: bytes | None = None,
                       measured_name: str = "uploaded profile",
                       bench_datasets: tuple[str, ...] | None = None) -> dict:
    """What the sensitivity sweep reads from the store, so the connection can be closed before
    its points run (they are written through their own): ``shared`` (``trace``, ``profiles``,
    ``fit`` for :func:`analytics.serving.sensitivity_points.run_point`) and ``key_inputs``
    (:func:`sensitivity_key_inputs`). Raises ValueError (bad parameter, not a request trace,
    no usable profile)."""
    serving.check_params(params)
    profs = profiles(con, params.gpu, measured, measured_name, bench_datasets)
    replay, fit = arrivals(con, trace_name, params)
    return {"shared": {"trace": replay, "profiles": profs, "fit": fit},
            "key_inputs": sensitivity_key_inputs(con, trace_name, measured, bench_datasets)}


def run_sensitivity(inputs: dict, params, *, store_path=None, backend: str | None = "serial",
                    progress=None, cancel=None, gammas: tuple | None = None,
                    static_scales: tuple | None = None) -> pd.DataFrame:
    """Festina vs max-clock over the DVFS exponent x static power grid on the sweep runner
    (:func:`analytics.sweep.run_sweep`, one task per setting:
    :mod:`analytics.serving.sensitivity_points`): the rows of
    :func:`analytics.serving.sensitivity`, with ``.attrs["sweep_run"]`` the runner's
    :meth:`~analytics.sweep.SweepResult.summary`. ``inputs`` from :func:`sensitivity_inputs`;
    with ``store_path`` the settings are kept in ``sweep_runs`` and read back instead of
    recomputed; ``backend`` as :func:`~analytics.sweep.run_sweep` (default: in this process);
    ``progress(done, total, label)`` after each setting; ``gammas`` / ``static_scales``
    default to :data:`~analytics.serving.sensitivity_points.GAMMAS` / ``STATIC_SCALES``.

    Raises
    ------
    ValueError
        Bad parameter, no profile fits, no Dask scheduler at ``backend``.
    analytics.sweep.SweepCancelled
        ``cancel()`` returned True; finished settings are stored.
    """
    from analytics.serving import sensitivity_points
    from analytics.sweep import run_sweep

    tasks = sensitivity_points.point_tasks(
        params, sensitivity_points.GAMMAS if gammas is None else gammas,
        sensitivity_points.STATIC_SCALES if static_scales is None else static_scales)
    res = run_sweep(tasks, shared=inputs["shared"],
                    key_inputs=inputs["key_inputs"], store=store_path, backend=backend,
                    progress=(lambda done, total, label="": progress(done, total, label)) if progress
                    else None, cancel=cancel)
    out = pd.DataFrame(res.results, columns=list(sensitivity_points.COLUMNS))
    out.attrs["sweep_run"] = res.summary()
    return out


def policy_inputs(con, trace_name: str, params, policies: tuple[str, ...] = ALL_POLICIES,
                  measured: bytes | None = None, measured_name: str = "uploaded profile",
                  bench_datasets: tuple[str, ...] | None = None) -> dict:
    """What the policy comparison reads from the store (as :func:`sensitivity_inputs`, checked
    and read in :func:`compare`'s order: policies and parameters, the trace, the profiles), so
    the connection can be closed before :func:`run_policies`. Raises ValueError as
    :func:`compare`."""
    _check(params, policies)
    replay, fit = arrivals(con, trace_name, params)
    profs = profiles(con, params.gpu, measured, measured_name, bench_datasets)
    return {"shared": {"trace": replay, "profiles": profs, "fit": fit},
            "key_inputs": sensitivity_key_inputs(con, trace_name, measured, bench_datasets)}


def run_policies(inputs: dict, params, policies: tuple[str, ...] = ALL_POLICIES, *,
                 store_path=None, backend: str | None = "serial", progress=None, cancel=None):
    """The policy comparison on the sweep runner (:func:`analytics.sweep.run_sweep`, one task
    per policy: :mod:`analytics.serving.policy_points`); returns ``(comparison, summary)``: the
    :class:`~analytics.serving.Comparison` equal to :func:`analytics.serving.simulate`'s and
    the ``policies_run`` block (the runner's summary over both rounds: the policies, then
    static DVFS provisioned from the max-clock run). ``inputs`` from :func:`policy_inputs`
    (or :func:`sensitivity_inputs`: the same shared trace, profiles and key); ``store_path``,
    ``backend``, ``progress(done, total, label)`` and ``cancel`` as :func:`run_sensitivity`.

    Raises
    ------
    ValueError
        Unknown policy, bad parameter, no profile fits, no Dask scheduler at ``backend``.
    analytics.sweep.SweepCancelled
        ``cancel()`` returned True; finished policies are stored.
    """
    from analytics.serving import compare as cmp
    from analytics.serving import policy_points as pp
    from analytics.sweep import run_sweep

    _check(params, policies)
    sh = inputs["shared"]
    setup = cmp.setup_run(sh["trace"], sh["profiles"], params, policies, fit=sh["fit"])
    order = cmp.run_order(policies)
    ran = [p for p in order if not (p == "stage1" and "max_clock" in order)]
    first = [p for p in ran if p != "static_dvfs"]
    total = len(ran)
    runs, summaries = {}, []
    for round_ in (first, [p for p in ran if p == "static_dvfs"]):
        if not round_:
            continue
        offset = len(runs)
        res = run_sweep(pp.policy_tasks(params, round_, runs.get("max_clock")),
                        shared=sh, key_inputs=inputs["key_inputs"], store=store_path,
                        backend=backend, cancel=cancel,
                        progress=(lambda d, _t, label="", o=offset: progress(o + d, total, label))
                        if progress else None)
        runs |= dict(zip(round_, res.results, strict=True))
        summaries.append(res.summary())
    sims = {p: pp.restore(r["run"], sh["trace"], setup) for p, r in runs.items()}
    comp = cmp.finish(sh["trace"], sh["profiles"], setup, policies, order, sims,
                      {p: int(r["sim_runs"]) for p, r in runs.items()})
    return comp, _merge_summaries(summaries, ran)


def _merge_summaries(summaries: list[dict], ran: list[str]) -> dict:
    """One ``policies_run`` block from the runner summaries of the sweep's rounds."""
    out = dict(summaries[0])
    for s in summaries[1:]:
        for k in ("tasks", "computed", "cached", "unsaved"):
            out[k] += s[k]
        out["wall_s"] = round(out["wall_s"] + s["wall_s"], 3)
        out["task_cpu_s"] = round(out["task_cpu_s"] + s["task_cpu_s"], 3)
        if s["backend"] != out["backend"]:
            out["backend"] = f"{out['backend']}+{s['backend']}"
    return out | {"policies": ran, "rounds": len(summaries)}


def sensitivity_records(sens: pd.DataFrame) -> dict:
    """The CLI document's ``sensitivity`` (rows, floats rounded to 6 places) and
    ``sensitivity_run`` (the sweep runner's summary)."""
    return {"sensitivity": [{k: (round(v, 6) if isinstance(v, float) else v)
                             for k, v in r.items()} for r in sens.to_dict("records")],
            "sensitivity_run": sens.attrs["sweep_run"]}


def sensitivity_key_inputs(con, trace_name: str, measured: bytes | None = None,
                           bench_datasets: tuple[str, ...] | None = None) -> dict[str, str]:
    """What a sensitivity sweep's shared inputs were built from, for the ``sweep_runs`` key:
    the trace's dataset sha256, the sha256 of every bench dataset the profiles come from
    (sorted by name) and of the measured profile bytes (``"none"`` without)."""
    import hashlib

    names = sorted(set(store.bench_runs(con)["dataset"]))
    if bench_datasets:
        names = [n for n in names if n in set(bench_datasets)]
    return {"trace": str(store.dataset(con, trace_name)["sha256"]),
            "bench": ",".join(str(store.dataset(con, n)["sha256"]) for n in names),
            "measured_profile": hashlib.sha256(measured).hexdigest() if measured else "none"}


def prediction_sweep(con, trace_name: str, params, measured: bytes | None = None,
                     measured_name: str = "uploaded profile",
                     bench_datasets: tuple[str, ...] | None = None,
                     _on_step=None) -> pd.DataFrame:
    """Festina vs max-clock per output-length predictor: the noisy oracle at 0, 2.5, 5 and 10 %
    and the quantile predictor (:func:`analytics.serving.prediction_sweep`); every row replays
    the requests after the quantile predictor's fit window (the trace's first
    ``length_fit_s`` seconds), so all rows replay the same requests. ``_on_step(done, total,
    label)`` hears of each row (underscored: not part of a cache key)."""
    serving.check_params(params)
    profs = profiles(con, params.gpu, measured, measured_name, bench_datasets)
    replay, fit = arrivals(con, trace_name, params, replay_after_fit=True)
    return serving.prediction_sweep(fit, replay, profs, params, on_step=_on_step)


def prediction_records(sweep: pd.DataFrame, params) -> dict:
    """The sweep as the CLI document's ``prediction_error``: ``rows`` (NaN -> null, rounded)
    and ``replay`` (which requests every row replays)."""
    rows = [{k: (None if isinstance(v, float) and v != v else
                 round(v, 6) if isinstance(v, float) else v) for k, v in r.items()}
            for r in sweep.to_dict("records")]
    return {"rows": rows, "replay": f"requests after the trace's first {params.length_fit_s:g} s "
            "(the quantile predictor's fit window), the same in every row"}


def document(con, trace_name: str, params, policies: tuple[str, ...] = ALL_POLICIES,
             measured: bytes | None = None, measured_name: str = "uploaded profile",
             bench_datasets: tuple[str, ...] | None = None, with_sensitivity: bool = False,
             on_stage=None, with_prediction_sweep: bool = False) -> dict:
    """The ``headroom serve-energy`` document; ``on_stage(text)`` reports progress;
    ``with_sensitivity`` adds :func:`sensitivity_records` (run in this process, kept nowhere;
    the CLI runs it on the sweep runner with the store instead: :func:`run_sensitivity`);
    ``with_prediction_sweep`` adds ``prediction_error`` (:func:`prediction_records`)."""
    if on_stage:
        on_stage(f"serve-energy: {len(policies)} policies ...")
    comp = compare(con, trace_name, params, policies, measured, measured_name, bench_datasets)
    out = serving.to_json(comp)
    if with_sensitivity:
        if on_stage:
            on_stage("serve-energy: sensitivity sweep (12 x 2 runs) ...")
        sens = sensitivity(con, trace_name, params, measured, measured_name, bench_datasets)
        out.update(sensitivity_records(sens))
    if with_prediction_sweep:
        if on_stage:
            on_stage("serve-energy: output-length prediction sweep (5 x 2 runs) ...")
        sweep = prediction_sweep(con, trace_name, params, measured, measured_name,
                                 bench_datasets)
        out["prediction_error"] = prediction_records(sweep, params)
    return out


def curves(con, gpu: str, gamma: float | None = None, batch: int = 32,
           measured: bytes | None = None, static_scale: float = 1.0) -> pd.DataFrame:
    """Energy per token vs SM clock per profile and phase (the profile viewer; Festina Fig. 3);
    ``gamma`` None uses the calibrated exponent."""
    return serving.profile_curves(profiles(con, gpu, measured), gpu, batch=batch, gamma=gamma,
                                  static_scale=static_scale)


def dvfs_sources(gpu: str) -> list[tuple[str, str]]:
    """Citations of the clock range and static power of a GPU kind."""
    g = serving.GPU_DVFS[gpu]
    cited = [(f, src) for f, src in g.sources if f in ("clock", "idle_w", "pcie")]
    return [("clock range", f"{g.f_min_mhz:.0f}-{g.f_max_mhz:.0f} MHz"),
            ("static power", f"{g.idle_w:g} W"), *cited]
