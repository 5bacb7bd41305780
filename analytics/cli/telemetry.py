"""``headroom telemetry sample | summary``: poll NVML now and store the rows; per (host, GPU)
energy, power and serving-window averages of a stored telemetry dataset."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from analytics.cli.common import log

COMMANDS = {"telemetry": "GPU telemetry: sample NVML now, summarise a dataset"}


def add_parsers(sub) -> None:
    """Add ``telemetry`` to the ``headroom`` parser."""
    p = sub.add_parser("telemetry", help=COMMANDS["telemetry"])
    tsub = p.add_subparsers(dest="telemetry_command", required=True)
    t = tsub.add_parser("sample", help="poll every GPU through NVML and store the rows")
    t.add_argument("--seconds", type=float, default=10.0)
    t.add_argument("--interval-ms", type=int, default=500)
    t.add_argument("--name", default=None, help="dataset name (default nvml_<host>_<start>)")
    t.add_argument("--no-store", action="store_true", help="only print the summary")
    t.set_defaults(run=sample)
    t = tsub.add_parser("summary", help="one row per (host, GPU) of a stored telemetry "
                                        "dataset: power, reset-aware energy, window means")
    t.add_argument("dataset")
    t.add_argument("--start", type=_utc, default=None,
                   help="window start, ISO 8601 UTC (default: first busy sample)")
    t.add_argument("--end", type=_utc, default=None,
                   help="window end, ISO 8601 UTC, included (default: end of the busy span)")
    t.set_defaults(run=summary)


def _utc(text: str) -> datetime:
    """ISO 8601 time as naive UTC (an offset is converted)."""
    try:
        t = datetime.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not ISO 8601") from exc
    return t if t.tzinfo is None else t.astimezone(UTC).replace(tzinfo=None)


def summary(args, settings) -> dict:
    """Per (host, GPU) power and energy (counter deltas, reset-aware, and power x time) over
    the window, and whole-job vs window means of each metric."""
    from analytics.services import open_store, telemetry

    with open_store(settings.db_path) as con:
        return telemetry.summary_document(con, args.dataset, args.start, args.end)


def sample(args, settings) -> dict:
    """Sample NVML for ``--seconds`` (stored unless ``--no-store``)."""
    from analytics.services import open_store, telemetry

    if args.no_store:
        return telemetry.sample_into_store(None, args.seconds, args.interval_ms, args.name, log)
    with open_store(settings.db_path, write=True) as con:
        return telemetry.sample_into_store(con, args.seconds, args.interval_ms, args.name, log)
