"""Festina's offline lookup table (Sec. 3.2): every model slot's latency and dynamic power on a
(batch, SM share, clock) grid, built once per simulation and read by the global scheduler
(:mod:`analytics.serving.placement`, :mod:`analytics.serving.consolidation`) in constant time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from analytics.serving.dvfs import DvfsParams, GpuDvfs, decode_itl_s, dynamic_power_w, prefill_time_s

if TYPE_CHECKING:  # annotations only
    from analytics.serving.profiles import Profile


@dataclass
class LookupTable:
    """Offline profile table for the global scheduler's constant-time lookups (Festina Sec. 3.2:
    profiled once per GPU kind and model, then read, never re-modelled, at dispatch time).

    Axes: ``models`` (slot order), ``batches`` (decode batch buckets), ``shares`` (SM share in
    sixteenths), ``clocks_mhz`` (the simulator's clock grid). A lookup rounds the batch **up** and
    the SM share **down** to the grid, so a predicted latency is never optimistic from rounding.

    Arrays (float64)
    ----------------
    prefill_s_per_tok : (M, S, C) prefill seconds per prompt token
    prefill_dyn_w : (M, S, C) dynamic (above static floor) power while prefilling, W
    decode_itl_s : (M, B, S, C) decode iteration time, s
    decode_dyn_w : (M, B, S, C) dynamic power while decoding, W
    """

    clocks_mhz: np.ndarray
    batches: np.ndarray
    shares: np.ndarray
    prefill_s_per_tok: np.ndarray
    prefill_dyn_w: np.ndarray
    decode_itl_s: np.ndarray
    decode_dyn_w: np.ndarray

    def b(self, batch: float) -> int:
        """Index of the smallest batch bucket >= ``batch`` (clamped to the largest)."""
        return min(int(np.searchsorted(self.batches, max(batch, 1.0) - 1e-9)),
                   len(self.batches) - 1)

    def s(self, share: float) -> int:
        """Index of the largest share bucket <= ``share`` (at least the smallest)."""
        return max(int(np.searchsorted(self.shares, share + 1e-9)) - 1, 0)

    def c(self, f_mhz: float) -> int:
        """Index of the smallest grid clock >= ``f_mhz`` (clamped)."""
        return min(int(np.searchsorted(self.clocks_mhz, f_mhz - 1e-6)),
                   len(self.clocks_mhz) - 1)


#: decode batch buckets of :class:`LookupTable` (1 .. 2,048, about x1.5 apart)
TABLE_BATCHES = np.array([1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512,
                          768, 1024, 1536, 2048], dtype=float)
#: SM share buckets of :class:`LookupTable` (MPS active-thread percentage in 1/16 steps)
TABLE_SHARES = np.arange(1, 17, dtype=float) / 16.0


def build_lookup(slots: list[Profile], gpu: GpuDvfs, clocks_mhz: np.ndarray,
                 params: DvfsParams = DvfsParams()) -> LookupTable:  # noqa: B008 (frozen)
    """Evaluate every slot's profile (DVFS model or measured table) on the lookup grid.

    Parameters
    ----------
    slots : profile per model slot (shape M)
    gpu : GPU kind
    clocks_mhz : clock grid (C,), MHz
    params : DVFS parameters (ignored where a measured table covers the phase)
    """
    f = np.asarray(clocks_mhz, float)
    ss, ff = (a.ravel() for a in np.meshgrid(TABLE_SHARES, f, indexing="ij"))
    S, C, B = len(TABLE_SHARES), len(f), len(TABLE_BATCHES)
    pt = np.empty((len(slots), S, C))
    pw = np.empty((len(slots), S, C))
    dt = np.empty((len(slots), B, S, C))
    dw = np.empty((len(slots), B, S, C))
    cache: dict[int, tuple] = {}
    for m, prof in enumerate(slots):
        key = id(prof)
        if key not in cache:
            a = prefill_time_s(prof, gpu, 1.0, ff, ss).reshape(S, C)
            b = np.broadcast_to(dynamic_power_w(prof, gpu, "prefill", 1, ff, ss, params),
                                ff.shape).reshape(S, C)
            c = np.stack([decode_itl_s(prof, gpu, bb, ff, ss).reshape(S, C)
                          for bb in TABLE_BATCHES])
            d = np.stack([np.broadcast_to(dynamic_power_w(prof, gpu, "decode", bb, ff, ss,
                                                          params), ff.shape).reshape(S, C)
                          for bb in TABLE_BATCHES])
            cache[key] = (a, b, c, d)
        pt[m], pw[m], dt[m], dw[m] = cache[key]
    return LookupTable(f, TABLE_BATCHES.copy(), TABLE_SHARES.copy(), pt, pw, dt, dw)

