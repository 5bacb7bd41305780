"""Complete demand grids and chronological splits.

The demand target follows the envelopes paper ("Conformal GPU Demand Envelopes and Power-Aware
Scheduling ...", Sec. data): requests form a complete five-minute grid (bins without requests are
zeros, not gaps) of ``weighted tokens = w_prompt * prompt_tokens + w_completion * completion_tokens``
(:class:`analytics.config.Weights`; defaults 1 and 1 give the plain token total). The paper's
chronological split is 42 / 9 / 10 days for fit / calibration / test. The grid itself is built
in the store (DuckDB ``time_bucket``) by :func:`analytics.services.demand.demand_grid`; this
module is pure.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

PAPER_SPLIT_DAYS = (42, 9, 10)
DEFAULT_SPLIT_FRAC = (0.69, 0.15, 0.16)


class GridError(ValueError):
    """A grid was asked for that the data cannot give (wrong kind, bin finer than the data)."""


def grid_summary(grid: pd.DataFrame) -> dict:
    """``{"bins", "start", "end", "mean_target", "zero_bins"}`` of a grid (times ISO 8601 UTC).

    >>> g = pd.DataFrame({"ts": pd.to_datetime(["2024-01-01 00:00", "2024-01-01 00:05"]),
    ...                   "target": [10.0, 0.0]})
    >>> grid_summary(g)["zero_bins"], grid_summary(g)["mean_target"]
    (1, 5.0)
    """
    if grid.empty:
        return {"bins": 0, "start": None, "end": None, "mean_target": None, "zero_bins": 0}
    out = {
        "bins": int(len(grid)),
        "start": pd.Timestamp(grid["ts"].iloc[0]).isoformat(),
        "end": pd.Timestamp(grid["ts"].iloc[-1]).isoformat(),
        "mean_target": float(grid["target"].mean()),
        "zero_bins": int((grid["target"] == 0).sum()),
    }
    if "unknown_tokens" in grid:
        out.update(unknown_token_notes(grid))
    return out


def unknown_token_notes(grid: pd.DataFrame) -> dict:
    """``{"unknown_token_requests", "unknown_token_bins", "note"}`` of a request grid: how
    many requests had an empty prompt or completion count, in how many bins, and (``note``,
    None when there are none) what the target did with them: their known tokens are counted,
    the unknown ones are not, so those bins' weighted tokens are a lower bound.

    >>> unknown_token_notes(pd.DataFrame({"unknown_tokens": [0, 1, 0]}))["unknown_token_requests"]
    1
    """
    n = int(grid["unknown_tokens"].sum())
    bins = int((grid["unknown_tokens"] > 0).sum())
    note = None if n == 0 else (
        f"{n:,} request(s) in {bins:,} bin(s) have no prompt or completion token count "
        "(empty in the source): their known tokens are counted, the unknown ones are not, so "
        "the weighted tokens of those bins are a lower bound")
    return {"unknown_token_requests": n, "unknown_token_bins": bins, "note": note}


@dataclass(frozen=True)
class Split:
    """Chronological fit / calibration / test split of a grid, as row positions.

    Attributes
    ----------
    fit, calibration, test : slice of row positions, contiguous and in time order
    mode : ``"days"`` or ``"fractions"``
    sizes : (n_fit, n_cal, n_test) in bins
    """

    fit: slice
    calibration: slice
    test: slice
    mode: str
    sizes: tuple[int, int, int]

    def bounds(self, ts: pd.Series) -> dict:
        """Start / end timestamps of each part (ISO 8601)."""
        out = {}
        for part in ("fit", "calibration", "test"):
            s = getattr(self, part)
            out[part] = {"start": pd.Timestamp(ts.iloc[s.start]).isoformat(),
                         "end": pd.Timestamp(ts.iloc[s.stop - 1]).isoformat(),
                         "bins": s.stop - s.start}
        return out


def chronological_split(
    n_bins: int,
    bin_s: int,
    days: tuple[int, int, int] | None = None,
    fractions: tuple[float, float, float] | None = None,
) -> Split:
    """Split ``n_bins`` consecutive bins into fit / calibration / test, in time order.

    With ``days`` (default the paper's 42/9/10) and a series at least that long, the *last*
    ``sum(days)`` days are used. Otherwise ``fractions`` (default 0.69/0.15/0.16) of the whole
    series. Each part gets at least one bin.

    Raises
    ------
    ValueError
        Fewer than 3 bins, fractions that do not sum to 1, or non-positive parts.

    >>> s = chronological_split(61 * 288, 300)
    >>> s.mode, s.sizes
    ('days', (12096, 2592, 2880))
    >>> chronological_split(100, 300).sizes
    (69, 15, 16)
    """
    if n_bins < 3:
        raise ValueError(f"a split needs at least 3 bins, the grid has {n_bins}")
    per_day = 86400 / bin_s
    want_days = days or (PAPER_SPLIT_DAYS if fractions is None else None)
    if want_days is not None:
        if any(d <= 0 for d in want_days):
            raise ValueError(f"split days must be positive, got {want_days}")
        sizes = [int(round(d * per_day)) for d in want_days]
        if sum(sizes) <= n_bins:
            start = n_bins - sum(sizes)
            a, b = start + sizes[0], start + sizes[0] + sizes[1]
            return Split(slice(start, a), slice(a, b), slice(b, n_bins), "days", tuple(sizes))
        if days is not None:
            raise ValueError(
                f"the grid spans {n_bins / per_day:.1f} days, fewer than the {sum(days)} "
                "days asked for; use fractions"
            )
    fractions = fractions or DEFAULT_SPLIT_FRAC
    if abs(sum(fractions) - 1) > 1e-6 or any(f <= 0 for f in fractions):
        raise ValueError(f"split fractions must be positive and sum to 1, got {fractions}")
    n_fit = max(1, int(round(fractions[0] * n_bins)))
    n_cal = max(1, int(round(fractions[1] * n_bins)))
    n_test = n_bins - n_fit - n_cal
    if n_test < 1:
        raise ValueError(f"{n_bins} bins are too few for fractions {fractions}")
    return Split(slice(0, n_fit), slice(n_fit, n_fit + n_cal), slice(n_fit + n_cal, n_bins),
                 "fractions", (n_fit, n_cal, n_test))
