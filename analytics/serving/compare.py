"""Policy comparison of the serving what-ifs: :func:`simulate` runs the registered policies on one
trace over one horizon (:class:`Comparison`), static DVFS provisioning and re-provisioning,
the DVFS-exponent resolution (:func:`resolve_gamma`) and the :func:`sensitivity` sweep.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from analytics.serving.dvfs import (
    DECODE_SAVING_TARGET,
    GPU_DVFS,
    DvfsParams,
    GpuDvfs,
    calibrate_gamma,
    decode_itl_s,
    prefill_time_s,
)
from analytics.serving.engine import ServingEngine, SimResult
from analytics.serving.params import (
    POLICIES,
    STAGES,
    STATIC_ROUNDS,
    ServingParams,
    check_params,
    get_policy,
)
from analytics.serving.prediction import ERROR_LEVELS, mean_abs_error, predict_lengths
from analytics.serving.profiles import Profile
from analytics.serving.workload import assign_models, model_slots


@dataclass
class Comparison:
    """All policies on one trace: ``results`` by policy name, the trace, the profiles used."""

    results: dict[str, SimResult]
    trace: pd.DataFrame
    slots: list[Profile]
    popularity: np.ndarray
    params: ServingParams
    notes: list[str] = field(default_factory=list)
    #: the output-length predictor used: ``predictor``, ``length_error``, ``length_quantile``,
    #: ``length_fit_s``, measured ``mean_abs_error`` (fraction) on the replayed requests
    prediction: dict = field(default_factory=dict)

    def table(self) -> pd.DataFrame:
        """One row per policy / stage: summary metrics plus energy normalised to Festina."""
        rows = [{"policy": k, **v.summary} for k, v in self.results.items()]
        df = pd.DataFrame(rows)
        fest = self.results["festina"].summary["energy_kwh"] if "festina" in self.results \
            else np.nan
        df["energy_vs_festina"] = df["energy_kwh"] / fest
        if "max_clock" in self.results:
            mc = self.results["max_clock"].summary
            df["saving_vs_max_clock"] = 1 - df["energy_kwh"] / mc["energy_kwh"]
            df["ttft_pp_vs_max_clock"] = 100 * (df["ttft_attainment"] - mc["ttft_attainment"])
            df["tbt_pp_vs_max_clock"] = 100 * (df["tbt_attainment"] - mc["tbt_attainment"])
        return df


def resolve_gamma(params: ServingParams, profiles: list[Profile], gpu: GpuDvfs
                  ) -> tuple[ServingParams, list[str]]:
    """``params`` with ``dvfs_gamma`` set (calibrated when None) and a note saying where it came
    from. Profiles with nothing to calibrate on (all measured) fall back to 3 and say so."""
    if params.dvfs_gamma is not None:
        return params, [f"DVFS exponent gamma = {params.dvfs_gamma:g} (given)"]
    if profiles and all({"prefill", "decode"} <= set(p.measured) for p in profiles):
        return replace(params, dvfs_gamma=DvfsParams().gamma), [
            "DVFS exponent gamma not used: measured profiles replace the DVFS model"]
    try:
        gamma = calibrate_gamma(profiles, gpu)
        note = (f"DVFS exponent gamma = {gamma:.2f}, calibrated so the largest decode-energy "
                f"saving the model predicts for the dense profiles equals the "
                f"{DECODE_SAVING_TARGET:.0%} measured with SM clock locking (Ma et al., arXiv "
                "2605.11999)")
    except ValueError as exc:
        gamma = DvfsParams().gamma
        note = f"DVFS exponent gamma = {gamma:g} (CMOS textbook value): {exc}"
    return replace(params, dvfs_gamma=gamma), [note]


def simulate(trace: pd.DataFrame, profiles: list[Profile], params: ServingParams,
             policies: tuple[str, ...] = POLICIES + STAGES[:-1],
             rng: np.random.Generator | None = None,
             on_step: Callable[[int, int, str], None] | None = None,
             fit: pd.DataFrame | None = None) -> Comparison:
    """Run the policies on one trace; ``on_step(done, total, policy)`` after each policy run
    (a progress bar). The schedulers read output lengths predicted by
    ``params.length_predictor`` (:mod:`analytics.serving.prediction`), the execution the true
    ones.

    Parameters
    ----------
    trace : frame from :func:`trace_arrays` (``arrival_s``, ``prompt``, ``output``): the
        replayed requests
    profiles : bench profiles of ``params.gpu`` (:func:`analytics.serving.profiles.profiles_from_bench`)
    params : what-if parameters
    policies : names from :data:`analytics.serving.params.POLICY_REGISTRY`; ``static_dvfs``
        implies a ``max_clock`` run first
    rng : generator for the model assignment (default ``default_rng(params.seed)``)
    fit : requests before the replay (the trace's first ``length_fit_s`` seconds) that the
        quantile length predictor is fitted on; unused by the oracle

    Returns
    -------
    Comparison (``results`` keyed by policy; ``stage1`` shares the ``max_clock`` run: same mode)

    Raises
    ------
    ValueError : unknown GPU kind or policy, empty trace, no profiles, a quantile predictor
        without fit requests
    """
    setup = setup_run(trace, profiles, params, policies, rng, fit)
    order = run_order(policies)
    sims: dict[str, ServingEngine] = {}
    runs: dict[str, int] = {}
    base_sim = None
    for i, pol in enumerate(order):
        if pol == "stage1" and "max_clock" in sims:
            continue  # stage 1 is max-clock: one run serves both
        if pol == "static_dvfs":
            sim, runs[pol] = run_static_dvfs(
                trace, setup, static_clocks(setup.gpu, setup.slots, base_sim, setup.params),
                gpu_attainment(base_sim, setup.params))
        else:
            sim = ServingEngine(trace, setup.models, setup.slots, setup.gpu, setup.params,
                                get_policy(pol), pred=setup.pred)
            runs[pol] = 1
            sim.run()
        if on_step:
            on_step(i + 1, len(order), pol.replace("_", " "))
        if pol in ("max_clock", "stage1") and base_sim is None:
            base_sim = sim
        sims[pol] = sim
    return finish(trace, profiles, setup, policies, order, sims, runs)


@dataclass
class RunSetup:
    """What every policy run of :func:`simulate` shares: the GPU kind, model slots, the profiles
    that fit, ``params`` with the exponent resolved, its notes, the model of each request, the
    popularity, the predicted output lengths and the predictor's note."""

    gpu: GpuDvfs
    slots: list[Profile]
    fits: list[Profile]
    params: ServingParams
    notes: list[str]
    models: np.ndarray
    popularity: np.ndarray
    pred: np.ndarray


def setup_run(trace: pd.DataFrame, profiles: list[Profile], params: ServingParams,
              policies: tuple[str, ...], rng: np.random.Generator | None = None,
              fit: pd.DataFrame | None = None) -> RunSetup:
    """The shared part of :func:`simulate` (validation, exponent, model assignment seeded with
    ``params.seed`` unless ``rng``, length prediction). Raises ValueError as :func:`simulate`."""
    gpu, slots, fits, params = _prepare(profiles, params, policies, trace)
    rng = rng if rng is not None else np.random.default_rng(params.seed)
    params, notes = resolve_gamma(params, profiles, gpu)
    models, pop = assign_models(len(trace), params.n_models, params.zipf_s, rng)
    pred, pred_note = predict_lengths(trace, models, pop, params, fit)
    notes.append(pred_note)
    return RunSetup(gpu, slots, fits, params, notes, models, pop, pred)


def run_order(policies: tuple[str, ...]) -> list[str]:
    """The policies in run order (``max_clock`` first when ``static_dvfs`` needs it)."""
    return list(dict.fromkeys(("max_clock",) + tuple(policies)
                              if "static_dvfs" in policies else policies))


def finish(trace: pd.DataFrame, profiles: list[Profile], setup: RunSetup,
           policies: tuple[str, ...], order: list[str], sims: dict, runs: dict[str, int]
           ) -> Comparison:
    """The :class:`Comparison` of finished runs ``sims`` (engines, or anything with their
    ``extend_to`` / ``end`` / ``result``): every run accounted to one horizon (the last
    completion of any policy), ``stage1`` shared with ``max_clock``, the notes."""
    horizon = max(sim.end for sim in sims.values())
    results: dict[str, SimResult] = {}
    for pol, sim in sims.items():
        sim.extend_to(horizon)
        results[pol] = replace(sim.result(pol), sim_runs=runs[pol])
    if "stage1" in order and "stage1" not in results:
        results["stage1"] = replace(results["max_clock"], policy="stage1")
    results = {k: results[k] for k in dict.fromkeys(tuple(policies)) if k in results} | \
        {k: v for k, v in results.items() if k not in policies}
    params, fits, notes = setup.params, setup.fits, list(setup.notes)
    notes += [f"{len(profiles) - len(fits)} benchmarked models do not fit one GPU with their "
              "KV budget and are not co-hosted"] if len(fits) < len(profiles) else []
    notes += [f"{len(trace):,} requests over {trace['arrival_s'].max() / 60:.1f} min; "
             f"{params.n_models} models on {params.n_gpus} x {params.gpu}; Zipf s="
             f"{params.zipf_s} popularity (seed {params.seed})"]
    if trace.attrs.get("unknown_tokens"):
        notes += [f"{trace.attrs['unknown_tokens']:,} requests have no prompt or completion "
                  "token count in the trace: simulated with 1 token there (the minimum)"]
    prediction = {"predictor": params.length_predictor, "length_error": params.length_error,
                  "length_quantile": params.length_quantile, "length_fit_s": params.length_fit_s,
                  "mean_abs_error": mean_abs_error(setup.pred, trace["output"].to_numpy())}
    return Comparison(results, trace, setup.slots, setup.popularity, params, notes, prediction)


def _prepare(profiles: list[Profile], params: ServingParams, policies: tuple[str, ...],
             trace: pd.DataFrame) -> tuple[GpuDvfs, list[Profile], list[Profile], ServingParams]:
    """Validate the inputs of :func:`simulate`; the GPU kind (static floor scaled), the model
    slots, the profiles that fit one GPU with their KV budget, and ``params``."""
    if params.gpu not in GPU_DVFS:
        raise ValueError(f"unknown GPU kind {params.gpu!r}; choose one of {sorted(GPU_DVFS)}")
    check_params(params)
    for pol in policies:
        get_policy(pol)
    if trace.empty:
        raise ValueError("no requests in the chosen window of the trace")
    gpu = GPU_DVFS[params.gpu]
    if params.static_scale != 1.0:
        gpu = replace(gpu, idle_w=gpu.idle_w * params.static_scale)
    cap = gpu.memory_gb * params.mem_util
    fits = [p for p in profiles if p.weights_gb * (1 + params.kv_factor) <= cap]
    if not fits:
        raise ValueError(f"no benchmarked model fits one {params.gpu} with its KV budget "
                         f"({cap:.0f} GB usable); lower kv_factor")
    return gpu, model_slots(fits, params.n_models), fits, params


def run_static_dvfs(trace: pd.DataFrame, setup: RunSetup, static: dict[int, float],
                    base_att: dict[int, float]) -> tuple[ServingEngine, int]:
    """Static DVFS: clocks ``static`` provisioned from the max-clock run (:func:`static_clocks`),
    then up to :data:`STATIC_ROUNDS` re-provisioning rounds against the max-clock run's
    per-GPU attainment ``base_att`` (:func:`gpu_attainment`). Returns the last run and the
    number of simulator passes."""
    policy = get_policy("static_dvfs")
    static = dict(static)
    gpu, slots, params, models, pred = setup.gpu, setup.slots, setup.params, setup.models, \
        setup.pred
    sim = ServingEngine(trace, models, slots, gpu, params, policy, static, pred)
    sim.run()
    runs = 1
    for _ in range(STATIC_ROUNDS):
        # re-provision: GPUs that lost SLO attainment vs max-clock go 3 grid steps up
        lag = lagging_gpus(sim, base_att, params)
        if not lag:
            break
        clocks = sim.grid.clocks
        for g in lag:
            k = int(np.searchsorted(clocks, static[g] - 1e-6))
            static[g] = float(clocks[min(k + 3, len(clocks) - 1)])
        sim = ServingEngine(trace, models, slots, gpu, params, policy, static, pred)
        sim.run()
        runs += 1
    return sim, runs


def static_clocks(gpu: GpuDvfs, slots: list[Profile], sim: ServingEngine, params: ServingParams
                   ) -> dict[int, float]:
    """DynamoLLM-style: per GPU the lowest grid clock meeting both SLOs (with margin) at the worst
    batch and prefill backlog of each resident model seen in the max-clock run, equal shares,
    and never below a resident's energy-optimal clock (prefill, or decode at its worst batch):
    a lower clock would cost energy and SLO slack at once."""
    out = {}
    for g, device in enumerate(sim.gpus):
        n = max(len(device.tenants), 1)
        best = gpu.f_max_mhz
        grid = sim.grid
        floor = max((max(grid.xopt_prefill[j], grid.xopt_decode(j, max(device.worst_batch.get(j, 1), 1)))
                     for j in device.tenants), default=0.0) * gpu.f_max_mhz
        for f in sim.grid.clocks:
            ok = True
            for j in device.tenants:
                prof = slots[j]
                b = max(device.worst_batch.get(j, 1), 1)
                backlog = max(device.worst_backlog.get(j, 0.0), 1.0)
                if float(decode_itl_s(prof, gpu, b, f, 1.0 / n)) > sim.tbt_s or \
                        float(prefill_time_s(prof, gpu, backlog, f, 1.0 / n)) > sim.ttft_s:
                    ok = False
                    break
            if ok:
                best = float(f)
                break
        out[g] = max(best, float(sim.grid.clocks[int(np.searchsorted(sim.grid.clocks, floor - 1e-6))])
                     if floor <= sim.grid.clocks[-1] else best)
    return out


def gpu_attainment(sim: ServingEngine, params: ServingParams) -> dict[int, float]:
    """Per GPU (-1: unserved), the share of its requests meeting both SLOs (without margin)."""
    ttft = (sim.t_first - sim.arrival) * 1000.0
    tbt = np.where(sim.output > 1,
                   (sim.t_done - sim.t_first) / np.maximum(sim.output - 1, 1) * 1000.0, 0)
    ok = np.isfinite(sim.t_done) & (ttft <= params.ttft_slo_ms) & (tbt <= params.tbt_slo_ms)
    return {int(g): float(v) for g, v in pd.Series(ok).groupby(sim.gpu_of).mean().items()}


def lagging_gpus(sim: ServingEngine, base_att: dict[int, float], params: ServingParams,
                 slack: float = 0.01) -> list[int]:
    """GPUs whose requests meet both SLOs less often than in the max-clock run (per-GPU
    attainment ``base_att``, :func:`gpu_attainment`) by > ``slack``."""
    a = gpu_attainment(sim, params)
    return [g for g in a if g >= 0 and a[g] < base_att.get(g, 1.0) - slack]


def sensitivity(trace: pd.DataFrame, profiles: list[Profile], params: ServingParams,
                gammas: tuple[float | None, ...] = (None, 1.5, 2.0, 3.0),
                static_scales: tuple[float, ...] = (0.5, 1.0, 1.5),
                on_step: Callable[[int, int, str], None] | None = None,
                fit: pd.DataFrame | None = None) -> pd.DataFrame:
    """How Festina's saving over max-clock moves with the two DVFS-model inputs no staged file
    measures directly: the dynamic-power exponent ``gamma`` (None = calibrated) and the static
    floor (x ``static_scale`` of the cited idle power).

    Returns one row per (static_scale, gamma): ``static_scale``, ``idle_w``, ``gamma``,
    ``calibrated``, ``max_clock_kwh``, ``festina_kwh``, ``saving`` (fraction),
    ``ttft_pp`` / ``tbt_pp`` (Festina minus max-clock attainment, percentage points),
    ``festina_gpus_on``, ``festina_clock_mhz``. ``on_step(done, total, label)`` is called after
    each setting (a progress bar); ``fit`` as in :func:`simulate`.
    """
    rows = []
    total = len(static_scales) * len(gammas)
    for sc in static_scales:
        for g in gammas:
            rows.append(sensitivity_row(trace, profiles,
                                        replace(params, dvfs_gamma=g, static_scale=sc), fit))
            if on_step:
                on_step(len(rows), total, sensitivity_label(sc, g))
    return pd.DataFrame(rows)


def sensitivity_label(static_scale: float, gamma: float | None) -> str:
    """A setting of the sensitivity sweep in words (progress bars)."""
    return f"static x{static_scale:g}, gamma {'calibrated' if gamma is None else f'{gamma:g}'}"


def sensitivity_row(trace: pd.DataFrame, profiles: list[Profile], params: ServingParams,
                    fit: pd.DataFrame | None = None) -> dict:
    """One row of :func:`sensitivity`: max-clock and Festina at ``params.dvfs_gamma`` (None =
    calibrated) and ``params.static_scale``; the columns are :func:`sensitivity`'s. Raises
    ValueError as :func:`simulate`."""
    comp = simulate(trace, profiles, params, ("max_clock", "festina"), fit=fit)
    f, m = comp.results["festina"].summary, comp.results["max_clock"].summary
    return {
        "static_scale": params.static_scale,
        "idle_w": GPU_DVFS[params.gpu].idle_w * params.static_scale,
        "gamma": comp.params.dvfs_gamma, "calibrated": params.dvfs_gamma is None,
        "max_clock_kwh": m["energy_kwh"], "festina_kwh": f["energy_kwh"],
        "saving": 1 - f["energy_kwh"] / m["energy_kwh"],
        "ttft_pp": 100 * (f["ttft_attainment"] - m["ttft_attainment"]),
        "tbt_pp": 100 * (f["tbt_attainment"] - m["tbt_attainment"]),
        "festina_gpus_on": f["mean_gpus_on"], "festina_clock_mhz": f["mean_clock_mhz"]}


def prediction_sweep(fit: pd.DataFrame, replay: pd.DataFrame, profiles: list[Profile],
                     params: ServingParams, levels: tuple[float, ...] = ERROR_LEVELS,
                     on_step: Callable[[int, int, str], None] | None = None) -> pd.DataFrame:
    """How Festina's energy saving over max-clock and its SLO attainment move with the error of
    the output-length predictor (:mod:`analytics.serving.prediction`): the noisy oracle at each
    of ``levels`` and the quantile predictor fitted on ``fit``, every row replaying the same
    requests (``replay``, the trace after the fit window) on the same models.

    Returns one row per predictor: ``predictor``, ``length_error`` (oracle level, fraction;
    NaN for the quantile), ``mean_abs_error_pct`` (measured on the replay), ``max_clock_kwh``,
    ``festina_kwh``, ``energy_saving_pct``, ``slo_attainment_pct``, ``ttft_attainment_pct``,
    ``tbt_attainment_pct``, ``slo_pp_vs_max_clock``, ``requests``. ``on_step(done, total,
    label)`` after each row. Raises ValueError as :func:`simulate`.
    """
    settings = [replace(params, length_predictor="oracle", length_error=e) for e in levels]
    settings.append(replace(params, length_predictor="quantile"))
    rows, gamma = [], params.dvfs_gamma
    for p in settings:  # the exponent the first row resolves serves every row (one calibration)
        p = replace(p, dvfs_gamma=gamma)
        comp = simulate(replay, profiles, p, ("max_clock", "festina"), fit=fit)
        gamma = comp.params.dvfs_gamma
        f, m = comp.results["festina"].summary, comp.results["max_clock"].summary
        oracle = p.length_predictor == "oracle"
        rows.append({
            "predictor": f"oracle +-{100 * p.length_error:g} %" if oracle else
            f"quantile q{p.length_quantile:g}",
            "length_error": p.length_error if oracle else float("nan"),
            "mean_abs_error_pct": 100 * comp.prediction["mean_abs_error"],
            "max_clock_kwh": m["energy_kwh"], "festina_kwh": f["energy_kwh"],
            "energy_saving_pct": 100 * (1 - f["energy_kwh"] / m["energy_kwh"]),
            "slo_attainment_pct": 100 * f["slo_attainment"],
            "ttft_attainment_pct": 100 * f["ttft_attainment"],
            "tbt_attainment_pct": 100 * f["tbt_attainment"],
            "slo_pp_vs_max_clock": 100 * (f["slo_attainment"] - m["slo_attainment"]),
            "requests": int(len(replay))})
        if on_step:
            on_step(len(rows), len(settings), rows[-1]["predictor"])
    return pd.DataFrame(rows)
