"""The ``headroom`` command: every analysis, one JSON document on stdout.

Exit codes: 0 success, 2 bad input (the message names file, line and column where there is one),
1 internal error. Progress goes to stderr. ``docs/cli.md`` is the contract of every command.

Each command family is one module with ``add_parsers(sub)`` (its flags, each subcommand's
``run`` handler set with ``set_defaults``) and handlers ``(args, settings) -> document`` that
only parse arguments and call :mod:`analytics.services`.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from pathlib import Path

from analytics.cli.common import BadInput

#: The command families in help order, each a module of :mod:`analytics.cli` with ``COMMANDS``
#: (subcommand -> one-line help) and ``add_parsers(sub)``. They are imported light: each imports
#: its analyses (pandas, scikit-learn, MAPIE, LightGBM ...) inside the handlers, so that
#: ``headroom --help``, ``datasets`` or ``ingest`` do not pay for the envelope's libraries.
FAMILY_NAMES = ("data", "demand", "decisions", "telemetry", "advisor", "serving", "power",
                "live")


def families() -> list:
    """The family modules, in help order."""
    return [importlib.import_module(f"analytics.cli.{n}") for n in FAMILY_NAMES]


class _Parser(argparse.ArgumentParser):
    """argparse with a usage error also printed as the command's JSON document
    (``{"error": ...}`` on stdout, exit 2), like every other refusal: a script reading stdout
    gets a strict JSON answer whatever was wrong (break-it review)."""

    def error(self, message: str):
        from analytics.cli import output

        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        print(output.dumps({"error": f"{self.prog}: {message}"}))
        raise SystemExit(2)


def parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``headroom`` argument parser.

    ``command`` None: every family's subcommands with all their flags. Otherwise only the
    family that owns ``command`` is built in full; every other subcommand is listed by name and
    help (enough for ``headroom --help``), which spares the imports their flags need (the
    power simulation's scenario fields, the serving parameters).
    """
    ap = _Parser(prog="headroom", description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, default=None,
                    help="DuckDB store (default $HEADROOM_DB or data/headroom.duckdb)")
    sub = ap.add_subparsers(dest="command", required=True)
    for family in families():
        if command is None or command in family.COMMANDS:
            family.add_parsers(sub)
        else:
            for name, help_ in family.COMMANDS.items():
                sub.add_parser(name, help=help_, add_help=False)
    return ap


def _command_of(argv: list[str]) -> str:
    """The subcommand named in ``argv`` ("" when none: ``--help``, a usage error)."""
    rest = iter(argv)
    for arg in rest:
        if arg == "--db":
            next(rest, None)
        elif not arg.startswith("-"):
            return arg
    return ""


def entry() -> None:
    """The ``headroom`` console script and ``python -m analytics.cli``: :func:`main`, then exit
    with its code. Every object alive is frozen out of the garbage collector first
    (``gc.freeze``): the interpreter's last collection of a fitted envelope's objects cost
    about 0.6 s of CPU after the document was printed (issue 35 profile); atexit handlers
    still run."""
    import gc

    code = main()
    gc.freeze()
    raise SystemExit(code)


def main(argv: list[str] | None = None) -> int:
    """The ``headroom`` command on ``argv`` (default ``sys.argv[1:]``); prints its JSON
    document and returns the exit code (tests call it in process)."""
    _quiet_root_logger()
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser(_command_of(argv)).parse_args(argv)
    if not hasattr(args, "run"):  # the command was not the one guessed: build everything
        args = parser().parse_args(argv)
    from analytics.cli import output
    from analytics.config import Settings

    env = Settings.from_env()
    settings = Settings(db_path=args.db or env.db_path, data_dir=env.data_dir)
    try:
        result = args.run(args, settings)
        if isinstance(result, output.JsonLines):  # one compact strict-JSON object per line,
            for doc in result:                    # each as it comes (a refusal after some
                print(output.dumps_line(doc), flush=True)  # lines ends the stream)
            return 0
        if isinstance(result, output.Text):  # a file (plan --emit): printed as it is
            sys.stdout.write(result.text)
            return 0
    except (ValueError, KeyError, RuntimeError, BadInput) as exc:
        code = _exit_code(exc)
        if code is None:
            raise
        if isinstance(exc, _loaded("analytics.ingest.rawfile", "FormatError")):
            return _fail(code, str(exc), exc.as_dict())
        plain_key = isinstance(exc, KeyError) and not isinstance(
            exc, _loaded("analytics.store.core", "UnknownDataset"))
        return _fail(code, str(exc.args[0]) if plain_key and exc.args else str(exc))
    from analytics.cli import provenance

    provenance.label(result, args, settings.db_path)
    print(output.dumps(result))
    return 0


def _quiet_root_logger() -> None:
    """Warnings and errors to stderr as plain lines (what Python prints with no handler), and
    nothing below WARNING: MAPIE's ``utils`` calls ``logging.basicConfig(level=INFO)`` before
    it logs "The predictions are ill-sorted.", which on a root logger without a handler set
    the level to INFO and printed the line on every cold envelope (a handler makes that call a
    no-op)."""
    root = logging.getLogger()
    root.setLevel(logging.WARNING)
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        root.addHandler(handler)


def _loaded(module: str, name: str) -> type:
    """Exception class ``name`` of ``module`` if that module was imported, else a class nothing
    is an instance of: an error of a module the command never imported cannot have been raised,
    so the handlers need not import the envelope, telemetry or download code to catch theirs."""
    mod = sys.modules.get(module)
    return getattr(mod, name) if mod is not None else _NeverRaised


class _NeverRaised(Exception):
    pass


def _exit_code(exc: BaseException) -> int | None:
    """2 for bad input (a file, line and column where the error has them; an unknown dataset; a
    taken name; a grid the data cannot give; a store file headroom may not open as asked; files
    that cannot be attached, or changed since; any
    ValueError / KeyError), 1 for an internal error
    that has a message for the user (download, store, telemetry, a cancelled sweep), None for a
    bug (re-raised)."""
    if isinstance(exc, (BadInput, ValueError, KeyError,
                        _loaded("analytics.store.core", "StoreRefused"),
                        _loaded("analytics.store.attached", "AttachRefused"),
                        _loaded("analytics.store.attached", "AttachedChanged"))):
        return 2
    internal = (_loaded("analytics.ingest.sources", "PullError"),
                _loaded("analytics.store.core", "StoreError"),
                _loaded("analytics.telemetry", "TelemetryUnavailable"),
                _loaded("analytics.sweep.runner", "SweepCancelled"))
    return 1 if isinstance(exc, internal) else None


def _fail(code: int, message: str, detail: dict | None = None) -> int:
    from analytics.cli import output

    print(f"headroom: error: {message}", file=sys.stderr)
    print(output.dumps({"error": message, **({"detail": detail} if detail else {})}))
    return code


__all__ = ["main", "parser"]
