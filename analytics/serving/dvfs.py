"""The DVFS model of the Festina what-ifs: the cited clock range and static power of each GPU kind
(:data:`GPU_DVFS`), latency and power of a profile as functions of the SM clock and the MPS SM
share, the calibration of the power exponent gamma, Festina Eq. 9 (:func:`phase_clock`) and the
simulator's clock grid (:class:`ClockGrid`).

Profiles (:class:`analytics.serving.profiles.Profile`) give the nominal numbers at the top clock
on a whole GPU; this module scales them.

DVFS model (``x = f / f_max``, SM share ``s``)
----------------------------------------------
* prefill time ``T_p(x, s) = T_p,nom / (x*s)`` (compute-bound: Festina Sec. 2 / Fig. 3;
  throughput proportional to SM clock and SM count).
* decode ITL ``T_d(b, x, s) = T_d,nom(b) * (m(b) + (1 - m(b)) / (x*s))``: the memory-bound part
  does not speed up with the SM clock. ``m(b) = min(0.95, t_mem / T_d,nom(b))`` with ``t_mem`` =
  bytes of weights / datasheet memory bandwidth (roofline: reading all weights once per
  iteration), so ``m`` is derived from the bench row and the datasheet, not chosen.
* power ``P = P_idle + s * (P_phase,nom - P_idle) * (m + (1 - m) * x**gamma)``: a static floor
  (the measured power of a powered-on GPU that holds a model but computes nothing,
  :data:`GPU_DVFS`) plus a dynamic part. Of the dynamic part, the memory-bound share ``m`` (the
  same roofline ``m(b)`` as the decode time; 0 for prefill) is HBM traffic, which does not
  follow the SM clock; the rest is SM power ``~ f**gamma`` (CMOS ``C V^2 f`` with ``V ~ f``:
  gamma = 3). No staged source measures power against the SM clock, so ``gamma`` is
  **calibrated** (:func:`calibrate_gamma`) to a published measurement: SM clock locking recovers
  *up to 32 %* of decode energy on Hopper (:data:`DECODE_SAVING_CITE`, H200; memory-bound decode
  "leaves power headroom untouched"). ``gamma`` is chosen so the largest decode-energy saving the
  model predicts over the measured batches of the dense profiles equals that 32 %. On the staged
  ML.ENERGY v3 H100 rows this lands at gamma = 3.0, the textbook value, so the memory split and
  the measurement agree. Without the memory split the same calibration needs gamma ~ 1.2, which
  makes prefill energy fall monotonically with the clock, contradicting Festina Fig. 3. Any other
  value can be passed; :func:`analytics.serving.compare.sensitivity` shows how the headline moves.

Energy per token is ``P * T``: the static floor times a time that grows as ``1/x`` against a
dynamic part that shrinks as ``x**gamma`` gives the U-shaped energy-vs-clock curve of
Festina Fig. 3 (:func:`energy_curve`).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from analytics.hardware.catalog import DVFS_KINDS, GpuSpec

if TYPE_CHECKING:  # annotations only: profiles imports this module
    from analytics.serving.profiles import Profile


#: The DVFS view of THE GPU catalog: kinds with a cited clock range and static power (others
#: need these given explicitly). A record is a :class:`analytics.hardware.catalog.GpuSpec`
#: (``key``, ``f_max_mhz``, ``f_min_mhz``, ``idle_w``, ``pcie_gbs``, ``sources``).
GpuDvfs = GpuSpec
GPU_DVFS: dict[str, GpuSpec] = DVFS_KINDS


@dataclass(frozen=True)
class DvfsParams:
    """Parameters of the DVFS model that no staged source pins down.

    ``gamma``: exponent of the SM part of dynamic power, ``~ f**gamma``. The default 3 is the
    CMOS textbook value (and what :func:`calibrate_gamma` finds on the staged H100 rows);
    simulations calibrate it unless a value is given.
    """

    gamma: float = 3.0


#: Largest decode-energy saving from SM clock locking measured on Hopper (fraction).
DECODE_SAVING_TARGET = 0.32
DECODE_SAVING_CITE = ("Ma, Afzal, Eitzinger & Wellein, The Illusion of Power Capping in LLM "
                      "Decode, arXiv 2605.11999 (2026): on NVIDIA H200, SM clock locking "
                      "recovers up to 32 % of decode energy at minimal throughput loss")


# --------------------------------------------------------------------------- DVFS model
def _interpolator(pts: np.ndarray, vals: np.ndarray):
    """A callable ``q (N, 2) -> (N,)`` over (sm_share, clock) points: linear inside the convex
    hull, nearest outside (scipy's triangulation is built once, not per query); 1-D linear when
    the table varies along one axis only."""
    # scipy is heavy: imported only when a measured profile is interpolated
    from scipy.interpolate import LinearNDInterpolator, NearestNDInterpolator

    if len(np.unique(pts[:, 0])) > 1 and len(np.unique(pts[:, 1])) > 1:
        lin, near = LinearNDInterpolator(pts, vals), NearestNDInterpolator(pts, vals)

        def f(q):
            out = lin(q)
            bad = np.isnan(out)
            if bad.any():
                out[bad] = near(q[bad])
            return out
        return f
    axis = 1 if len(np.unique(pts[:, 1])) > 1 else 0
    order = np.argsort(pts[:, axis])
    xs, ys = pts[order, axis], vals[order]
    return lambda q: np.interp(q[:, axis], xs, ys)


_NUMBER = (int, float, np.integer, np.floating)


def _scalars(a, b, c) -> bool:
    return isinstance(a, _NUMBER) and isinstance(b, _NUMBER) and isinstance(c, _NUMBER)


def _measured_ratio(prof: Profile, phase: str, f_mhz, share, what: str):
    tab = prof.measured.get(phase)
    if tab is None:
        return None
    fn = tab.get(what + "_fn")
    if fn is None:
        fn = tab[what + "_fn"] = _interpolator(*tab[what])
    q = np.column_stack([a.ravel() for a in np.broadcast_arrays(np.asarray(share, float),
                                                                np.asarray(f_mhz, float))])
    return fn(q).reshape(np.broadcast(np.asarray(share), np.asarray(f_mhz)).shape)


def measured_clock_floor(profiles: list[Profile]) -> float | None:
    """Lowest clock (MHz) every measured table covers (the largest of the tables' lowest
    clocks), or None without measured tables. Below it a table could only be extrapolated."""
    lows = [float(tab["lat"][0][:, 1].min()) for p in profiles for tab in p.measured.values()]
    return max(lows) if lows else None


def prefill_time_s(prof: Profile, gpu: GpuDvfs, tokens, f_mhz, share=1.0):
    """Prefill time (s) of ``tokens`` prompt tokens at clock ``f_mhz`` with SM share ``share``.

    Model: compute-bound, ``tokens / (prefill_tok_s * x * share)`` with ``x = f/f_max``; a
    measured profile replaces ``1/(x*share)`` by its latency ratio.
    """
    if not prof.measured and _scalars(tokens, f_mhz, share):  # the simulator's hot path
        return float(tokens) / prof.prefill_tok_s * (
            1.0 / ((float(f_mhz) / gpu.f_max_mhz) * float(share)))
    r = _measured_ratio(prof, "prefill", f_mhz, share, "lat")
    scale = r if r is not None else 1.0 / ((np.asarray(f_mhz) / gpu.f_max_mhz) * share)
    return np.asarray(tokens, dtype=float) / prof.prefill_tok_s * scale


def decode_itl_s(prof: Profile, gpu: GpuDvfs, batch, f_mhz, share=1.0):
    """Decode iteration time (s) for ``batch`` sequences: ``T_nom(b) (m + (1-m)/(x s))``."""
    if not prof.measured and _scalars(batch, f_mhz, share):  # the simulator's hot path
        nom_ms, m, _ = prof.batch_terms(batch)
        return nom_ms / 1000.0 * (m + (1.0 - m) / ((float(f_mhz) / gpu.f_max_mhz) * float(share)))
    nom = prof.itl_nom_ms(batch) / 1000.0
    r = _measured_ratio(prof, "decode", f_mhz, share, "lat")
    if r is not None:
        return nom * r
    m = prof.mem_fraction(batch)
    return nom * (m + (1.0 - m) / ((np.asarray(f_mhz) / gpu.f_max_mhz) * share))


def dynamic_power_w(prof: Profile, gpu: GpuDvfs, phase: str, batch, f_mhz, share,
                    params: DvfsParams = DvfsParams()):
    """Power (W) above the static floor drawn by one tenant in ``phase`` (``"prefill"`` or
    ``"decode"``): ``share * (P_nom - P_idle) * (m + (1 - m) x**gamma)`` with ``m = m(batch)``
    for decode and 0 for prefill (module docstring), or measured ``P(f, s) - P_idle``."""
    if not prof.measured and _scalars(batch, f_mhz, share):  # the simulator's hot path
        xg = float((float(f_mhz) / gpu.f_max_mhz) ** params.gamma)
        if phase == "prefill":
            return float(share) * max(prof.prefill_power_w - gpu.idle_w, 0.0) * xg
        _, m, p_nom = prof.batch_terms(batch)
        return float(share) * max(p_nom - gpu.idle_w, 0.0) * (m + (1.0 - m) * xg)
    r = _measured_ratio(prof, phase, f_mhz, share, "pow")
    if r is not None:
        return np.maximum(r - gpu.idle_w, 0.0)
    x = np.asarray(f_mhz, dtype=float) / gpu.f_max_mhz
    if phase == "prefill":
        return share * max(prof.prefill_power_w - gpu.idle_w, 0.0) * x ** params.gamma
    m = prof.mem_fraction(batch)
    dyn = np.maximum(prof.decode_power_nom_w(batch) - gpu.idle_w, 0.0)
    return share * dyn * (m + (1.0 - m) * x ** params.gamma)


def energy_curve(prof: Profile, gpu: GpuDvfs, clocks_mhz, batch: int = 32,
                 params: DvfsParams = DvfsParams()) -> pd.DataFrame:
    """Energy per token vs clock for both phases on a whole GPU (Festina Fig. 3 analogue).

    Returns
    -------
    DataFrame with ``clock_mhz``, ``phase``, ``energy_j_per_token``, ``latency_ms``
    (prefill: per 1,024-token prompt; decode: one iteration at ``batch``), ``power_w``
    (whole GPU, static floor included).
    """
    f = np.asarray(clocks_mhz, dtype=float)
    tp = prefill_time_s(prof, gpu, 1024.0, f)
    pp = gpu.idle_w + dynamic_power_w(prof, gpu, "prefill", batch, f, 1.0, params)
    td = decode_itl_s(prof, gpu, batch, f)
    pd_ = gpu.idle_w + dynamic_power_w(prof, gpu, "decode", batch, f, 1.0, params)
    return pd.concat([
        pd.DataFrame({"clock_mhz": f, "phase": "prefill", "energy_j_per_token": pp * tp / 1024,
                      "latency_ms": tp * 1000, "power_w": pp}),
        pd.DataFrame({"clock_mhz": f, "phase": "decode", "energy_j_per_token": pd_ * td / batch,
                      "latency_ms": td * 1000, "power_w": pd_}),
    ], ignore_index=True)


def phase_clock_weighted(terms: Iterable[tuple[float, float, float]], default: float) -> float:
    """Festina Eq. 9 over any number of phases: the device clock weighted by each phase's energy.

    ``F = sum_i P_i T_i F_i / sum_i P_i T_i`` over ``terms`` of ``(P_i, T_i, F_i)`` (power in W,
    time in s, clock in any unit: MHz, or relative to the top clock as the simulator passes it).
    The simulator sums over the phases of all co-resident busy tenants of one GPU (Festina
    writes the two-phase form, :func:`phase_clock`). With no work (``sum P T <= 0``) returns
    ``default``.

    >>> phase_clock_weighted([(400.0, 0.5, 1200.0), (300.0, 2.0, 900.0)], 0.0)
    975.0
    """
    num = den = 0.0
    for power, time, clock in terms:
        num += power * time * clock
        den += power * time
    return num / den if den > 0 else default


def phase_clock(p_p: float, t_p: float, f_p: float, p_d: float, t_d: float, f_d: float) -> float:
    """Festina Eq. 9: one device clock for co-resident phases, weighted by phase energy.

    ``F = (P_p T_p F_p + P_d T_d F_d) / (P_p T_p + P_d T_d)``; powers in W, times in s,
    clocks in MHz. With no work in either phase, returns ``max(f_p, f_d)``. The two-phase call of
    :func:`phase_clock_weighted`, which the simulator uses.

    >>> phase_clock(400.0, 0.5, 1200.0, 300.0, 2.0, 900.0)
    975.0
    """
    return phase_clock_weighted(((p_p, t_p, f_p), (p_d, t_d, f_d)), max(f_p, f_d))


def decode_saving(prof: Profile, gpu: GpuDvfs, batch: float, gamma: float,
                  n_clocks: int = 200) -> float:
    """Fraction of decode energy saved by the energy-optimal clock vs the top clock (whole GPU,
    static floor included) for one profile and batch under exponent ``gamma``."""
    f = np.linspace(gpu.f_min_mhz, gpu.f_max_mhz, n_clocks)
    e = (gpu.idle_w + dynamic_power_w(prof, gpu, "decode", batch, f, 1.0, DvfsParams(gamma))) \
        * decode_itl_s(prof, gpu, batch, f)
    return float(1.0 - e.min() / e[-1])


def calibration_profiles(profiles: list[Profile]) -> list[Profile]:
    """Profiles whose memory-bound share is identified: the roofline floor (all weights read once
    per iteration) stays below the 0.95 cap at every measured batch. Mixture-of-experts models
    (e.g. Qwen3-30B-A3B) read only their active experts per token, so the floor from all weights
    hits the cap and would let decode look clock-insensitive; they are left out."""
    return [p for p in profiles if "decode" not in p.measured
            and float(np.max(p.mem_fraction(np.asarray(p.dec_batches)))) < 0.95]


def calibrate_gamma(profiles: list[Profile], gpu: GpuDvfs,
                    target: float = DECODE_SAVING_TARGET) -> float:
    """The DVFS exponent at which the largest predicted decode-energy saving over the
    calibration profiles' measured batches equals ``target`` (:data:`DECODE_SAVING_CITE`).

    Solved with :func:`scipy.optimize.brentq` on gamma in [0.5, 6] (the saving grows with gamma).

    Raises
    ------
    ValueError
        No profile qualifies (:func:`calibration_profiles`), or ``target`` is out of the range
        the profiles can reach.
    """
    # scipy is heavy: imported only when gamma is calibrated
    from scipy.optimize import brentq

    cal = calibration_profiles(profiles)
    if not cal:
        raise ValueError("no dense bench profile to calibrate the DVFS exponent on; pass gamma")

    def gap(gamma: float) -> float:
        return max(decode_saving(p, gpu, b, gamma) for p in cal for b in p.dec_batches) - target

    lo, hi = 0.5, 6.0
    if gap(lo) > 0 or gap(hi) < 0:
        raise ValueError(f"a {target:.0%} decode saving is out of reach for gamma in "
                         f"[{lo}, {hi}] with these profiles; pass gamma")
    return float(brentq(gap, lo, hi, xtol=1e-4))



class ClockGrid:
    """The simulator's clock grid of one GPU kind and its energy-optimal clocks per model slot.

    Attributes
    ----------
    clocks : (n_clocks,) grid clocks, MHz, from the lowest usable clock (never below the lowest
        clock a measured table covers: :func:`measured_clock_floor`) to ``f_max_mhz``
    xs : (n_clocks,) the same clocks relative to the top clock
    xopt_prefill : per slot, the relative clock minimising prefill energy per token (static
        floor included: the minimum of the Fig. 3 U-curve)
    xopt_decode_by_bucket : per slot, (len(DECODE_BUCKETS),) the same for decode by batch bucket
    """

    #: decode batch buckets of the energy-optimal decode clock
    DECODE_BUCKETS = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048], float)

    def __init__(self, slots: list[Profile], gpu: GpuDvfs, n_clocks: int, dvfs: DvfsParams):
        f_lo = max(gpu.f_min_mhz, measured_clock_floor(slots) or gpu.f_min_mhz)
        self.clocks = np.linspace(f_lo, gpu.f_max_mhz, n_clocks)
        self.xs = self.clocks / gpu.f_max_mhz
        self.xopt_prefill: list[float] = []
        self.xopt_decode_by_bucket: list[np.ndarray] = []
        for s in slots:
            ep = (gpu.idle_w + dynamic_power_w(s, gpu, "prefill", 1, self.clocks, 1.0, dvfs)) \
                * prefill_time_s(s, gpu, 1.0, self.clocks)
            self.xopt_prefill.append(float(self.xs[np.argmin(ep)]))
            row = []
            for b in self.DECODE_BUCKETS:
                ed = (gpu.idle_w + dynamic_power_w(s, gpu, "decode", b, self.clocks, 1.0, dvfs)) \
                    * decode_itl_s(s, gpu, b, self.clocks)
                row.append(float(self.xs[np.argmin(ed)]))
            self.xopt_decode_by_bucket.append(np.array(row))
        # plain lists for the per-event lookups below (bisect_left == np.searchsorted, side left)
        self._buckets = self.DECODE_BUCKETS.tolist()
        self._xs = self.xs.tolist()
        self._xopt_decode = [row.tolist() for row in self.xopt_decode_by_bucket]

    def xopt_decode(self, slot: int, batch: int) -> float:
        """Energy-optimal relative decode clock of ``slot`` at the bucket of ``batch``."""
        k = min(bisect.bisect_left(self._buckets, max(batch, 1)), len(self._buckets) - 1)
        return self._xopt_decode[slot][k]

    def up(self, x: float) -> float:
        """Smallest grid clock (relative) >= x, clamped to [x_min, 1]."""
        k = bisect.bisect_left(self._xs, min(x, 1.0) - 1e-12)
        return self._xs[min(k, len(self._xs) - 1)]
