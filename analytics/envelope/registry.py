"""The interval-method registry: name -> method class, in the order the pages and the CLI show.

:func:`analytics.envelope.pipeline.run_envelope` builds each registered method from its
parameters and measures it. A seventh method is one :class:`~analytics.envelope.intervals.IntervalMethod`
subclass plus one line here (or a call to :func:`register`).
"""

from __future__ import annotations

from analytics.envelope.conformal_methods import CQR, DirectQuantile, SplitConformal
from analytics.envelope.intervals import IntervalMethod
from analytics.envelope.mondrian import RegimeMondrian
from analytics.envelope.online import ACI, RollingConformal

METHODS: dict[str, type[IntervalMethod]] = {
    cls.name: cls
    for cls in (DirectQuantile, SplitConformal, CQR, RollingConformal, ACI, RegimeMondrian)
}

#: the registered names at import time (the order of the result tables)
INTERVAL_METHODS = tuple(METHODS)


def register(cls: type[IntervalMethod]) -> type[IntervalMethod]:
    """Add a method class to :data:`METHODS` (usable as a class decorator).

    Raises
    ------
    ValueError : a method of that name is already registered
    """
    if cls.name in METHODS:
        raise ValueError(f"an interval method named {cls.name!r} is already registered")
    METHODS[cls.name] = cls
    return cls
