"""Fleet plan service (issue 30): how many replicas of which measured arm serve a trace under a
latency SLO at a stated risk, and the files that launch them.

Joins the certified demand envelope (:mod:`analytics.services.demand`, the overbooking of
:func:`analytics.decisions.capacity.overbooking_of`) with the per-replica capacity at the SLO
(:func:`analytics.decisions.fleet.arm_capacity`) in :func:`analytics.decisions.fleet_plan.plan`;
the exports are :mod:`analytics.decisions.fleet_export`.

The demand is counted in **output tokens**, the unit the benchmarks measure throughput in: a
request trace's grid weighs completion tokens only (``w_prompt = 0``). A pre-binned series
counts tokens of an unstated kind (BurstGPT's per-minute aggregate counts prompt + response
tokens), so it needs ``output_share``, the share of its tokens that are output tokens: a
number the user states, or the completion share of a request dataset they name (e.g. the
BurstGPT rows of the same log); the document says which.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from analytics import store
from analytics.config import DemandTarget
from analytics.decisions import capacity, fleet, fleet_export, fleet_plan
from analytics.envelope import pipeline
from analytics.hardware import catalog
from analytics.services import demand


@dataclass(frozen=True)
class PlanRequest:
    """A fleet-plan question.

    Attributes
    ----------
    model : the benchmarked model (``bench_runs.model``)
    slo : latency limits (:class:`analytics.decisions.fleet.Slo`)
    risk : stated probability that a bin falls short, in (0, 1): the demand certificate's
        violation target plus ``capacity_risk`` (a union bound,
        :mod:`analytics.decisions.fleet_plan`)
    capacity_risk : 0 (default): one replica serves the measured knee, taken as exact; in
        (0, risk): it is planned at the knee's held-out-cell lower bound at that miscoverage
        (:mod:`analytics.advisor.lower`, the cost model's prediction of the knee from the fit
        that did not see its cell), and the demand certificate gets ``risk - capacity_risk``
    delta : Learn-then-Test failure probability of the demand certificate, in (0, 1)
    task : only benchmark runs of this task (None: every task)
    arm : the arm to plan, by its label (:func:`arm_label`); None: the cheapest arm that meets
        the SLO ($ per 1M tokens where the catalog prices the GPU, else GPU-hours)
    scale : traffic multiplier, > 0
    min_replicas : fewest replicas kept up, >= 0
    output_share : share of a pre-binned series' tokens that are output tokens, in (0, 1]
    output_share_from : a request dataset whose completion share of tokens is used instead
    gco2_per_kwh : carbon intensity (None: ``site``'s, or no carbon figure)
    site : a stored carbon site; its mean intensity over its whole series is used
    pue : facility over IT energy, >= 1
    envelope : the envelope parameters (miscoverage, models)
    """

    model: str
    slo: fleet.Slo
    risk: float = 0.05
    capacity_risk: float = 0.0
    delta: float = 0.1
    task: str | None = None
    arm: str | None = None
    scale: float = 1.0
    min_replicas: int = 1
    output_share: float | None = None
    output_share_from: str | None = None
    gco2_per_kwh: float | None = None
    site: str | None = None
    pue: float = 1.0
    envelope: pipeline.EnvelopeParams = field(default_factory=lambda: demand.DEFAULT_ENVELOPE)


def arm_label(row) -> str:
    """An arm's label, e.g. ``H100-80GB x1 TP1 bf16``."""
    return f"{row['hardware']} x{int(row['n_gpus'])} TP{int(row['tp'])} {row['precision']}"


def _clean(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v.item() if hasattr(v, "item") else v


def slo_capacity_document(con, model: str, slo: fleet.Slo, task: str | None = None) -> dict:
    """The ``headroom slo-capacity`` document: per measured arm of ``model``, the per-replica
    throughput at which ``slo`` holds (:func:`analytics.decisions.fleet.arm_capacity`), as
    strict-JSON records (unknown: null). Raises ValueError (no limit stated, no benchmark run
    of the model)."""
    arms = fleet.arm_capacity(store.bench_runs(con), model, slo, task)
    records = [{k: _clean(v) for k, v in r.items()} for r in arms.to_dict("records")]
    return {"model": model, "task": task, "slo": slo.limits(), "arms": records,
            "meets": sum(r["status"] == "meets" for r in records),
            "note": "capacity = the highest measured output throughput among an arm's runs "
                    "that meet every limit (a p99 stands for a missing p90); held_to_max: the "
                    "SLO held at the arm's highest measured concurrency, so the arm may "
                    "sustain more; arms never benchmarked are not predicted here (advise)"}


def slo_models(con) -> pd.DataFrame:
    """The benchmarked models a latency SLO can be judged on: those with runs carrying a TTFT,
    ITL, TPOT or latency percentile (:data:`analytics.decisions.fleet.JUDGED_BY`).

    Returns DataFrame ``model``, ``task``, ``runs``, ``arms`` (measured GPU kind x count x TP
    x precision), ``percentiles`` (the columns present), most runs first."""
    bench = store.bench_runs(con)
    cols = sorted({c for cs in fleet.JUDGED_BY.values() for c in cs})
    has = bench[cols].notna()
    rows = bench[has.any(axis=1) & (bench["failed"].fillna(False) == False)]  # noqa: E712
    if rows.empty:
        return pd.DataFrame(columns=["model", "task", "runs", "arms", "percentiles"])
    out = []
    for (model, task), g in rows.groupby(["model", "task"], dropna=False, sort=True):
        present = [c for c in cols if g[c].notna().any()]
        out.append({"model": model, "task": None if pd.isna(task) else task, "runs": len(g),
                    "arms": int(g.groupby(list(fleet.ARM), dropna=False).ngroups),
                    "percentiles": ", ".join(present)})
    return pd.DataFrame(out).sort_values(["runs", "model"], ascending=[False, True],
                                         ignore_index=True)


#: The leaderboard's columns, in order (:func:`leaderboard`).
BOARD = ("model", "task", "hardware", "n_gpus", "tp", "precision", "concurrency", "in_len",
         "out_len",
         "throughput_tok_s", "tok_s_per_gpu", "energy_per_token_j", "usd_per_1m_tokens",
         "ttft_p90_ms", "ttft_p99_ms", "itl_p90_ms", "itl_p99_ms", "ttft_ms", "itl_ms",
         "source", "pareto_energy", "pareto_usd")


def leaderboard(con, model: str | None = None, task: str | None = None) -> pd.DataFrame:
    """Every measured run that served tokens (issue 30 item 3, as the ML.ENERGY leaderboard
    shows them): output tokens/s per GPU, J per output token, $ per 1M output tokens (the
    catalog's price x GPUs / tokens per hour; null where the catalog states no price), the
    TTFT / ITL percentiles the run carries, and whether it is on its (model, task)'s Pareto
    front of tokens/s per GPU against J per token (``pareto_energy``) or against $ per 1M
    tokens (``pareto_usd``; :func:`analytics.decisions.fleet.pareto`).

    Returns DataFrame of :data:`BOARD`, most tokens/s per GPU first; ``model`` / ``task``
    keep only those runs."""
    bench = store.bench_runs(con)
    rows = bench[(bench["failed"].fillna(False) == False)  # noqa: E712 (a pandas mask)
                 & (bench["throughput_tok_s"] > 0)].copy()
    if model is not None:
        rows = rows[rows["model"] == model]
    if task is not None:
        rows = rows[rows["task"] == task]
    gpus = rows["n_gpus"].fillna(1).clip(lower=1).astype(float)
    rows["tok_s_per_gpu"] = rows["throughput_tok_s"] / gpus
    price = rows["hardware"].map({k: v.price_usd_per_h for k, v in catalog.CATALOG.items()})
    rows["usd_per_1m_tokens"] = (price.astype(float) * gpus
                                 / (rows["throughput_tok_s"] * 3600) * 1e6)
    rows["pareto_energy"] = False
    rows["pareto_usd"] = False
    for _, g in rows.groupby(["model", "task"], dropna=False):
        rows.loc[g.index, "pareto_energy"] = fleet.pareto(g, "tok_s_per_gpu",
                                                          "energy_per_token_j")
        rows.loc[g.index, "pareto_usd"] = fleet.pareto(g, "tok_s_per_gpu", "usd_per_1m_tokens")
    return rows.reindex(columns=BOARD).sort_values(
        "tok_s_per_gpu", ascending=False, ignore_index=True)


def predicted_arms(scored: pd.DataFrame) -> pd.DataFrame:
    """The launch advisor's feasible arms (:func:`analytics.services.advisor.advise`) with
    ``usd_per_1m_tokens_q10/_q50/_q90`` from their calibrated throughput quantiles and the
    catalog's price (q10 of the cost from q90 of the throughput; NaN where no price), for the
    leaderboard's chart."""
    arms = scored[scored["feasible"]].copy()
    price = arms["hardware"].map({k: v.price_usd_per_h for k, v in catalog.CATALOG.items()})
    per_h = price.astype(float) * arms["n_gpus"].clip(lower=1) / 3600 * 1e6
    for q, other in (("q10", "q90"), ("q50", "q50"), ("q90", "q10")):
        arms[f"usd_per_1m_tokens_{q}"] = per_h / arms[f"throughput_tok_s_{other}"]
    return arms


def _output_share(con, info: dict, req: PlanRequest) -> tuple[float, str]:
    """The share of a bin's tokens that are output tokens, and how it was obtained."""
    if info["kind"] == "requests":
        if DemandTarget.WEIGHTED_TOKENS not in demand.supported_targets(con, info["name"]):
            raise ValueError(f"{info['name']} counts no tokens (GPU-seconds only): a fleet plan "
                             "needs output tokens per bin, the unit benchmarks measure")
        if req.output_share is not None or req.output_share_from is not None:
            raise ValueError(f"{info['name']} is a request trace: its output tokens are counted "
                             "per request; output_share applies to pre-binned series only")
        return 1.0, "completion tokens of each request (w_prompt = 0)"
    if info["kind"] != "demand_series":
        raise ValueError(f"{info['name']} holds {info['kind']} rows, not LLM demand")
    if req.output_share is not None and req.output_share_from is not None:
        raise ValueError("state output_share or output_share_from, not both")
    if req.output_share is not None:
        if not 0 < req.output_share <= 1:
            raise ValueError(f"output_share must be in (0, 1], not {req.output_share!r}")
        return float(req.output_share), "stated by the user"
    if req.output_share_from is None:
        raise ValueError(f"{info['name']} is a pre-binned series: its tokens are not split into "
                         "prompt and output tokens; state output_share (--output-share) or "
                         "name a request dataset of the same traffic (--output-share-from)")
    s = store.dataset_summary(con, req.output_share_from)
    if s["kind"] != "requests" or not s.get("completion_tokens"):
        raise ValueError(f"{req.output_share_from} is not a request trace with token counts")
    total = float(s["prompt_tokens"] or 0) + float(s["completion_tokens"])
    share = float(s["completion_tokens"]) / total
    return share, (f"completion share of {req.output_share_from}: {int(s['completion_tokens']):,}"
                   f" of {int(total):,} tokens")


def _carbon(con, req: PlanRequest) -> tuple[float | None, str | None]:
    if req.gco2_per_kwh is not None:
        return float(req.gco2_per_kwh), "stated"
    if req.site is None:
        return None, None
    from analytics.services.decisions import site_carbon_profile

    prof = site_carbon_profile(con, (req.site,))
    mean = float((prof["gco2_per_kwh"] * prof["days"]).sum() / prof["days"].sum())
    return mean, f"mean of {req.site}'s stored series ({prof['basis'].iloc[0]} basis)"


def plan(con, dataset: str, req: PlanRequest, bin: str | int = "5min") -> dict:
    """The fleet plan of ``dataset`` (a request trace or a pre-binned series) for ``req``:
    the chosen arm's :class:`analytics.decisions.fleet_plan.FleetPlan` and every meeting arm's
    summary, as ``{"plan", "arm", "arms", "not_meeting", "share", "share_basis", ...}``.

    Raises ValueError (no limit, unknown model or arm, no arm meets the SLO, the series too
    short, no certified factor, a pre-binned series without ``output_share``),
    ``GridError``, ``store.UnknownDataset``, KeyError (an unknown carbon site).
    """
    if not 0 < req.risk < 1:
        raise ValueError(f"risk must be in (0, 1), not {req.risk!r}")
    if not 0 <= req.capacity_risk < req.risk:
        raise ValueError(f"capacity risk must be at least 0 and below the stated risk "
                         f"{req.risk:g}, not {req.capacity_risk!r}")
    bench = store.bench_runs(con)
    tasks = sorted(set(bench.loc[bench["model"] == req.model, "task"].dropna()))
    if req.task is None and len(tasks) > 1:  # a knee across workloads would be the fastest's
        raise ValueError(f"{req.model} was benchmarked on {len(tasks)} tasks "
                         f"({', '.join(tasks[:6])}): state which workload the trace is "
                         "(--task)")
    arms = fleet.arm_capacity(bench, req.model, req.slo, req.task)
    meets = arms[arms["status"] == "meets"]
    if meets.empty:
        raise ValueError(f"no measured arm of {req.model} meets the SLO "
                         f"{req.slo.limits()}: {'; '.join(arms['why'].dropna().unique()[:3])}")
    info = store.dataset(con, dataset)
    share, share_basis = _output_share(con, info, req)
    grid_req = demand.GridRequest.of(dataset, bin, w_prompt=0.0, w_completion=1.0,
                                     target=DemandTarget.WEIGHTED_TOKENS)
    env = demand.envelope(con, grid_req, req.envelope)
    ob, peak = capacity.overbooking_of(env, req.risk - req.capacity_risk, req.delta)
    gco2, carbon_basis = _carbon(con, req)
    bound, predicted = {}, pd.DataFrame()
    if req.capacity_risk > 0:
        adv = _advisor_for(con, req.slo.limits())
        bound = _lower_bounds(adv, bench, req, meets)
        predicted = _predicted(adv, bench, req, arms)
    plans, unbounded = {}, []
    for row in meets.to_dict("records") + (predicted[predicted["status"] == "meets"]
                                           .to_dict("records") if len(predicted) else []):
        spec = catalog.CATALOG.get(row["hardware"])
        tok_s, basis = float(row["throughput_tok_s"]), "measured knee"
        measured = float(row["throughput_tok_s"])
        if pd.notna(row.get("lower_tok_s")):  # an arm never benchmarked: its predicted bound
            tok_s, measured = float(row["lower_tok_s"]), None
            basis = (f"predicted: held-out-cell lower bound at {req.capacity_risk:g} at the "
                     f"predicted knee ({row['judged_on']}); no benchmark of this arm")
        elif req.capacity_risk > 0:
            if bound.get(arm_label(row)) is None:
                unbounded.append(arm_label(row))
                continue
            tok_s = min(bound[arm_label(row)], tok_s)
            basis = (f"held-out-cell lower bound at {req.capacity_risk:g} (cost model, "
                     "one-sided split conformal)")
        replica = fleet_plan.ReplicaCapacity(
            tok_s=tok_s, gpus=int(row["n_gpus"]), measured_tok_s=measured,
            alpha=req.capacity_risk, basis=basis,
            energy_per_token_j=_clean(row["energy_per_token_j"]),
            price_usd_per_gpu_h=spec.price_usd_per_h if spec else None,
            idle_w_per_gpu=spec.idle_w if spec else None)
        plans[arm_label(row)] = (row, fleet_plan.plan(
            ob, peak, replica, grid_req.bin_s, req.scale, req.min_replicas, gco2, req.pue,
            share))
    if not plans:
        raise ValueError("the cost model has no held-out prediction of any meeting arm's knee "
                         f"({', '.join(unbounded)}): plan with capacity risk 0")
    if req.arm is not None and req.arm not in plans:
        raise ValueError(f"arm {req.arm!r} does not meet the SLO or is not measured; arms that "
                         f"meet it: {', '.join(plans)}")

    def cost(item):  # priced arms first, by $ per 1M tokens (or $ where none was served)
        e = item[1][1].economics
        return (e["usd"] is None, e["usd_per_1m_tokens"] if e["usd_per_1m_tokens"] is not None
                else (e["usd"] or 0.0), e["planned_gpu_h"])

    ranked = sorted(plans.items(), key=cost)
    chosen = req.arm or ranked[0][0]
    return {"plan": plans[chosen][1], "arm": plans[chosen][0], "label": chosen,
            "ranked": ranked, "arms": arms, "share": share, "share_basis": share_basis,
            "bin_s": grid_req.bin_s, "carbon_basis": carbon_basis, "unbounded": unbounded,
            "predicted": predicted,
            "assumed_times": [a for a in store.dataset_summary(con, dataset)["assumptions"]
                              if a.startswith("start time assumed")],
            "chosen_by": "stated" if req.arm else "lowest $ per 1M tokens (arms the catalog "
                                                  "prices), then fewest GPU-hours"}


def _advisor_for(con, limits: dict[str, float]):
    """The cost model the capacity risk reads: throughput (its held-out lower bound), J per
    token, and each SLO limit's percentile (arms never benchmarked are judged on them), fitted
    on the store's benchmarks and cached beside it (:func:`analytics.services.advisor.fit_on`)."""
    from analytics.advisor.model import FitParams
    from analytics.services import advisor as advisor_service

    targets = ("throughput_tok_s", "energy_per_token_j", *sorted(limits))
    return advisor_service.fit_on(con, FitParams(targets=targets))


def _lower_bounds(adv, bench: pd.DataFrame, req: PlanRequest, meets: pd.DataFrame) -> dict:
    """Arm label -> the held-out-cell lower bound of its knee's throughput at
    ``req.capacity_risk`` (None: the cost model has no held-out prediction of that run)."""
    from analytics.advisor import lower

    out = {}
    for row in meets.to_dict("records"):
        knee = bench[(bench["model"] == req.model) & (bench["hardware"] == row["hardware"])
                     & (bench["n_gpus"] == row["n_gpus"]) & (bench["tp"] == row["tp"])
                     & (bench["precision"] == row["precision"])
                     & (bench["concurrency"] == row["concurrency"])
                     & (bench["throughput_tok_s"] == row["throughput_tok_s"])]
        out[arm_label(row)] = (lower.knee_bound(adv.cost.oof, knee.iloc[0].to_dict(),
                                                req.capacity_risk) if len(knee) else None)
    return out


def _predicted(adv, bench: pd.DataFrame, req: PlanRequest, arms: pd.DataFrame) -> pd.DataFrame:
    """The arms no benchmark of ``req.model`` ran, at the SLO by the cost model
    (:func:`analytics.advisor.slo_arms.predicted_knees`), at the model's own workload: its
    parameters, the median lengths its runs measured and its task."""
    from analytics.advisor import decide, slo_arms
    from analytics.services import advisor as advisor_service

    runs = bench[bench["model"] == req.model]
    if req.task is not None:
        runs = runs[runs["task"] == req.task]

    def first(col, default=float("nan")):
        vals = runs[col].dropna() if col in runs else pd.Series(dtype=float)
        return vals.iloc[0] if len(vals) else default

    params_b = float(first("params_b"))
    if not math.isfinite(params_b):
        return pd.DataFrame()
    work = {"params_b": params_b, "in_len": float(runs["in_len"].median()),
            "out_len": float(runs["out_len"].median()),
            "task": req.task or str(first("task", "lm-arena-chat")),
            "framework": str(first("framework", "vLLM"))}
    active = first("active_params_b")
    u = advisor_service.utility()
    scored = {c: advisor_service.advise(adv, decide.Request(
        req.model, params_b, float(c), work["in_len"], work["out_len"],
        active_params_b=float(active) if pd.notna(active) else None, task=work["task"],
        framework=work["framework"]), u) for c in slo_arms.CONCURRENCIES}
    skip = {tuple(r[c] for c in slo_arms.ARM) for r in arms.to_dict("records")}
    got = slo_arms.predicted_knees(adv.cost, scored, req.slo.limits(), req.capacity_risk,
                                   work, skip)
    return got.assign(out_len=work["out_len"], source="cost model (predicted)")


def plan_document(con, dataset: str, req: PlanRequest, bin: str | int = "5min") -> dict:
    """The ``headroom plan`` document (``docs/cli.md``): the chosen arm, its replicas over
    time as a summary (min / mean / max, per UTC hour), risk, backtest, economics, every
    meeting arm ranked, the arms that do not meet the SLO and why (:func:`document` of
    :func:`plan`)."""
    return document(plan(con, dataset, req, bin), dataset, req)


def document(out: dict, dataset: str, req: PlanRequest) -> dict:
    """The strict-JSON document of a :func:`plan` result (no store read)."""
    p, row = out["plan"], out["arm"]
    doc = {"dataset": dataset, "model": req.model, "task": req.task, "slo": req.slo.limits(),
           "arm": {"label": out["label"], **{k: _clean(row[k]) for k in (
               *fleet.ARM, "concurrency", "throughput_tok_s", "out_len", "judged_on",
               "held_to_max", "source")}},
           "chosen_by": out["chosen_by"],
           "output_share_basis": out["share_basis"],
           "carbon_basis": out["carbon_basis"], **fleet_plan.to_json(p)}
    doc["arms"] = [{"label": label, "basis": pl.replica.basis, "replicas_max": int(pl.frame.loc[
        pl.frame["part"] == "test", "replicas"].max()),
        "planned_gpu_h": pl.economics["planned_gpu_h"],
        "usd_per_1m_tokens": _clean(pl.economics["usd_per_1m_tokens"]),
        "j_per_token": _clean(pl.economics["j_per_token"]),
        "energy": "busy seconds only (no idle power in the catalog): a lower bound"
                  if pl.economics["energy_lower_bound"] else "linear power model",
        "shortfall_rate": _clean(pl.backtest["shortfall_rate"])}
        for label, (_, pl) in out["ranked"]]
    doc["not_meeting"] = [{"label": arm_label(r), "status": r["status"], "why": r["why"]}
                          for r in out["arms"].to_dict("records") if r["status"] != "meets"]
    pred = out["predicted"]
    if len(pred):  # arms no benchmark ran: counted, a few named (the catalog has hundreds)
        rest = pred[pred["status"] != "meets"]
        doc["predicted"] = {
            "meets": [arm_label(r) for r in pred[pred["status"] == "meets"].to_dict("records")],
            "counts": {k: int(v) for k, v in rest["status"].value_counts().items()},
            "examples": [{"label": arm_label(r), "status": r["status"], "why": r["why"]}
                         for r in rest.drop_duplicates("why").head(8).to_dict("records")],
            "rule": "an arm no benchmark ran meets the SLO at a concurrency when every limit "
                    "is above the cost model's calibrated q90 of that percentile (an 80 % "
                    "held-out-cell band); it is planned at its throughput's one-sided "
                    "held-out-cell lower bound there; outside measured support it abstains"}
    doc["not_meeting"] += [{"label": label, "status": "no lower bound",
                            "why": "the cost model has no held-out prediction of its knee run"}
                           for label in out["unbounded"]]
    span = p.frame["ts"]
    doc["notes"] = doc["notes"] + [
        f"the hourly profile comes from the {len(span):,} planned bins "
        f"({span.min():%Y-%m-%d %H:%M} to {span.max():%Y-%m-%d %H:%M}, "
        f"{(span.max() - span.min()).total_seconds() / 86400:.1f} days); an hour they do not "
        "cover takes the busiest hour"] + [
        f"hours of day are not UTC: {a}" for a in out["assumed_times"]] + [
        "capacity measured at the benchmark's own request lengths"
        + (f" (mean output {row['out_len']:.0f} tokens)" if pd.notna(row["out_len"]) else "")
        + "; a trace whose prompts are longer than the benchmark's needs more"]
    return doc


def export(con, dataset: str, req: PlanRequest, target: str, bin: str | int = "5min",
           **options) -> str:
    """The file that launches the plan on ``target`` (:data:`fleet_export.TARGETS`): a
    ``vllm serve`` command, a Kubernetes Deployment + KEDA ScaledObject, a SkyServe service or
    a Slurm batch script (:mod:`analytics.decisions.fleet_export`; ``options`` are that
    module's). Raises ValueError as :func:`plan`, and for an unknown target."""
    return render(plan(con, dataset, req, bin), req.model, target, **options)


def render(out: dict, model: str, target: str, **options) -> str:
    """The export file of a :func:`plan` result (no store read; :func:`export`)."""
    return fleet_export.render(target, model, out["arm"], out["plan"], **options)
