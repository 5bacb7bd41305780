"""``headroom powersim``: the hybrid power co-simulation from the command line.

The document (``docs/cli.md`` states what every command shares)::

    headroom powersim [--inference-share X] [--utilization U] [--sweep]
        -> {"cv", "ramp_p50": {"1min", "5min", "15min"}, "sweep": [...]}

``cv`` and ``ramp_p50`` are the scenario (X, U); ``sweep`` is empty unless ``--sweep``, which
runs every share of ``--shares`` at every utilisation of ``--sweep-utilizations`` (default 11
shares x 2 utilisations), scheduler of ``--sweep-schedulers`` and checkpoint length of
``--sweep-checkpoints``, ``--replications`` times each, on the sweep runner
(:mod:`analytics.sweep`: a local process pool, or the Dask scheduler of ``--cluster`` /
``$HEADROOM_DASK_SCHEDULER``; progress and ETA on stderr; Ctrl-C stops it, finished points
stay stored). Each ``sweep`` row is a cell: every metric's mean over the replications with
``<metric>_lo95`` / ``<metric>_hi95`` (95 % t-interval; null with one replication) and
``replications``. Points are kept in the store (``sweep_runs``): a rerun reads them, an
interrupted sweep computes only the missing ones. Extra keys: ``scenario``, ``metrics``,
``shape`` (U-shaped CV and 15-minute ramp hump: true / false / "not distinguishable" within the
bands, plus the verdicts of the means), ``sweep_run`` (tasks computed / cached, backend,
workers, wall and task CPU seconds, dashboard link), ``inputs`` (datasets, resource groups, LLM
templates, power sources, ``demand_density``; with ``--inference-model groups`` the request
groups and their replay validation under ``inputs.request_model``), ``synthetic`` and
``warnings`` (the inference trace is too sparse to represent serving load: half or more of its
minutes empty). Every sweep row and ``metrics`` carry the realised utilisation and inference
share and the clipped inference GPU-minutes; ``--hold served`` (default) scales inference so
its *served* GPU-time is share x U x pool.
"""

from __future__ import annotations

import argparse
import sys

from analytics import params
from analytics.cli.common import add_cluster_args, log, positive_int
from analytics.cli.common import unit_interval as _util  # utilization in (0, 1]

COMMANDS = {
    "powersim": "hybrid batch + inference power profiles: coefficient of variation and ramps vs "
                "inference share",
}


def _share(text: str) -> float:
    v = float(text)
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} must be in [0, 1]")
    return v


def _list(kind):
    def parse(text: str) -> tuple[float, ...]:
        try:
            return tuple(kind(x) for x in text.split(",") if x.strip())
        except (ValueError, argparse.ArgumentTypeError) as exc:
            raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from exc
    return parse


def _scheduler(text: str) -> str:
    from analytics.power import SCHEDULERS

    if text.strip() not in SCHEDULERS:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(SCHEDULERS)}")
    return text.strip()


def _checkpoint(text: str) -> float | None:
    if text.strip().lower() in ("none", "0"):
        return None
    v = float(text)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be > 0 minutes or 'none'")
    return v


def add_parsers(sub) -> None:
    """Add the ``powersim`` subcommand to the ``headroom`` parser."""
    from analytics import power as powersim

    p = sub.add_parser("powersim", help=COMMANDS["powersim"])
    params.add_arguments(p, powersim.Scenario, skip=("checkpoint_min",))
    p.add_argument("--checkpoint-min", type=float, default=60.0,
                   help=params.help_of(powersim.Scenario, "checkpoint_min") + "; 0 = none")
    p.add_argument("--sweep", action="store_true",
                   help="also sweep the inference share at --sweep-utilizations")
    p.add_argument("--shares", type=_list(_share), default=powersim.DEFAULT_SHARES,
                   help="inference shares of the sweep (default 0,0.1,...,1)")
    p.add_argument("--sweep-utilizations", type=_list(_util),
                   default=powersim.DEFAULT_UTILIZATIONS,
                   help="utilisations of the sweep (default 0.5,0.8)")
    p.add_argument("--replications", type=positive_int, default=3,
                   help="seeds per sweep cell: mean and 95%% t-interval (default 3)")
    p.add_argument("--sweep-schedulers", type=_list(_scheduler), default=(),
                   help="queue orders to sweep, e.g. fcfs,swf (default: --scheduler)")
    p.add_argument("--sweep-checkpoints", type=_list(_checkpoint), default=(),
                   help="checkpoint lengths to sweep, min, 'none' for none, e.g. 15,60,none "
                        "(default: --checkpoint-min)")
    add_cluster_args(p, "the sweep")
    p.add_argument("--jobs", default=None,
                   help="jobs dataset (default: the largest in the store)")
    p.add_argument("--inference", default=None,
                   help="demand dataset at <= 1 min resolution, or 'synthetic' (default: the "
                        "longest dense token trace in the store, else the synthetic envelope; "
                        "a trace with half or more of its minutes empty is too sparse and "
                        "comes last, and its result carries a warning)")
    p.add_argument("--inference-model", choices=("replay", "groups"), default="replay",
                   help="inference arrivals: replay the --inference trace (default) or draw from "
                        "the paper's request groups (code / conversation Q1-Q4, negative-binomial "
                        "minute counts) fitted on the store's Azure LLM traces")
    p.add_argument("--clock-offset-h", type=float, default=None,
                   help="hours from UTC to the job trace's site clock (default: -5 for MIT "
                        "SuperCloud, else 0)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(run=run)


def run(args, settings) -> dict:
    """Execute ``headroom powersim``; returns the JSON document (NaN -> null in
    :mod:`analytics.cli.output`).

    Raises
    ------
    ValueError
        Bad parameters or no job trace (exit 2 with the message).
    """
    from tqdm import tqdm

    from analytics import power as powersim
    from analytics.services import open_store, power

    scenario = params.from_namespace(
        powersim.Scenario, args,
        checkpoint_min=args.checkpoint_min if args.checkpoint_min > 0 else None)
    with open_store(settings.db_path) as con:
        log("fitting the batch arrival model")
        inputs = power.load_inputs(con, args.jobs, args.inference, args.seed,
                                   args.clock_offset_h, args.inference_model)
    if not args.sweep:
        return power.document(inputs, scenario, args.seed)
    from analytics.sweep import resolve_backend

    with open_store(settings.db_path) as con:
        key_inputs = power.sweep_key_inputs(con, inputs, args.seed, args.clock_offset_h)
    n_cells = (len(args.shares) * len(args.sweep_utilizations) * max(1, len(args.sweep_schedulers))
               * max(1, len(args.sweep_checkpoints)))
    with tqdm(total=n_cells * args.replications, file=sys.stderr, desc="sweep",
              unit="run") as bar:
        return power.document(inputs, scenario, args.seed, args.sweep_utilizations, args.shares,
                              args.replications,
                              lambda done, _total, *_label: bar.update(done - bar.n),
                              schedulers=args.sweep_schedulers,
                              checkpoints=args.sweep_checkpoints,
                              store_path=None if args.no_store else settings.db_path,
                              key_inputs=key_inputs, backend=resolve_backend(args.cluster))
