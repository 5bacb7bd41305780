"""Launch-advisor service (OmniPilot paper): fit once per data version, then advise, backtest
and record provenance. Fitting takes seconds, so callers keep the fitted :class:`Advisor`
(the page caches it as a resource) and pass it to :func:`advise` / :func:`backtest`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
from dataclasses import asdict, replace
from pathlib import Path

import pandas as pd

from analytics import advisor as advisor_pkg
from analytics import store
from analytics.advisor import backtest as advisor_backtest
from analytics.advisor import decide, gate, persist, value, voi
from analytics.advisor import model as advisor_model
from analytics.advisor import voi_backtest as voi_bt
from analytics.config import cache_dir_for
from analytics.hardware import catalog as hardware

Advisor = advisor_pkg.Advisor


def fit(con) -> Advisor:
    """Fit the quantile cost model on every ``bench_runs`` row and the launch priors on every
    ``jobs`` row. Raises ValueError when the store holds too few benchmark rows."""
    return advisor_pkg.build(store.bench_runs(con), store.jobs(con))


def fit_stored(ledger: pd.DataFrame, cache_dir: Path) -> bool:
    """Whether :func:`fit_cached` would read a stored fit for the benchmarks and job history of
    ``ledger`` (:func:`analytics.store.list_datasets`; no fitting, no store read, one ``stat``):
    the Placement page fits only on request when it would not (issue 31 item 6: the fit took
    123 s on a loaded host before the page showed anything)."""
    key, _ = persist.cache_key(ledger, advisor_model.FitParams())
    return persist.stored(Path(cache_dir) / "advisor", key)


def fit_cached(db_path: str | Path, cache_dir: Path, *, backend: str | None = None,
               keep: bool = True, progress=None, cancel=None) -> tuple[Advisor, str, dict | None]:
    """(advisor, ``"hit"`` | ``"miss"``, fold sweep): the advisor fitted on the benchmarks and
    job history of the store at ``db_path``, from the disk cache under ``cache_dir /
    "advisor"`` when an entry for the same ``bench_runs`` / ``jobs`` datasets, fit parameters
    and code version is there (:mod:`analytics.advisor.persist`), else fitted and stored. A
    stored fit gives the same numbers as a fresh one.

    On a miss the cost model's out-of-fold fits (one task per target x fold scheme x fold) run
    on the sweep runner (:mod:`analytics.advisor.fold_points`): ``backend`` as
    :func:`analytics.sweep.run_sweep` (None: a local process pool; a Dask scheduler address);
    with ``keep`` each fold is kept in the store's ``sweep_runs`` as it finishes, so an
    interrupted fit resumes and a refit of the same data reads them. ``progress(done, total)``
    and ``cancel()`` as ``run_sweep``. The store is read through one short read-only
    connection, closed before the folds run. The third element is the runner's
    ``summary()`` on a miss, None on a hit.

    Raises
    ------
    ValueError
        Too few benchmark rows, or no Dask scheduler at ``backend``.
    analytics.sweep.SweepCancelled
        ``cancel()`` said so (finished folds stored).
    """
    from analytics.advisor import fold_points

    root = Path(cache_dir) / "advisor"
    with contextlib.closing(store.connect(db_path, read_only=True)) as con:
        ledger = store.list_datasets(con)
        key, inputs = persist.cache_key(ledger, advisor_model.FitParams())
        adv = persist.load(root, key)
        if adv is not None:
            return adv, "hit", None
        bench, jobs = store.bench_runs(con), store.jobs(con)
    used = ledger[ledger["kind"].isin(["bench_runs", "jobs"])]
    shas = {f"{r.kind}:{r.name}": str(r.sha256) for r in used.itertuples(index=False)}
    runs: list = []
    folds = fold_points.runner(store=db_path if keep else None, backend=backend,
                               key_inputs=fold_points.key_inputs(shas), progress=progress,
                               cancel=cancel, runs=runs)
    adv = advisor_pkg.build(bench, jobs, folds=folds)
    persist.save(adv, root, key, inputs)
    return adv, "miss", runs[0].summary() if runs else None


def fit_on(con, params: advisor_model.FitParams) -> Advisor:
    """The advisor fitted with ``params`` on the store ``con`` (its benchmarks and job
    history), read from the disk cache beside that store when the same datasets, parameters
    and code were fitted before (:mod:`analytics.advisor.persist`), else fitted here, in this
    process, and stored (an in-memory store: not stored). Raises ValueError (too few
    benchmark rows)."""
    db = store.db_path(con)
    ledger = store.list_datasets(con)
    key, inputs = persist.cache_key(ledger, params)
    root = cache_dir_for(db) / "advisor" if db is not None else None
    adv = persist.load(root, key) if root is not None else None
    if adv is None:
        adv = advisor_pkg.build(store.bench_runs(con), store.jobs(con), params)
        if root is not None:
            persist.save(adv, root, key, inputs)
    return adv


def utility(value_per_token_usd: float = 2e-7, prices: dict[str, float] | None = None,
            **terms) -> decide.UtilityParams:
    """Utility terms (paper Sec. 3.3.1) with list prices overridden by ``prices`` (USD per
    GPU-hour per hardware key); other keyword terms as :class:`decide.UtilityParams`."""
    u = decide.UtilityParams(value_per_token_usd=value_per_token_usd, **terms)
    return decide.with_prices(u, prices or {})


def advise(adv: Advisor, req: decide.Request, u: decide.UtilityParams) -> pd.DataFrame:
    """Scored arms (one row per GPU kind x TP x precision), ranked by expected utility; see
    :func:`analytics.advisor.decide.advise`."""
    return decide.advise(adv.cost, req, u, adv.ctx)


def _finite(x) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)


def value_analysis(scored: pd.DataFrame) -> dict:
    """Launch decision, break-even value per token and the sensitivity of the ranking to the
    value per token (:mod:`analytics.advisor.value`) for one scored frame.

    Returns
    -------
    dict: ``decision`` (:func:`~analytics.advisor.value.decision`), ``break_even``
    (:func:`~analytics.advisor.value.break_even`), ``support_warning`` (str or None,
    :func:`~analytics.advisor.value.support_warning`), ``sensitivity`` (DataFrame,
    :func:`~analytics.advisor.value.sensitivity` on the 1e-8 .. 1e-5 USD grid, extended to the
    next power of ten above a higher break-even: :func:`~analytics.advisor.value.grid_for`).
    """
    be = value.break_even(scored)
    return {"decision": value.decision(scored), "break_even": be,
            "support_warning": value.support_warning(scored),
            "sensitivity": value.sensitivity(scored, value.grid_for(be["value_per_token_usd"]))}


def advise_document(adv: Advisor, req: decide.Request, u: decide.UtilityParams,
                    top: int = 0) -> dict:
    """The ``headroom advise`` document: ranked arms first (q10/q50/q90 of throughput, ITL,
    TTFT, power), then abstaining arms with their utility, flagged ``support`` = "outside
    measured support (axis X)" (never ranked), then infeasible ones; ``top`` > 0 keeps the best
    N ranked and the best N flagged ones. ``decision`` is "launch" / "do_not_launch" (best
    ranked utility >= 0 / < 0) or null when no arm is ranked; ``break_even_value_per_token``
    (USD) is null with ``break_even_reason`` when there is none; ``support_warning`` names a
    flagged arm predicted better than every ranked one (:mod:`analytics.advisor.value`).
    Each arm's ``kv_note`` says "KV cache holds N of M concurrent sequences" where the cache
    caps the request's concurrency (``kv_concurrency`` = N; :func:`decide.memory_fit`).
    """
    scored = advise(adv, req, u)

    def quantiles(row, target):
        if _finite(row.get(f"{target}_q50")) is None:
            return None
        return {k: float(row[f"{target}_{k}"]) for k in ("q10", "q50", "q90")}

    arms = []
    for r in scored.to_dict("records"):
        rank = _finite(r["rank"])
        if top and rank is not None and rank > top:
            continue
        arms.append({
            "hardware": r["hardware"], "tp": int(r["tp"]), "precision": r["precision"],
            "rank": None if rank is None else int(rank), "utility": _finite(r["utility"]),
            "throughput_tok_s": quantiles(r, "throughput_tok_s"),
            "itl_ms": quantiles(r, "itl_ms"), "ttft_ms": quantiles(r, "ttft_ms"),
            "power_w": quantiles(r, "power_w"),
            "abstain": bool(r["abstain"]), "abstain_axis": r["abstain_axis"] or None,
            "support": r["support"],
            "feasible": bool(r["feasible"]), "why_infeasible": r["why_infeasible"] or None,
            "priced": bool(r["priced"]), "fallback": bool(r["fallback"]),
            "occupancy": _finite(r["occupancy"]),
            "kv_concurrency": _finite(r["kv_concurrency"]), "kv_note": r["kv_note"] or None,
            "p_launch": float(r["p_launch"]), "p_slo": float(r["p_slo"]),
        })
    if top:
        flagged = [a for a in arms if a["rank"] is None and a["abstain"] and a["feasible"]
                   and a["utility"] is not None][:top]
        arms = [a for a in arms if a["rank"] is not None or a["fallback"] or a in flagged]
    ranked = scored["rank"].notna()
    dec, be = value.decision(scored), value.break_even(scored)
    return {"model": req.model, "params_b": req.params_b,
            "value_per_token_usd": u.value_per_token_usd, "decision": dec["decision"],
            "decision_reason": dec["reason"], "best_utility_usd": dec["best_utility_usd"],
            "break_even_value_per_token": be["value_per_token_usd"],
            "break_even_arm": be["arm"], "break_even_reason": be["reason"],
            "support_warning": value.support_warning(scored),
            "slo_models": decide.slo_models(adv.cost, req), "arms": arms,
            "ranked": int(ranked.sum()), "abstained": int(scored["abstain"].sum()),
            "infeasible": int((~scored["feasible"]).sum()),
            "all_abstain": bool(scored["abstain"].all()),
            "cost_model_rows": adv.cost.rows, "job_history_rows": adv.jobs_rows}


def backtest(adv: Advisor, value_per_token_usd: float = 2e-7, ttft_slo_ms: float | None = None,
             itl_slo_ms: float | None = None) -> dict:
    """Leakage-free backtest (top-1, regret, bootstrap 95 % intervals) of the advisor and five
    baselines, with the live ranking's KV and SLO terms
    (:func:`analytics.advisor.backtest.backtest`)."""
    return advisor_backtest.backtest(
        adv.cost, decide.UtilityParams(value_per_token_usd=value_per_token_usd), adv.ctx,
        ttft_slo_ms=ttft_slo_ms, itl_slo_ms=itl_slo_ms)


def backtest_verdict(bt: dict, value_per_token_usd: float) -> dict | None:
    """How the advisor's regret compares with the best baseline's in a backtest document
    (:func:`backtest`): ``{"advisor_regret", "best_baseline", "baseline_regret", "tie",
    "text"}``, or None without cells. A tie (within 1e-9 USD) means the baseline's choice is as
    good at this value per token: the cost terms decide there and the advisor's extra terms
    (SLO, memory, launch priors, queue wait) change no choice that matters (issue 33: at the
    paper's 2e-7 USD/token cheapest-fit ties it on the staged data)."""
    pol = bt.get("policies") or {}
    if not bt.get("cells") or "advisor" not in pol:
        return None
    mine = float(pol["advisor"]["regret"])
    base = {k: float(v["regret"]) for k, v in pol.items() if not k.startswith("advisor")}
    best = min(base, key=base.get)
    tie = base[best] <= mine + 1e-9
    text = (f"At {value_per_token_usd:g} USD per token {best.replace('_', ' ')} ties the "
            f"advisor on regret ({base[best]:.3f} vs {mine:.3f} USD): the cost terms decide "
            "here, and the advisor's extra terms (SLO, memory, launch priors, queue wait) "
            "change no choice that matters; raise the value per token to see where they do."
            if tie else
            f"At {value_per_token_usd:g} USD per token the advisor's regret ({mine:.3f} USD) "
            f"is below every baseline's (the best, {best.replace('_', ' ')}: "
            f"{base[best]:.3f} USD).")
    return {"advisor_regret": mine, "best_baseline": best, "baseline_regret": base[best],
            "tie": bool(tie), "text": text}


def slo_models(adv: Advisor, req: decide.Request) -> dict:
    """Per SLO target: fitted or not (and why), folds, cells, held-out-cell coverage, and the
    axis on which the request leaves that target's measured support
    (:func:`analytics.advisor.decide.slo_models`)."""
    return decide.slo_models(adv.cost, req)


def unmodelled_slos(adv: Advisor) -> list[str]:
    """SLO targets (``ttft_ms``, ``itl_ms``) without a fitted model: an SLO on them adds no
    violation term to the utility."""
    return [t for t in decide.SLO_TARGETS.values() if t not in adv.cost.models]


def backtest_document(con, adv: Advisor, value_per_token_usd: float = 2e-7,
                      record: bool = True, ttft_slo_ms: float | None = None,
                      itl_slo_ms: float | None = None) -> dict:
    """The ``headroom advisor-backtest`` document; ``record`` gates and records the model in
    ``model_versions``."""
    bt = backtest(adv, value_per_token_usd, ttft_slo_ms, itl_slo_ms)
    thr = adv.cost.metrics["throughput_tok_s"]
    out = {"cells": bt["cells"], "arms": bt.get("arms", 0), "policies": bt["policies"],
           "bootstrap": bt.get("bootstrap"), "terms": bt.get("terms"),
           "verdict": backtest_verdict(bt, value_per_token_usd),
           "slos_without_model": unmodelled_slos(adv),
           "coverage": {k: thr["coverage"][k] for k in ("held_out_cell", "random_fold", "raw",
                                                         "nominal")},
           "targets": adv.cost.metrics}
    if record:
        out["model_version"] = record_model_version(con, adv)
    return out


def record_model_version(con, adv: Advisor) -> dict:
    """Gate the fitted model against the incumbent (OmniPilot App. C.2) and record it in
    ``model_versions``, promoted or not: ``{version, promoted, reason, mape_pct, rows}``."""
    decision = gate.decide_promotion(adv.cost, store.model_versions(con))
    version = store.add_model_version(con, adv.cost.rows, adv.cost.metrics, adv.cost.envelope,
                                      decision["promoted"], decision["reason"])
    return {"version": version, **decision}


def model_versions(con) -> pd.DataFrame:
    """Advisor model versions (provenance), newest first."""
    return gate.versions_table(store.model_versions(con))


def bench_catalog(con) -> pd.DataFrame:
    """Benchmarked models: ``model, params_b, active_params_b, tasks, rows`` (one row each)."""
    b = store.bench_runs(con)
    if b.empty:
        return pd.DataFrame(columns=["model", "params_b", "active_params_b", "tasks", "rows"])
    return (b.groupby("model", as_index=False)
            .agg(params_b=("params_b", "first"), active_params_b=("active_params_b", "first"),
                 tasks=("task", lambda t: ", ".join(sorted(set(t.dropna())))),
                 rows=("source", "size")))


def bench_support(con) -> pd.DataFrame:
    """Measured support of the cost model, read before any fit: ``hardware``, ``precision``
    (canonical labels, :func:`analytics.advisor.model.prepare`), ``runs`` (benchmark rows),
    ``models`` and ``tp`` (the tensor-parallel degrees measured, e.g. ``"1, 2, 4"``); one row
    per measured (GPU kind, precision). Empty with those columns when nothing is stored."""
    cols = ["hardware", "precision", "runs", "models", "tp"]
    b = store.bench_runs(con)
    if b.empty:
        return pd.DataFrame(columns=cols)
    b = b.assign(precision=b["precision"].replace(advisor_model.PRECISION_ALIASES))
    return (b.groupby(["hardware", "precision"], as_index=False)
            .agg(runs=("source", "size"), models=("model", "nunique"),
                 tp=("tp", lambda t: ", ".join(str(int(v)) for v in sorted(set(t.dropna())))))
            [cols])


def hardware_specs() -> pd.DataFrame:
    """The accelerator spec table with its sources, one row per hardware key."""
    return pd.DataFrame([{"hardware": s.key, "vendor": s.vendor, "memory_gb": s.memory_gb,
                          "mem_bw_gbs": s.mem_bw_gbs, "bf16_tflops_dense": s.bf16_tflops,
                          "fp8_tflops_dense": s.fp8_tflops, "tdp_w": s.tdp_w,
                          "idle_w": s.idle_w, "price_usd_per_h": s.price_usd_per_h,
                          "source": "; ".join(f"{k}: {v}" if k != "all" else v
                                              for k, v in s.sources)}
                         for s in hardware.CATALOG.values()])


def default_prices() -> dict[str, float]:
    """USD per GPU-hour where a public list price is sourced."""
    return decide.default_prices()


# --------------------------------------------------------------------------- VoI gate (item 18.1)
def voi_ranking(con, adv: Advisor, u: decide.UtilityParams, p: voi.VoIParams | None = None,
                model: str | None = None) -> tuple[pd.DataFrame, dict]:
    """Unmeasured benchmarks ranked by expected gain per node-hour, with the budget cut
    (:func:`analytics.advisor.voi.rank_benchmarks` on this store's ``bench_runs``; ``model``:
    the model asked for, whose cells come first when it has any)."""
    return voi.rank_benchmarks(adv.cost, adv.ctx, store.bench_runs(con), u, p, model)


#: Sources whose change invalidates a stored VoI backtest (besides the advisor fit's own).
_VOI_CODE = ("analytics/advisor/voi.py", "analytics/advisor/voi_backtest.py",
             "analytics/advisor/decide.py")


def _voi_key(con, u: decide.UtilityParams, p: voi.VoIParams, seeds: int, subset: float
             ) -> str:
    """sha256 prefix over the advisor fit's cache key (data version, fit parameters, code),
    the VoI sources, the utility terms and the backtest settings."""
    root = Path(__file__).resolve().parents[2]
    fit_key, _ = persist.cache_key(store.list_datasets(con), advisor_model.FitParams())
    h = hashlib.sha256(fit_key.encode())
    for rel in _VOI_CODE:
        h.update(rel.encode() + b"\0" + (root / rel).read_bytes())
    h.update(json.dumps({"u": asdict(u), "p": asdict(p), "seeds": seeds, "subset": subset},
                        sort_keys=True, default=str).encode())
    return h.hexdigest()[:24]


def voi_backtest(con, adv: Advisor, u: decide.UtilityParams, p: voi.VoIParams | None = None,
                 seeds: int = 5, subset: float = 0.5, cache_dir: Path | None = None
                 ) -> tuple[dict, str]:
    """(curves, ``"hit"`` | ``"miss"`` | ``"off"``): the sequential VoI backtest
    (:func:`analytics.advisor.voi_backtest.backtest`), stored as JSON under ``cache_dir /
    "voi"`` keyed by :func:`_voi_key` (written atomically: temporary file + ``os.replace``;
    never pickled); ``cache_dir`` None computes without caching."""
    p = replace(p or voi.VoIParams(), budget_node_h=1.0)  # spends every benchmark: no budget
    if cache_dir is None:
        return voi_bt.backtest(adv.cost, adv.ctx, store.bench_runs(con), u, p, seeds,
                               subset), "off"
    path = Path(cache_dir) / "voi" / f"{_voi_key(con, u, p, seeds, subset)}.json"
    with contextlib.suppress(OSError, ValueError):
        return json.loads(path.read_text()), "hit"
    out = voi_bt.backtest(adv.cost, adv.ctx, store.bench_runs(con), u, p, seeds, subset)
    with contextlib.suppress(OSError, ValueError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(out, allow_nan=False))
        os.replace(tmp, path)
    return out, "miss"


def voi_document(con, adv: Advisor, u: decide.UtilityParams, p: voi.VoIParams,
                 top: int = 20, backtest: bool = False, seeds: int = 5, subset: float = 0.5,
                 cache_dir: Path | None = None) -> dict:
    """The ``headroom advisor-voi`` document: the ``top`` benchmarks by gain per node-hour
    (all within the budget when ``top`` is 0), the budget cut and the node-hour rule; with
    ``backtest`` the regret-vs-node-hours curves of the four policies."""
    ranked, info = voi_ranking(con, adv, u, p)
    chosen = ranked[ranked["within_budget"]]
    show = ranked.head(top) if top else chosen
    doc = {"value_per_token_usd": u.value_per_token_usd, **info,
           "node_hours_rule": NODE_HOURS_RULE.format(setup=p.setup_min, gpn=p.gpus_per_node),
           "budget": {"node_hours": p.budget_node_h, "selected": int(len(chosen)),
                      "selected_node_hours": float(chosen["node_hours"].sum()),
                      "selected_gain_usd": float(chosen["expected_gain_usd"].sum())},
           "benchmarks": [{k: _finite(v) if isinstance(v, float) else v
                           for k, v in r.items()} for r in show.to_dict("records")]}
    for b in doc["benchmarks"]:
        b["tp"], b["within_budget"] = int(b["tp"]), bool(b["within_budget"])
    if backtest:
        bt, cache = voi_backtest(con, adv, u, p, seeds, subset, cache_dir)
        doc["backtest"], doc["backtest_cache"] = bt, cache
    return doc


NODE_HOURS_RULE = ("node-hours = n_gpus / {gpn} x (setup {setup:g} min, an assumption: weights "
                   "load and warm-up + run time); run time = concurrency x out_len / q50 "
                   "throughput for an unmeasured benchmark (Argonne's measured latencies follow "
                   "this relation), the measured Argonne latency_s in the backtest")
