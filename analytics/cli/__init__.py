"""The ``headroom`` command: every analysis, one JSON document on stdout.

Exit codes: 0 success, 2 bad input (the message names file, line and column where there is one),
1 internal error. Progress goes to stderr. See ``DESIGN.md`` for the contract of each command.

Each command family is one module with ``add_parsers(sub)`` (its flags, each subcommand's
``run`` handler set with ``set_defaults``) and handlers ``(args, settings) -> document`` that
only parse arguments and call :mod:`analytics.services`.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from analytics import store
from analytics.cli import advisor, data, decisions, demand, output, power, serving
from analytics.cli import telemetry as telemetry_cli
from analytics.cli.common import BadInput
from analytics.config import Settings
from analytics.envelope.grid import GridError
from analytics.ingest.formats import FormatError
from analytics.ingest.sources import PullError
from analytics.telemetry import TelemetryUnavailable

FAMILIES = (data, demand, decisions, telemetry_cli, advisor, serving, power)


def parser() -> argparse.ArgumentParser:
    """The whole ``headroom`` argument parser (every family's subcommands)."""
    ap = argparse.ArgumentParser(prog="headroom", description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, default=None,
                    help="DuckDB store (default $HEADROOM_DB or data/headroom.duckdb)")
    sub = ap.add_subparsers(dest="command", required=True)
    for family in FAMILIES:
        family.add_parsers(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``headroom`` console script. Returns the exit code."""
    logging.getLogger().setLevel(logging.WARNING)  # MAPIE logs INFO on the root logger
    args = parser().parse_args(argv)
    env = Settings.from_env()
    settings = Settings(db_path=args.db or env.db_path, data_dir=env.data_dir)
    try:
        result = args.run(args, settings)
    except FormatError as exc:
        return _fail(2, str(exc), exc.as_dict())
    except (BadInput, store.NameTaken, store.UnknownDataset, GridError, ValueError,
            KeyError) as exc:
        msg = str(exc) if not isinstance(exc, KeyError) or isinstance(exc, store.UnknownDataset) \
            else exc.args[0]
        return _fail(2, msg)
    except (PullError, store.StoreError, TelemetryUnavailable) as exc:
        return _fail(1, str(exc))
    print(output.dumps(result))
    return 0


def _fail(code: int, message: str, detail: dict | None = None) -> int:
    print(f"headroom: error: {message}", file=sys.stderr)
    print(output.dumps({"error": message, **({"detail": detail} if detail else {})}))
    return code


__all__ = ["main", "parser"]
