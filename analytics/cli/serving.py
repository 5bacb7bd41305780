"""``headroom serve-energy TRACE``: energy-aware shared-GPU serving what-ifs (Festina paper)."""

from __future__ import annotations

import sys
from pathlib import Path

from analytics import params
from analytics.cli.common import BadInput, add_cluster_args, log
from analytics.config import not_a_file

COMMANDS = {
    "serve-energy": "energy-aware shared-GPU serving what-ifs (Festina): max-clock, static DVFS, "
                    "Festina and its ablation",
}


def add_parsers(sub) -> None:
    """Add ``serve-energy`` to the ``headroom`` parser."""
    from analytics.services import serving
    from analytics.serving import ServingParams

    p = sub.add_parser("serve-energy", help=COMMANDS["serve-energy"])
    p.add_argument("trace", help="request dataset in the store (e.g. AzureLLMInferenceTrace_conv)")
    p.add_argument("--policy", default="all",
                   help="all, or one of " + ", ".join(serving.ALL_POLICIES))
    params.add_arguments(p, ServingParams)  # every knob: help, unit and bounds in one place
    p.add_argument("--sensitivity", action="store_true",
                   help="also sweep gamma (calibrated, 1.5, 2, 3) x static power (x0.5, 1, 1.5) "
                        "for max-clock vs Festina, on the sweep runner: points kept in the "
                        "store's sweep_runs and read back on a rerun")
    add_cluster_args(p, "the policies and the sensitivity sweep")
    p.add_argument("--prediction-sweep", action="store_true",
                   help="also run max-clock vs Festina with the output-length predictor at "
                        "0, 2.5, 5 and 10 %% error and the quantile predictor, all replaying "
                        "the trace after the quantile predictor's fit window")
    p.add_argument("--bench", nargs="+", default=None, metavar="DATASET",
                   help="bench datasets to build profiles from (default: all bench_runs)")
    p.add_argument("--profile", default=None, metavar="CSV",
                   help="measured profile CSV (model,gpu,phase,sm_share,clock_mhz,latency_ms,"
                        "power_w) replacing the DVFS model")
    p.set_defaults(run=serve_energy)


def serve_energy(args, settings) -> dict:
    """Every (or one) serving policy on a stored trace."""
    from analytics.services import open_store, serving
    from analytics.serving import ServingParams

    policies = serving.ALL_POLICIES if args.policy == "all" else (args.policy,)
    if args.policy != "all" and args.policy not in serving.ALL_POLICIES:
        raise BadInput(f"--policy {args.policy!r}: choose all or one of "
                       f"{', '.join(serving.ALL_POLICIES)}")
    measured, measured_name = None, "uploaded profile"
    if args.profile:
        path = Path(args.profile)
        if (why := not_a_file(path)) is not None:
            raise BadInput(f"{path}: {why}")
        measured, measured_name = path.read_bytes(), path.name
    what_if = params.from_namespace(ServingParams, args)
    bench = tuple(args.bench) if args.bench else None
    with open_store(settings.db_path) as con:
        inputs = serving.policy_inputs(con, args.trace, what_if, policies, measured,
                                       measured_name, bench)
    # the store is closed: the sweeps write their tasks through their own connections
    out = _policies(args, settings, inputs, what_if, policies)
    if args.sensitivity:  # the same trace, profiles and key
        out.update(_sensitivity(args, settings, inputs, what_if))
    if args.prediction_sweep:
        log("serve-energy: output-length prediction sweep (5 x 2 runs) ...")
        with open_store(settings.db_path) as con:
            sweep = serving.prediction_sweep(con, args.trace, what_if, measured, measured_name,
                                             bench)
        out["prediction_error"] = serving.prediction_records(sweep, what_if)
    return out


def _policies(args, settings, inputs: dict, what_if, policies: tuple[str, ...]) -> dict:
    """The policy comparison on the sweep runner (one task per policy; ``--cluster``, else
    ``$HEADROOM_DASK_SCHEDULER``, else a local pool), policy runs kept in the store unless
    ``--no-store``, a tqdm bar on stderr; the document (:func:`analytics.serving.to_json`)
    plus ``policies_run``."""
    from tqdm import tqdm

    from analytics.services import serving
    from analytics.serving import to_json
    from analytics.sweep import resolve_backend

    log(f"serve-energy: {len(policies)} policies ...")
    with tqdm(total=len(policies), file=sys.stderr, desc="policies", unit="policy") as bar:
        def step(done: int, total: int, _label: str = "") -> None:
            bar.total = total
            bar.update(done - bar.n)
        comp, run = serving.run_policies(
            inputs, what_if, policies, store_path=None if args.no_store else settings.db_path,
            backend=resolve_backend(args.cluster), progress=step)
    return to_json(comp) | {"policies_run": run}


def _sensitivity(args, settings, inputs: dict, what_if) -> dict:
    """The sensitivity sweep on the sweep runner: ``--cluster`` (else
    ``$HEADROOM_DASK_SCHEDULER``, else a local pool), points kept in the store unless
    ``--no-store``, a tqdm bar on stderr; the document's ``sensitivity`` and
    ``sensitivity_run``."""
    from tqdm import tqdm

    from analytics.services import serving
    from analytics.sweep import resolve_backend

    log("serve-energy: sensitivity sweep (12 x 2 runs) ...")
    with tqdm(total=12, file=sys.stderr, desc="sensitivity", unit="setting") as bar:
        def step(done: int, total: int, _label: str = "") -> None:
            bar.total = total
            bar.update(done - bar.n)
        sens = serving.run_sensitivity(
            inputs, what_if, store_path=None if args.no_store else settings.db_path,
            backend=resolve_backend(args.cluster), progress=step)
    return serving.sensitivity_records(sens)
