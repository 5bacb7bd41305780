"""Immutable records of the hybrid power engine (in the style of Ciw's records): event kinds,
a running segment, the segment and reservation records a run keeps, and the minute span a
segment books. :mod:`analytics.power.engine` and :mod:`analytics.power.scheduler` share them.

Units are in names: ``_s`` seconds, ``_min`` minutes, ``_w`` watts, ``milli`` thousandths of a
GPU.
"""

from __future__ import annotations

import math
from typing import NamedTuple


class EventKind:
    """Kinds of the engine's events ``(time_s, seq, kind, payload)``.

    ``seq`` (a per-run counter) breaks ties, so the kind never decides the order; the payload is
    a job index for ``ARRIVAL`` and ``SEGMENT_END`` and a minute index for ``CAPACITY``.
    """

    ARRIVAL = 0
    SEGMENT_END = 1
    CAPACITY = 2


class RunningSegment(NamedTuple):
    """A started segment of one job, held until ``end_s``.

    ``booked_until_min`` is one past the last minute booked for it on the per-minute capacity
    plan (0 on a constant-capacity pool, where nothing is booked); ``slot`` is its index in the
    engine's slot arrays (-1 when not mirrored there).
    """

    end_s: float
    gpu_milli: int
    booked_until_min: int
    slot: int = -1


class SegmentRecord(NamedTuple):
    """One started segment: job, its segment number, start and end (s), milli-GPUs, power (W)."""

    job: int
    segment: int
    start_s: float
    end_s: float
    gpu_milli: int
    power_w: float


class ReservationRecord(NamedTuple):
    """A blocked head job got ``reservation_s`` (s; inf: none found) at ``time_s`` (s)."""

    job: int
    time_s: float
    reservation_s: float


def minute_span(start_s: float, duration_s: float) -> tuple[int, int]:
    """Minutes ``[first, last + 1)`` that an interval of ``duration_s`` from ``start_s`` touches
    (at least one; an end within 1e-9 min of a boundary does not touch the next minute).

    >>> minute_span(30.0, 60.0), minute_span(0.0, 60.0)
    ((0, 2), (0, 1))
    """
    first = int(start_s // 60.0)
    return first, max(first + 1, int(math.ceil((start_s + duration_s) / 60.0 - 1e-9)))
