"""``headroom telemetry sample``: poll NVML now and store the rows."""

from __future__ import annotations

from analytics.cli.common import log
from analytics.services import open_store, telemetry


def add_parsers(sub) -> None:
    """Add ``telemetry`` to the ``headroom`` parser."""
    p = sub.add_parser("telemetry", help="GPU telemetry: sample NVML now")
    tsub = p.add_subparsers(dest="telemetry_command", required=True)
    t = tsub.add_parser("sample", help="poll every GPU through NVML and store the rows")
    t.add_argument("--seconds", type=float, default=10.0)
    t.add_argument("--interval-ms", type=int, default=500)
    t.add_argument("--name", default=None, help="dataset name (default nvml_<host>_<start>)")
    t.add_argument("--no-store", action="store_true", help="only print the summary")
    t.set_defaults(run=sample)


def sample(args, settings) -> dict:
    """Sample NVML for ``--seconds`` (stored unless ``--no-store``)."""
    if args.no_store:
        return telemetry.sample_into_store(None, args.seconds, args.interval_ms, args.name, log)
    with open_store(settings.db_path, write=True) as con:
        return telemetry.sample_into_store(con, args.seconds, args.interval_ms, args.name, log)
