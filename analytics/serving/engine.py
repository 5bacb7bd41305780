"""The serving simulator's engine: a deterministic request-level discrete-event simulation of N
co-hosted models on a pool of GPUs of one kind (Festina: Wang et al., "Energy-Aware Scheduling
for Serverless LLM Serving on Shared GPUs", arXiv 2606.30391).

:class:`ServingEngine` owns the event loop, the pool state (:mod:`analytics.serving.state`) and
the energy accounting, and delegates to named collaborators: the local scheduler (continuous
batching, clock and SM shares: :mod:`analytics.serving.local_scheduler`), the global placement
(:mod:`analytics.serving.placement`) and EWR consolidation
(:mod:`analytics.serving.consolidation`). Which of their rules run is the engine's
:class:`analytics.serving.params.Policy`. Iteration time and power follow the profile at the
GPU's clock and the tenant's MPS SM share; between events they are constant, so the simulator
jumps from event to event (arrival, prefill end, sequence end, clock change) instead of stepping
tokens.

Energy
    GPU power = static floor (all powered-on time) + each tenant's dynamic power in its phase;
    powered-off GPUs draw nothing. Energy is integrated exactly over the piecewise-constant power
    and split into prefill, decode, static-while-busy and idle parts. All policies of one
    comparison are measured over the same horizon, from the first arrival to the last completion
    of any policy: GPUs still on when their run's work ends draw static power to that horizon,
    and timers after it (keep-alive, consolidation) are not simulated.
SLOs
    TTFT = first token - arrival; TBT = mean time between output tokens of a request (decode time
    / (output tokens - 1)). A request meets an SLO when its value is <= the SLO. Every request of
    the trace is in the result; a request that could not be served has NaN latencies and counts
    as missing both SLOs.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analytics.serving.consolidation import Consolidator
from analytics.serving.dvfs import ClockGrid, DvfsParams, GpuDvfs
from analytics.serving.local_scheduler import LocalScheduler
from analytics.serving.lookup import build_lookup
from analytics.serving.params import Policy, ServingParams
from analytics.serving.placement import Placement
from analytics.serving.profiles import Profile
from analytics.serving.state import CONSOLIDATE, RETRY, WAKE, GpuState, Replica


@dataclass
class SimResult:
    """One policy's run.

    Attributes
    ----------
    policy : policy name
    summary : energy_kwh, ttft_attainment, tbt_attainment, slo_attainment (both met), requests,
        served, mean_gpus_on, mean_clock_mhz, the energy split (kWh) and how the clocks were set
        (:meth:`ServingEngine.clock_profile`)
    requests : one row per trace request: ``model``, ``gpu`` (-1 unserved), ``arrival_s``,
        ``ttft_ms``, ``tbt_ms`` (NaN for single-token outputs: no decode), ``ttft_ok``, ``tbt_ok``
    segments : piecewise-constant GPU power: ``gpu``, ``t0_s``, ``t1_s``, ``power_w``,
        ``clock_mhz`` (powered-off time has no segment)
    energy_j : prefill_j, decode_j, static_busy_j, idle_j (sum = integral of power)
    sim_runs : simulator passes behind this result (static DVFS: 1 + re-provisioning rounds)
    """

    policy: str
    summary: dict
    requests: pd.DataFrame
    segments: pd.DataFrame
    energy_j: dict
    sim_runs: int = 1


class ServingEngine:
    """One policy's run on one trace (see the module docstring).

    Parameters
    ----------
    trace : frame from :func:`analytics.serving.workload.trace_arrays` (N requests)
    models : (N,) model slot of each request
    slots : profile per model slot (M)
    gpu : GPU kind (static floor possibly scaled)
    params : what-if parameters with ``dvfs_gamma`` resolved
    policy : the registered policy to run
    static_clocks : provisioned clock per GPU, MHz (static DVFS)
    pred : (N,) predicted output tokens of each request
        (:func:`analytics.serving.prediction.predict_lengths`), what every scheduling decision
        reads; the true ``output`` drives only the simulated execution. Default: the true
        lengths (a perfect predictor).
    """

    def __init__(self, trace: pd.DataFrame, models: np.ndarray, slots: list[Profile],
                 gpu: GpuDvfs, params: ServingParams, policy: Policy,
                 static_clocks: dict[int, float] | None = None, pred: np.ndarray | None = None):
        self.params, self.policy, self.kind, self.slots = params, policy, gpu, slots
        self.dvfs = DvfsParams(gamma=params.dvfs_gamma if params.dvfs_gamma is not None else 3.0)
        self.arrival = trace["arrival_s"].to_numpy(float)
        self.prompt = trace["prompt"].to_numpy(float)
        self.output = trace["output"].to_numpy(np.int64)  # execution only, never scheduling
        self.model_of = models
        n = len(self.arrival)
        self.pred = self.output.astype(float) if pred is None else np.asarray(pred, dtype=float)
        if self.pred.shape != (n,):
            raise ValueError(f"pred has shape {self.pred.shape}; expected ({n},)")
        self.pred_end = np.full(n, np.nan)  # decode iteration at which the prediction ends
        self.t_first = np.full(n, np.nan)
        self.t_done = np.full(n, np.nan)
        self.gpu_of = np.full(n, -1, dtype=np.int64)
        self.n_done = 0
        self.end = 0.0
        self.gpus = [GpuState() for _ in range(params.n_gpus)]
        self.capacity_gb = gpu.memory_gb * params.mem_util
        self.need_gb = [s.weights_gb * (1 + params.kv_factor) for s in slots]
        # measured profiles are not extrapolated below their lowest measured clock
        self.grid = ClockGrid(slots, gpu, params.n_clocks, self.dvfs)
        self.ttft_s = params.ttft_slo_ms / 1000.0 * (1 - params.safety_margin)
        self.tbt_s = params.tbt_slo_ms / 1000.0 * (1 - params.safety_margin)
        self.events: list = []
        self.seq = 0
        self.segments: list[tuple] = []
        self.static_clocks = static_clocks or {}
        self.lookup = build_lookup(slots, gpu, self.grid.clocks, self.dvfs)  # offline profile table
        self.scheduler = LocalScheduler(self)
        self.placement = Placement(self)
        self.consolidator = Consolidator(self)

    def push(self, t: float, event: int, a: int, b: int = 0) -> None:
        """Schedule ``event`` (:data:`WAKE` GPU ``a`` at plan version ``b``, -1: always;
        :data:`CONSOLIDATE`; :data:`RETRY` request ``a``) at time ``t``, s."""
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, event, a, b))

    def advance(self, g: int, t: float) -> None:
        """Account GPU ``g`` from its last event to ``t``: progress of every replica at its
        current rates, and energy -- static floor plus each replica's dynamic power, exactly
        integrated over the piecewise-constant power -- split by phase; one power segment."""
        device = self.gpus[g]
        dt = t - device.last_t
        if dt <= 0:
            return
        if device.on:
            power = self.kind.idle_w
            busy = False
            pf_tok = dec_tok = 0.0
            for replica in device.tenants.values():
                if replica.phase == "prefill":
                    replica.prefill_left -= dt * replica.prefill_rate
                    device.energy_j[0] += replica.dyn_w * dt
                    pf_tok += dt * replica.prefill_rate
                elif replica.phase == "decode":
                    replica.iterations += dt / replica.itl
                    device.energy_j[1] += replica.dyn_w * dt
                    dec_tok += dt / replica.itl * len(replica.running)
                elif replica.phase == "mixed":
                    replica.prefill_left -= dt * replica.prefill_rate
                    replica.iterations += dt / replica.itl
                    device.energy_j[0] += replica.dyn_w * dt * replica.prefill_frac
                    device.energy_j[1] += replica.dyn_w * dt * (1.0 - replica.prefill_frac)
                    pf_tok += dt * replica.prefill_rate
                    dec_tok += dt / replica.itl * len(replica.running)
                else:
                    continue
                power += replica.dyn_w
                busy = True
            device.energy_j[2 if busy else 3] += self.kind.idle_w * dt
            ct = device.clock_tokens  # token-weighted clock of each phase
            ct[0] += pf_tok
            ct[1] += pf_tok * device.clock
            ct[2] += dec_tok
            ct[3] += dec_tok * device.clock
            if device.clock != device.seg_clock:
                device.clock_changes += device.seg_clock >= 0
                device.seg_clock = device.clock
            self.segments.append((g, device.last_t, t, power, device.clock))
        device.last_t = t

    def replan(self, g: int, t: float) -> None:
        """Re-plan GPU ``g`` at ``t``: settle finished work, power off a drained or (serverless)
        empty GPU, unload replicas idle past the keep-alive, set clock / shares / phases
        (:class:`LocalScheduler`) and schedule the GPU's next wake-up."""
        device = self.gpus[g]
        if not device.on:
            return
        self.scheduler.settle(g, t)
        if device.draining and not any(replica.busy() for replica in device.tenants.values()):
            self.power_off(g)
            return
        if self.policy.serverless:  # keep-alive: unload replicas idle for keep_alive_s
            for j in list(device.tenants):
                replica = device.tenants[j]
                if replica.busy() or t < replica.ready_at:
                    replica.idle_since = -1.0
                elif replica.idle_since < 0:
                    replica.idle_since = t
                    self.push(t + self.params.keep_alive_s, WAKE, g, -1)
                elif t - replica.idle_since >= self.params.keep_alive_s - 1e-9:
                    del device.tenants[j]
                    device.mem_gb -= self.need_gb[j]
            if not device.tenants:
                self.power_off(g)
                return
        act = self.scheduler.control(g, t)
        nxt = self.scheduler.set_phases(g, t, act)
        device.version += 1
        if np.isfinite(nxt):
            self.push(nxt, WAKE, g, device.version)

    def power_on(self, g: int, t: float) -> None:
        """Power GPU ``g`` on at ``t`` at its policy's idle clock; opens an EWR window."""
        device = self.gpus[g]
        device.on, device.last_t, device.draining = True, t, False
        device.clock = self.policy.idle_clock_mhz(device.static_clock, float(self.grid.clocks[0]),
                                                  self.kind.f_max_mhz)
        device.energy_at_window = [device.energy_j[2] + device.energy_j[3], sum(device.energy_j)]

    def power_off(self, g: int) -> None:
        """Power GPU ``g`` off: residents unloaded, no static power from now on."""
        device = self.gpus[g]
        device.on, device.draining = False, False
        device.tenants.clear()
        device.mem_gb = 0.0
        device.version += 1

    def load(self, g: int, j: int, t: float) -> Replica:
        """Load a replica of model slot ``j`` on GPU ``g`` at ``t`` (powering it on); it is
        ready after the cold start, weights / PCIe bandwidth."""
        device = self.gpus[g]
        if not device.on:
            self.power_on(g, t)
        replica = Replica(g, j, t + self.slots[j].weights_gb / self.kind.pcie_gbs)
        device.tenants[j] = replica
        device.mem_gb += self.need_gb[j]
        self.push(replica.ready_at, WAKE, g, -1)  # wake-up when the weights are in
        return replica

    def free_sm(self, device: GpuState, t: float) -> float:
        """SM fraction of ``device`` not held by a replica in a phase."""
        return 1.0 - sum(replica.share for replica in device.tenants.values() if replica.phase)

    def run(self) -> None:
        """Simulate the whole trace: initial placement, then arrivals and events in time order
        until every request is done; accounts every GPU to the last completion (:attr:`end`)."""
        policy = self.policy
        if not policy.serverless:  # static placement: round-robin over all GPUs, all on
            self.placement.static_start()
        else:  # serverless starts warm too, on as few GPUs as memory allows, load-balanced
            self.placement.warm_start()
        if policy.consolidate:
            self.push(self.params.consolidation_s, CONSOLIDATE, 0)
        i, n = 0, len(self.arrival)
        last_arrival = self.arrival[-1] if n else 0.0
        while i < n or self.events:
            if i >= n and self.n_done >= n:
                break  # all work done: timers beyond (keep-alive, consolidation) are moot
            if i < n and (not self.events or self.arrival[i] <= self.events[0][0]):
                self.placement.route_request(i, float(self.arrival[i]))
                i += 1
                continue
            t, _, event, a, b = heapq.heappop(self.events)
            if event == WAKE:
                device = self.gpus[a]
                if b != -1 and b != device.version:
                    continue
                self.advance(a, t)
                self.replan(a, t)
            elif event == RETRY:
                self.placement.route_request(a, t)
            elif event == CONSOLIDATE:
                self.consolidator.consolidate(t)
                if t + self.params.consolidation_s < last_arrival:
                    self.push(t + self.params.consolidation_s, CONSOLIDATE, 0)
        end = float(np.nanmax(self.t_done)) if np.isfinite(self.t_done).any() else last_arrival
        end = max(end, last_arrival, max(device.last_t for device in self.gpus))
        self.extend_to(end)

    def extend_to(self, horizon: float) -> None:
        """Account every GPU up to ``horizon`` (powered-on GPUs draw their static floor)."""
        for g in range(len(self.gpus)):
            self.advance(g, horizon)
        self.end = horizon

    def result(self, policy: str) -> SimResult:
        """The run as a :class:`SimResult` (per-request latencies and SLO flags, power segments,
        energy split and summary) for ``policy``; SLOs without the safety margin."""
        sim, params = self, self.params
        ttft_ms = (sim.t_first - sim.arrival) * 1000.0
        dec = sim.t_done - sim.t_first
        tbt_ms = np.where(sim.output > 1, dec / np.maximum(sim.output - 1, 1) * 1000.0, np.nan)
        served = np.isfinite(sim.t_done)
        ttft_ok = served & (ttft_ms <= params.ttft_slo_ms)
        tbt_ok = served & ((sim.output <= 1) | (tbt_ms <= params.tbt_slo_ms))
        req = pd.DataFrame({"model": sim.model_of, "gpu": sim.gpu_of, "arrival_s": sim.arrival,
                            "ttft_ms": ttft_ms, "tbt_ms": tbt_ms, "ttft_ok": ttft_ok,
                            "tbt_ok": tbt_ok})
        seg = pd.DataFrame(sim.segments, columns=["gpu", "t0_s", "t1_s", "power_w", "clock_mhz"])
        e = np.sum([device.energy_j for device in sim.gpus], axis=0)
        energy = dict(zip(("prefill_j", "decode_j", "static_busy_j", "idle_j"), map(float, e),
                          strict=True))
        total_j = sum(energy.values())
        dur = seg["t1_s"] - seg["t0_s"]
        span = max(sim.end, 1e-9)
        summary = {
            "energy_kwh": total_j / 3.6e6,
            "ttft_attainment": float(ttft_ok.mean()) if len(req) else float("nan"),
            "tbt_attainment": float(tbt_ok.mean()) if len(req) else float("nan"),
            "slo_attainment": float((ttft_ok & tbt_ok).mean()) if len(req) else float("nan"),
            "requests": int(len(req)), "served": int(served.sum()),
            "mean_gpus_on": float(dur.sum() / span),
            "mean_clock_mhz": float((seg["clock_mhz"] * dur).sum() / dur.sum()) if dur.sum() else
            float("nan"),
            "duration_s": span,
            **{k.replace("_j", "_kwh"): v / 3.6e6 for k, v in energy.items()},
            **self.clock_profile(),
        }
        return SimResult(policy, summary, req, seg, energy)

    def clock_profile(self) -> dict:
        """How the clocks were set: ``prefill_clock_mhz`` / ``decode_clock_mhz`` (token-weighted
        clock of each phase; NaN without tokens), ``clock_changes`` (power segments whose clock
        differs from the GPU's previous one; the simulator charges no energy for a change) and
        ``need_bound_share`` (fraction of the dynamic-clock settings of a busy GPU in which the
        SLO need, not the energy-optimal clocks or Eq. 9, set the clock; NaN for fixed
        clocks)."""
        ct = np.sum([device.clock_tokens for device in self.gpus], axis=0)
        replans = sum(device.replans for device in self.gpus)
        return {
            "prefill_clock_mhz": float(ct[1] / ct[0]) if ct[0] > 0 else float("nan"),
            "decode_clock_mhz": float(ct[3] / ct[2]) if ct[2] > 0 else float("nan"),
            "clock_changes": int(sum(device.clock_changes for device in self.gpus)),
            "need_bound_share": sum(device.need_bound for device in self.gpus) / replans
            if replans else float("nan")}
