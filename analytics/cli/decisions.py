"""``headroom capacity | dispatch``: decisions on top of the demand envelope."""

from __future__ import annotations

import argparse

from analytics.cli.common import (
    BadInput,
    LazyChoices,
    add_grid_args,
    grid_request,
    nonneg,
    open_unit,
    positive,
    unit_interval,
)
from analytics.config import GPU_CATALOG

COMMANDS = {
    "capacity": "calibrated overbooking, GPU-hours and GPU mix",
    "dispatch": "carbon-aware dispatch of the envelope across sites",
    "slo-capacity": "per-replica throughput at a latency SLO, per measured arm of a model",
    "plan": "replicas over time for a trace under a latency SLO at a stated risk, and the "
            "files that launch them",
}

def _methods() -> tuple[str, ...]:
    """The interval methods of the registry (a method registered there is offered here)."""
    from analytics.envelope.registry import METHODS

    return tuple(METHODS)


def _objectives() -> tuple[str, ...]:
    from analytics.decisions import mix  # SciPy's optimiser: only when asked

    return mix.OBJECTIVES[:2]


def _fill_methods() -> tuple[str, ...]:
    from analytics.decisions.sites import FILL_METHODS

    return FILL_METHODS


def _utilization_args(p) -> None:
    p.add_argument("--utilization", type=unit_interval, default=0.8,
                   help="GPU utilization for power: idle + (TDP - idle) x utilization")
    p.add_argument("--utilisation", dest="utilization", type=unit_interval,
                   help=argparse.SUPPRESS)  # the British spelling, kept as a hidden alias


def add_parsers(sub) -> None:
    """Add the decision subcommands to the ``headroom`` parser."""
    p = sub.add_parser("capacity", help=COMMANDS["capacity"])
    add_grid_args(p)
    p.add_argument("--alpha", type=open_unit, default=0.1, help="envelope miscoverage")
    p.add_argument("--target-violation", dest="violation_target", type=open_unit, default=0.05,
                   help="tolerated share of bins whose demand exceeds capacity")
    p.add_argument("--delta", type=open_unit, default=0.1,
                   help="Learn-then-Test failure probability of the certificate")
    p.add_argument("--objective", choices=LazyChoices(_objectives), default="cost",
                   metavar="OBJECTIVE",
                   help="GPU mix objective: cost or power (carbon: use the Capacity page or "
                        "dispatch)")
    p.add_argument("--scale", type=positive, default=1.0,
                   help="traffic multiplier (scenario): a public trace is one tenant's sample")
    _utilization_args(p)
    p.add_argument("--available", default="",
                   help="GPU availability, e.g. H100-80GB=64,A100-40GB=128")
    p.set_defaults(run=capacity_cmd)

    p = sub.add_parser("dispatch", help=COMMANDS["dispatch"])
    add_grid_args(p)
    p.add_argument("--sites", required=True, help="comma-separated carbon sites, e.g. "
                                                  "CISO,ERCO,BPAT,PJM,NYIS")
    p.add_argument("--home", default=None, help="baseline home site (default: the first)")
    p.add_argument("--gpu", default="H100-80GB", help="GPU kind whose energy per unit is used")
    p.add_argument("--scale", type=positive, default=1.0,
                   help="traffic multiplier (scenario): a public trace is one tenant's sample")
    _utilization_args(p)
    p.add_argument("--max-share", type=unit_interval, default=1.0,
                   help="most share of an hour per site")
    p.add_argument("--offset-days", type=int, default=0,
                   help="shift when aligning site-data years to the trace by day-of-year")
    p.add_argument("--basis", default=None, help="carbon basis: avg, LCA or direct")
    p.add_argument("--dispatched", choices=["provisioned", "upper"], default="provisioned",
                   help="what is dispatched: the capacity Capacity provisions, the overbooking "
                        "factor x the rolling band (provisioned, default), or an envelope's "
                        "upper bound itself (upper, with --method)")
    p.add_argument("--target-violation", dest="violation_target", type=open_unit, default=0.05,
                   help="provisioned: tolerated share of bins whose demand exceeds capacity")
    p.add_argument("--delta", type=open_unit, default=0.1,
                   help="provisioned: Learn-then-Test failure probability of the certificate")
    p.add_argument("--method", default="rolling", choices=LazyChoices(_methods),
                   metavar="METHOD",
                   help="envelope whose upper bound is served (the provisioned capacity is "
                        "the rolling band's)")
    p.add_argument("--alpha", type=open_unit, default=0.1, help="envelope miscoverage")
    p.add_argument("--fill-missing", choices=LazyChoices(_fill_methods), default="none",
                   metavar="METHOD",
                   help="trace hours without a carbon / weather / price value at a site: refuse "
                        "naming them (none, default; checked before any fitting), carry the "
                        "last value forward (ffill) or interpolate linearly (interpolate)")
    p.add_argument("--carbon", default=None, help=argparse.SUPPRESS)  # accepted, sites name it
    p.set_defaults(run=dispatch_cmd)

    p = sub.add_parser("slo-capacity", help=COMMANDS["slo-capacity"])
    _slo_args(p)
    p.set_defaults(run=slo_capacity_cmd)

    p = sub.add_parser("plan", help=COMMANDS["plan"])
    p.add_argument("dataset", help="a request trace or a pre-binned demand series")
    p.add_argument("--bin", default="5min", help="bin width: 1min, 5min, 15min, 1h, 300s")
    _slo_args(p)
    p.add_argument("--risk", type=open_unit, default=0.05,
                   help="stated probability that a bin falls short of demand")
    p.add_argument("--capacity-risk", type=nonneg, default=0.0,
                   help="share of --risk spent on capacity: 0 plans the measured knee as "
                        "exact; above 0, its held-out-cell lower bound at that miscoverage")
    p.add_argument("--delta", type=open_unit, default=0.1,
                   help="Learn-then-Test failure probability of the demand certificate")
    p.add_argument("--alpha", type=open_unit, default=0.1, help="envelope miscoverage")
    p.add_argument("--arm", default=None, help="the arm to plan, by its label (e.g. "
                                               "'H100-80GB x1 TP1 bf16'; default: the cheapest)")
    p.add_argument("--scale", type=positive, default=1.0,
                   help="traffic multiplier (scenario): a public trace is one tenant's sample")
    p.add_argument("--min-replicas", type=int, default=1, help="fewest replicas kept up")
    p.add_argument("--output-share", type=unit_interval, default=None,
                   help="pre-binned series: share of its tokens that are output tokens")
    p.add_argument("--output-share-from", default=None,
                   help="pre-binned series: a request dataset whose completion share is used")
    p.add_argument("--gco2-per-kwh", type=positive, default=None, help="carbon intensity")
    p.add_argument("--site", default=None,
                   help="a stored carbon site: its mean intensity is used")
    p.add_argument("--pue", type=positive, default=1.0, help="facility over IT energy, >= 1")
    p.add_argument("--emit", choices=list(EMIT), default=None,
                   help="print that file instead of the JSON document")
    p.add_argument("--max-model-len", type=int, default=None,
                   help="--emit: the engines' context length (--max-model-len)")
    p.add_argument("--prometheus-url", default=None,
                   help="--emit k8s: the operator's Prometheus server for the KEDA trigger")
    p.add_argument("--waiting-per-replica", type=positive, default=None,
                   help="--emit k8s: waiting requests per replica the KEDA trigger scales at "
                        "(default: the knee's concurrency, one replica's batch)")
    p.add_argument("--time-limit", default="1-00:00:00", help="--emit slurm: sbatch --time")
    p.set_defaults(run=plan_cmd)


#: ``headroom plan --emit`` targets (:data:`analytics.decisions.fleet_export.TARGETS`).
EMIT = ("vllm", "k8s", "skyserve", "slurm")


def _slo_args(p) -> None:
    p.add_argument("--model", required=True, help="the benchmarked model (its model id)")
    p.add_argument("--task", default=None, help="only runs of this benchmark task")
    for flag, what in (("ttft-p90-ms", "TTFT p90 (ms)"), ("ttft-p99-ms", "TTFT p99 (ms)"),
                       ("itl-p90-ms", "inter-token latency p90 (ms)"),
                       ("itl-p99-ms", "inter-token latency p99 (ms)"),
                       ("tpot-p99-ms", "time per output token p99 (ms)"),
                       ("latency-p99-s", "end-to-end latency p99 (s)")):
        p.add_argument(f"--{flag}", type=positive, default=None, help=f"SLO limit on the {what}")


def _slo(args):
    from analytics.decisions.fleet import Slo

    slo = Slo(args.ttft_p90_ms, args.ttft_p99_ms, args.itl_p90_ms, args.itl_p99_ms,
              args.tpot_p99_ms, args.latency_p99_s)
    try:
        slo.limits()
    except ValueError as exc:
        raise BadInput(str(exc)) from exc
    return slo


def _available(text: str) -> tuple[tuple[str, int], ...]:
    known = {k.name for k in GPU_CATALOG}
    out = []
    for item in filter(None, text.split(",")):
        name, _, count = item.partition("=")
        if name.strip() not in known:
            raise BadInput(f"--available: unknown GPU kind {name.strip()!r}; known: "
                           f"{sorted(known)}")
        try:
            out.append((name.strip(), int(count)))
        except ValueError as exc:
            raise BadInput(f"--available {item!r}: the count must be a whole number") from exc
    return tuple(out)


def capacity_cmd(args, settings) -> dict:
    """Overbooking factor, violations, shortfall, GPU-hours and GPU mix."""
    from analytics.envelope.pipeline import EnvelopeParams
    from analytics.services import decisions, open_store

    req = decisions.CapacityRequest(
        violation_target=args.violation_target, delta=args.delta, objective=args.objective,
        available=_available(args.available), utilization=args.utilization, scale=args.scale)
    with open_store(settings.db_path) as con:
        return decisions.capacity_document(con, grid_request(args), req,
                                           EnvelopeParams(alpha=args.alpha))


def dispatch_cmd(args, settings) -> dict:
    """Carbon-aware dispatch vs all-at-home and capacity-proportional baselines."""
    from analytics.decisions.sites import MissingHours
    from analytics.envelope.pipeline import EnvelopeParams
    from analytics.services import decisions, open_store

    kinds = {k.name for k in GPU_CATALOG}
    if args.gpu not in kinds:
        raise BadInput(f"--gpu {args.gpu!r}: known kinds {sorted(kinds)}")
    sites = tuple(s.strip() for s in args.sites.split(",") if s.strip())
    req = decisions.DispatchRequest(
        sites=sites, gpu=args.gpu, scale=args.scale, utilization=args.utilization,
        offset_days=args.offset_days, basis=args.basis, home=args.home,
        max_share=args.max_share, method=args.method, fill_missing=args.fill_missing,
        dispatched=args.dispatched, violation_target=args.violation_target, delta=args.delta)
    with open_store(settings.db_path) as con:
        try:
            return decisions.dispatch_document(con, grid_request(args), req,
                                               EnvelopeParams(alpha=args.alpha))
        except MissingHours as exc:
            raise BadInput(f"{exc} (--fill-missing ffill or interpolate)") from exc


def slo_capacity_cmd(args, settings) -> dict:
    """Per-replica capacity at a latency SLO, per measured arm."""
    from analytics.services import fleet, open_store

    slo = _slo(args)
    with open_store(settings.db_path) as con:
        try:
            return fleet.slo_capacity_document(con, args.model, slo, args.task)
        except ValueError as exc:
            raise BadInput(str(exc)) from exc


def plan_cmd(args, settings):
    """Replicas over time under the SLO at the stated risk (JSON), or one export (--emit)."""
    from analytics.cli.output import Text
    from analytics.envelope.pipeline import EnvelopeParams
    from analytics.services import fleet, open_store

    req = fleet.PlanRequest(
        model=args.model, slo=_slo(args), risk=args.risk, capacity_risk=args.capacity_risk,
        delta=args.delta, task=args.task,
        arm=args.arm, scale=args.scale, min_replicas=args.min_replicas,
        output_share=args.output_share, output_share_from=args.output_share_from,
        gco2_per_kwh=args.gco2_per_kwh, site=args.site, pue=args.pue,
        envelope=EnvelopeParams(alpha=args.alpha))
    if args.min_replicas < 0:
        raise BadInput(f"--min-replicas must be 0 or more, not {args.min_replicas}")
    with open_store(settings.db_path) as con:
        if args.emit is None:
            return fleet.plan_document(con, args.dataset, req, args.bin)
        return Text(fleet.export(con, args.dataset, req, args.emit, args.bin,
                                 max_model_len=args.max_model_len,
                                 prometheus_url=args.prometheus_url,
                                 waiting_per_replica=args.waiting_per_replica,
                                 time_limit=args.time_limit))
