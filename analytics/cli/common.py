"""Shared pieces of the ``headroom`` command: argument types, the grid arguments, errors."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime

from analytics.config import DemandTarget, check_zone


class BadInput(Exception):
    """Turns into exit code 2 with the message on stderr and an error document on stdout."""


class LazyChoices(Sequence):
    """``choices`` of an argparse option read from a heavy module only when needed (the value
    is checked, or the subcommand's help is printed), not when the parser is built. Give the
    option a ``metavar`` (argparse lists the choices in the usage line otherwise, and builds
    it when the option is added); ``%(choices)s`` in its help lists them lazily.

    >>> c = LazyChoices(lambda: ("a", "b"))
    >>> "a" in c, list(c)
    (True, ['a', 'b'])
    """

    def __init__(self, load: Callable[[], Iterable[str]]):
        self._load, self._items = load, None

    def _get(self) -> tuple[str, ...]:
        if self._items is None:
            self._items = tuple(self._load())
        return self._items

    def __getitem__(self, i):
        return self._get()[i]

    def __len__(self) -> int:
        return len(self._get())

    def __contains__(self, value) -> bool:
        return value in self._get()

    def __iter__(self):
        return iter(self._get())


def log(text: str) -> None:
    """Progress for the user: stderr, never the JSON on stdout."""
    print(text, file=sys.stderr)


def hours(text: str) -> tuple[int, ...]:
    """``"6,12,24"`` -> (6, 12, 24): whole hours >= 1."""
    try:
        out = tuple(int(x) for x in text.split(","))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: give whole hours, e.g. 6,12,24") from exc
    if min(out) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: hours must be >= 1")
    return out


def positive(text: str) -> float:
    """A finite number > 0."""
    v = float(text)
    if not (v > 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number > 0")
    return v


def positive_int(text: str) -> int:
    """An integer >= 1 (argparse type)."""
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from exc
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be >= 1")
    return value


def nonneg(text: str) -> float:
    """A finite number >= 0."""
    v = float(text)
    if not (v >= 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number >= 0")
    return v


def margin(text: str) -> float:
    """A fraction of an SLO in [0, 1)."""
    v = float(text)
    if not 0 <= v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be in [0, 1): a fraction of the SLO")
    return v


def unit_interval(text: str) -> float:
    """A number in (0, 1] (e.g. a utilization)."""
    v = float(text)
    if not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be in (0, 1]")
    return v


def open_unit(text: str) -> float:
    """A number strictly between 0 and 1 (e.g. alpha)."""
    v = float(text)
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be strictly between 0 and 1")
    return v


def t0(text: str) -> datetime:
    """ISO 8601 start time; naive times are UTC."""
    try:
        t = datetime.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--t0 {text!r} is not ISO 8601") from exc
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def zone(text: str) -> str:
    """An IANA time-zone name (``America/New_York``); anything else is a usage error (exit 2)."""
    try:
        return check_zone(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def triple(kind):
    """Parser of three comma-separated values of ``kind``."""
    def parse(text: str):
        parts = [kind(x) for x in text.split(",")]
        if len(parts) != 3:
            raise argparse.ArgumentTypeError(f"{text!r}: give three comma-separated values")
        return tuple(parts)
    return parse


def add_cluster_args(p: argparse.ArgumentParser, what: str) -> None:
    """``--cluster`` and ``--no-store`` for a command whose ``what`` runs on the sweep runner
    (:func:`analytics.sweep.resolve_backend`; the TLS files are read from the environment)."""
    p.add_argument("--cluster", default=None, metavar="tcp://HOST:8786",
                   help=f"run {what} on this Dask scheduler: trusted, it unpickles what it sends; "
                        "tls://HOST:8786 with $HEADROOM_DASK_TLS_CA / _CERT / _KEY for a remote "
                        "one (default $HEADROOM_DASK_SCHEDULER, else a local process pool)")
    p.add_argument("--no-store", action="store_true",
                   help=f"neither read nor keep {what} in the store's sweep_runs")


def add_grid_args(p: argparse.ArgumentParser) -> None:
    """DATASET and the grid options shared by grid, envelope, capacity and dispatch."""
    p.add_argument("dataset")
    p.add_argument("--bin", default="5min", help="bin width: 1min, 5min, 15min, 1h, 1d, 300s")
    p.add_argument("--w-prompt", type=nonneg, default=1.0,
                   help="weight of a prompt token in the target (weighted tokens per bin)")
    p.add_argument("--w-completion", type=nonneg, default=1.0,
                   help="weight of a completion token in the target")
    p.add_argument("--exclude-failed", action="store_true",
                   help="leave failed requests (BurstGPT Response tokens = 0) out of the target")
    p.add_argument("--target", dest="demand_target", choices=[t.value for t in DemandTarget],
                   default=None,
                   help="demand per bin: weighted tokens, or GPU-seconds for traces that report "
                        "execution time (Alibaba GenAI LoRA); default: what the dataset has")


def grid_request(args):
    """The :class:`~analytics.services.demand.GridRequest` of the grid options."""
    from analytics.services import demand

    try:
        return demand.GridRequest.of(args.dataset, args.bin, w_prompt=args.w_prompt,
                                     w_completion=args.w_completion,
                                     include_failed=not args.exclude_failed,
                                     target=args.demand_target)
    except ValueError as exc:
        raise BadInput(f"--bin: {exc}") from exc
