"""Energy-aware shared-GPU serving what-ifs (Festina: Wang et al., "Energy-Aware Scheduling for
Serverless LLM Serving on Shared GPUs", arXiv 2606.30391).

A deterministic request-level discrete-event simulation of N co-hosted models on a pool of GPUs of
one kind. Arrivals, prompt and output lengths come from a request trace in the store; latency and
power come from :mod:`analytics.serving.profiles` (bench rows + DVFS model, or measured CSVs).

Requests -> models
    Model popularity is Zipf: ``p_j ~ 1 / rank_j**zipf_s`` with the ranks shuffled by the seeded
    generator (which model is popular is random, the skew is not); each request draws its model
    from ``p`` (``zipf_s`` is a parameter, default 1.0: no staged trace names the models).
Serving fidelity (per model replica = "tenant" on a GPU, vLLM-like continuous batching)
    A tenant runs one prefill at a time (FIFO) and one decode batch in which every running
    sequence gets one token per iteration. Without chunked prefill (default) a prefill pauses
    that tenant's decode batch, so TBT includes prefill stalls. With ``chunk_tokens = C`` (vLLM
    ``--enable-chunked-prefill`` with ``max_num_batched_tokens = C``) each iteration carries the
    ``b`` decode tokens plus a prefill chunk of ``C - b`` prompt tokens: iteration time = decode
    ITL(b) + prefill time of the chunk, power the time-weighted mix of the two phases. New sequences join
    the batch when their prefill ends, up to the largest benchmarked batch. Iteration time and
    power follow the profile at the GPU's clock and the tenant's MPS SM share; between events
    they are constant, so the simulator jumps from event to event (arrival, prefill end,
    sequence end, clock change) instead of stepping tokens. Co-resident tenants run in parallel on
    their SM shares (MPS); they share one device clock.
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

Policies (Festina Sec. 4: baselines and the five-stage ablation, Fig. 13)
    ``max_clock``  all GPUs on at the top clock, SLO-aware least-loaded dispatch, equal SM shares
                   among busy tenants, models spread round-robin (as MuxServe / Aegaeon run:
                   Festina Fig. 1).
    ``static_dvfs`` the same placement, one fixed clock per GPU: the lowest clock that meets both
                   SLOs (with the safety margin) at the worst batch and prefill backlog that GPU
                   saw in the max-clock run, not below its residents' energy-optimal clocks
                   (DynamoLLM-style, worst case); then up to 3 re-provisioning rounds raise the
                   clock of GPUs whose SLO attainment fell > 1 pp below max-clock's.
    ``stage1``     SLO-aware dispatch: identical to ``max_clock`` (the ablation's baseline).
    ``stage2``     + frequency-aware dispatch: per-GPU dynamic clock pinned by the most demanding
                   busy tenant (never below a phase's energy-optimal clock); requests go to the
                   SLO-safe replica with the lowest lookup energy, within 2 % by most free memory
                   then most free SMs.
    ``stage3``     + fine-grained runtime: the clock is Festina Eq. 9 over busy tenants' phases,
                   SM shares proportional to each tenant's SLO need (the clock is raised until the
                   shares fit).
    ``stage4``     + SLO-aware placement: serverless. The run starts warm like the baselines,
                   packed by SLO need (best-fit decreasing of each model's lookup need at its
                   mean rate, :meth:`_Sim._warm_start`; unused GPUs off); idle
                   replicas are unloaded after the keep-alive and empty GPUs powered off; later
                   loads (cold start = weights / PCIe bandwidth) go to the energy-ranked SLO-safe
                   GPU (2 % tie-break), and a GPU is powered on only when no on-GPU is safe.
    ``festina``    (= stage 5) + EWR consolidation: every ``consolidation_s`` the Energy Waste
                   Ratio (static energy / total energy in the window) of each powered-on GPU is
                   computed; GPUs above ``ewr_threshold`` whose models all fit elsewhere (memory +
                   SLO lookup) are drained and powered down. The EWR definition is ours: the
                   staged paper text names the metric but not its formula.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from analytics.hardware import catalog as hardware
from analytics.serving.profiles import (
    DECODE_SAVING_TARGET,
    GPU_DVFS,
    DvfsParams,
    GpuDvfs,
    Profile,
    build_lookup,
    calibrate_gamma,
    decode_itl_s,
    dynamic_power_w,
    energy_curve,
    measured_clock_floor,
    prefill_time_s,
)

POLICIES = ("max_clock", "static_dvfs", "festina")
STAGES = ("stage1", "stage2", "stage3", "stage4", "festina")
STAGE_LABELS = {"stage1": "1 SLO-aware dispatch", "stage2": "2 + frequency-aware dispatch",
                "stage3": "3 + fine-grained runtime", "stage4": "4 + SLO-aware placement",
                "festina": "5 + consolidation (Festina)"}
RETRY_S = 0.1  # a request that finds no memory for its model retries after this long (s)
STATIC_ROUNDS = 3  # static DVFS re-provisioning rounds (clock up where SLOs slipped)
TIE_BREAK = 0.02  # Festina Sec. 3.3: candidates within 2 % energy are ties


@dataclass(frozen=True)
class ServingParams:
    """What-if parameters.

    Attributes
    ----------
    n_models : co-hosted models (profiles are cycled when the bench has fewer)
    n_gpus : GPUs in the pool
    gpu : GPU kind (key of :data:`analytics.serving.profiles.GPU_DVFS`)
    ttft_slo_ms, tbt_slo_ms : SLOs (parameters; the staged paper text gives no values)
    safety_margin : fraction of each SLO kept as slack by the controllers (Festina: 5 %)
    zipf_s : Zipf exponent of model popularity (parameter)
    kv_factor : KV-cache budget reserved per resident model, as a fraction of its weights
        (parameter: the bench rows carry no KV size)
    mem_util : usable fraction of GPU memory (vLLM ``gpu_memory_utilization`` default 0.9)
    chunk_tokens : chunked-prefill token budget per iteration (0 = off: a prefill pauses
        decode); vLLM's ``max_num_batched_tokens``
    keep_alive_s : serverless keep-alive: an idle replica is unloaded after this long (stages 4-5;
        parameter) and a GPU left without models is powered off
    consolidation_s : period of EWR consolidation, s (parameter)
    ewr_threshold : EWR above which a GPU is a consolidation candidate (parameter)
    gamma : dynamic-power exponent of the DVFS model; None (default) calibrates it to the
        measured decode saving of clock locking (:func:`serving_profiles.calibrate_gamma`)
    static_scale : multiplies the cited static floor ``GpuDvfs.idle_w`` (sensitivity studies;
        1 = as measured)
    n_clocks : clock grid points between f_min and f_max
    window_s : simulate only the first ``window_s`` seconds of the trace (None: all)
    seed : seed of the model assignment
    """

    n_models: int = 16
    n_gpus: int = 8
    gpu: str = "H100-80GB"
    ttft_slo_ms: float = 1000.0
    tbt_slo_ms: float = 100.0
    safety_margin: float = 0.05
    zipf_s: float = 1.0
    kv_factor: float = 0.5
    mem_util: float = 0.9
    chunk_tokens: int = 0
    keep_alive_s: float = 60.0
    consolidation_s: float = 60.0
    ewr_threshold: float = 0.5
    gamma: float | None = None
    static_scale: float = 1.0
    n_clocks: int = 24
    window_s: float | None = None
    seed: int = 0


@dataclass(frozen=True)
class _Mode:
    clock: str  # "max" | "static" | "pinned" | "phase"
    dispatch: str  # "slo" | "energy"
    adaptive_share: bool
    serverless: bool
    consolidate: bool


MODES = {
    "max_clock": _Mode("max", "slo", False, False, False),
    "static_dvfs": _Mode("static", "slo", False, False, False),
    "stage1": _Mode("max", "slo", False, False, False),
    "stage2": _Mode("pinned", "energy", False, False, False),
    "stage3": _Mode("phase", "energy", True, False, False),
    "stage4": _Mode("phase", "energy", True, True, False),
    "festina": _Mode("phase", "energy", True, True, True),
}


@dataclass
class SimResult:
    """One policy's run.

    Attributes
    ----------
    policy : policy name
    summary : energy_kwh, ttft_attainment, tbt_attainment, slo_attainment (both met), requests,
        served, mean_gpus_on, mean_clock_mhz, and the energy split (kWh)
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


# --------------------------------------------------------------------------- inputs
def trace_arrays(requests: pd.DataFrame, window_s: float | None = None) -> pd.DataFrame:
    """Arrivals from a ``requests`` table: ``arrival_s`` (from the first request), ``prompt``,
    ``output`` tokens (each >= 1), in time order, optionally the first ``window_s`` seconds.

    Raises ValueError when the trace has no token counts (e.g. GPU-seconds-only traces).
    """
    if requests.empty:
        raise ValueError("the trace has no requests")
    if requests["prompt_tokens"].isna().all() or requests["completion_tokens"].isna().all():
        raise ValueError("the trace has no prompt / completion token counts; the serving "
                         "simulation needs both (e.g. the Azure LLM or Mooncake traces)")
    ts = pd.to_datetime(requests["ts"]).to_numpy("datetime64[us]").astype(np.int64) / 1e6
    order = np.argsort(ts, kind="stable")
    t = ts[order] - ts[order][0]
    out = pd.DataFrame({
        "arrival_s": t,
        "prompt": np.maximum(requests["prompt_tokens"].fillna(1).to_numpy(np.int64)[order], 1),
        "output": np.maximum(requests["completion_tokens"].fillna(1).to_numpy(np.int64)[order],
                             1),
    })
    if window_s is not None:
        out = out[out["arrival_s"] < window_s].reset_index(drop=True)
    return out


def assign_models(n_requests: int, n_models: int, zipf_s: float,
                  rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Zipf model popularity with seeded ranks, and one model per request.

    Returns ``(model_of_request (n_requests,), popularity (n_models,))``.
    """
    ranks = rng.permutation(n_models) + 1
    pop = 1.0 / ranks.astype(float) ** zipf_s
    pop /= pop.sum()
    return rng.choice(n_models, size=n_requests, p=pop), pop


def model_slots(profiles: list[Profile], n_models: int) -> list[Profile]:
    """``n_models`` co-hosted models: the bench profiles cycled in model-id order."""
    if not profiles:
        raise ValueError("no serving profiles")
    return [profiles[i % len(profiles)] for i in range(n_models)]


# --------------------------------------------------------------------------- simulator
def _water_fill(needs: list[float]) -> list[float]:
    """Max-min fair split of one GPU's SMs: equal shares, tenants needing less keep only their
    need and the rest is shared again among the others (sum 1)."""
    out = [0.0] * len(needs)
    left, todo = 1.0, sorted(range(len(needs)), key=lambda i: needs[i])
    while todo:
        eq = left / len(todo)
        i = todo[0]
        if needs[i] <= eq:
            out[i] = needs[i]
            left -= needs[i]
            todo.pop(0)
        else:
            for k in todo:
                out[k] = eq
            break
    return out


def rank_candidates(cands: list[tuple[float, int]], free_mem_gb, free_sm,
                    tie: float = TIE_BREAK) -> tuple[float, int]:
    """Festina's placement choice (Sec. 3.3): the lowest-energy candidate, where candidates
    within ``tie`` (2 %) of the lowest energy are ties, broken by most free memory, then most
    free SMs, then the lowest GPU index.

    Parameters
    ----------
    cands : ``(energy, gpu)`` pairs (energy in J, or any cost where lower is better); non-empty
    free_mem_gb : callable ``gpu -> free memory`` (GB)
    free_sm : callable ``gpu -> free SM fraction`` (0 to 1)
    tie : relative energy band counted as a tie

    Returns
    -------
    The chosen ``(energy, gpu)`` pair.
    """
    best = min(c[0] for c in cands)
    ties = [c for c in cands if c[0] <= best * (1 + tie) + 1e-12]
    return max(ties, key=lambda c: (free_mem_gb(c[1]), free_sm(c[1]), -c[1]))


class _Tenant:
    __slots__ = ("g", "j", "share", "queue", "pf_rid", "pf_left", "heap", "counter", "ready_at",
                 "draining", "rate", "itl", "dyn", "phase", "queued_tokens", "last_arrival",
                 "idle_since", "frac_p")

    def __init__(self, g: int, j: int, ready_at: float):
        self.g, self.j, self.ready_at = g, j, ready_at
        self.share = 1.0
        self.queue: deque = deque()
        self.pf_rid, self.pf_left = -1, 0.0
        self.heap: list = []
        self.counter = 0.0
        self.draining = False
        self.rate = self.itl = self.dyn = self.frac_p = 0.0
        self.phase = ""  # "prefill" | "decode" | "mixed" (chunked) | "" (idle or loading)
        self.queued_tokens = 0.0
        self.last_arrival = ready_at
        self.idle_since = -1.0

    def busy(self) -> bool:
        return self.pf_rid >= 0 or bool(self.queue) or bool(self.heap)


class _Gpu:
    __slots__ = ("on", "clock", "tenants", "last", "version", "mem", "draining", "e", "e_win",
                 "static_clock", "worst_batch", "worst_backlog")

    def __init__(self):
        self.on = False
        self.clock = 0.0
        self.tenants: dict[int, _Tenant] = {}
        self.last = 0.0
        self.version = 0
        self.mem = 0.0
        self.draining = False
        self.e = [0.0, 0.0, 0.0, 0.0]  # prefill, decode, static_busy, idle (J)
        self.e_win = [0.0, 0.0]  # static, total at the last consolidation
        self.static_clock = 0.0
        self.worst_batch = {}
        self.worst_backlog = {}


class _Sim:
    def __init__(self, trace: pd.DataFrame, models: np.ndarray, slots: list[Profile],
                 gpu: GpuDvfs, params: ServingParams, mode: _Mode,
                 static_clocks: dict[int, float] | None = None):
        self.p, self.mode, self.gk, self.slots = params, mode, gpu, slots
        self.dv = DvfsParams(gamma=params.gamma if params.gamma is not None else 3.0)
        self.arr = trace["arrival_s"].to_numpy(float)
        self.prompt = trace["prompt"].to_numpy(float)
        self.out = trace["output"].to_numpy(np.int64)
        self.model = models
        n = len(self.arr)
        self.t_first = np.full(n, np.nan)
        self.t_done = np.full(n, np.nan)
        self.gpu_of = np.full(n, -1, dtype=np.int64)
        self.n_done = 0
        self.gpus = [_Gpu() for _ in range(params.n_gpus)]
        self.capacity_gb = hardware.SPECS[gpu.key].memory_gb * params.mem_util
        self.need_gb = [s.weights_gb * (1 + params.kv_factor) for s in slots]
        # measured profiles are not extrapolated below their lowest measured clock
        f_lo = max(gpu.f_min_mhz, measured_clock_floor(slots) or gpu.f_min_mhz)
        self.clocks = np.linspace(f_lo, gpu.f_max_mhz, params.n_clocks)
        self.xs = self.clocks / gpu.f_max_mhz
        self.ttft_s = params.ttft_slo_ms / 1000.0 * (1 - params.safety_margin)
        self.tbt_s = params.tbt_slo_ms / 1000.0 * (1 - params.safety_margin)
        self.heap: list = []
        self.seq = 0
        self.segs: list[tuple] = []
        self.static_clocks = static_clocks or {}
        # energy-optimal relative clock per model and phase (decode by batch bucket)
        self.xopt_p = []
        self.xopt_d = []
        self.buckets = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048], float)
        for s in slots:
            ep = (gpu.idle_w + dynamic_power_w(s, gpu, "prefill", 1, self.clocks, 1.0, self.dv)) \
                * prefill_time_s(s, gpu, 1.0, self.clocks)
            self.xopt_p.append(float(self.xs[np.argmin(ep)]))
            row = []
            for b in self.buckets:
                ed = (gpu.idle_w + dynamic_power_w(s, gpu, "decode", b, self.clocks, 1.0,
                                                   self.dv)) * decode_itl_s(s, gpu, b,
                                                                            self.clocks)
                row.append(float(self.xs[np.argmin(ed)]))
            self.xopt_d.append(np.array(row))
        self.arrivals_by_model = np.zeros(len(slots))
        self.lut = build_lookup(slots, gpu, self.clocks, self.dv)  # offline profile table

    # ------------------------------------------------------------------ helpers
    def _push(self, t: float, kind: int, a: int, b: int = 0):
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, a, b))

    def _xopt_d(self, j: int, batch: int) -> float:
        k = min(int(np.searchsorted(self.buckets, max(batch, 1))), len(self.buckets) - 1)
        return float(self.xopt_d[j][k])

    def _grid_up(self, x: float) -> float:
        """Smallest grid clock (relative) >= x, clamped to [x_min, 1]."""
        k = int(np.searchsorted(self.xs, min(x, 1.0) - 1e-12))
        return float(self.xs[min(k, len(self.xs) - 1)])

    def _chunk(self, ten: _Tenant) -> float:
        """Prompt tokens per iteration of a chunked prefill beside ``len(heap)`` decode tokens."""
        return max(min(self.p.chunk_tokens - len(ten.heap), ten.pf_left), 1.0)

    def _need(self, t: float, ten: _Tenant) -> tuple[float, float]:
        """Required effective speed ``x*share`` for prefill (TTFT) and decode (TBT) of a tenant
        now (0 when the phase has no work, > 1 when unreachable).

        TBT is a per-request mean, so the decode need follows each in-flight sequence's budget
        left, ``tbt * (out - 1) - (t - first_token)``, over its tokens left (never looser than
        the SLO itself). A running prefill stalls the batch (no chunked prefill), so it must
        also end within the smallest stall the in-flight sequences can absorb if decode then
        runs at the top clock."""
        prof = self.slots[ten.j]
        mixed = self.p.chunk_tokens > 0 and bool(ten.heap)
        if mixed:  # iteration = nom*m + (nom*(1-m) + chunk/prefill_tok_s) / v
            b = len(ten.heap)
            nom_b = float(prof.itl_nom_ms(b)) / 1000.0
            m_b = float(prof.mem_fraction(b))
            ch = self._chunk(ten) if ten.pf_rid >= 0 else max(self.p.chunk_tokens - b, 1.0)
            a_mix = nom_b * (1 - m_b) + ch / prof.prefill_tok_s
        v_p = 0.0
        if ten.pf_rid >= 0 or ten.queue:
            work = ten.pf_left if ten.pf_rid >= 0 else 0.0
            rids = ([ten.pf_rid] if ten.pf_rid >= 0 else []) + list(ten.queue)
            for k, rid in enumerate(rids):
                if k > 0:
                    work += self.prompt[rid]
                left = self.arr[rid] + self.ttft_s - max(t, ten.ready_at)
                rate = work / left if left > 1e-9 else np.inf
                if mixed:  # prompt tokens flow at chunk / iteration time
                    room = ch / rate - nom_b * m_b if np.isfinite(rate) else -1.0
                    v_p = max(v_p, a_mix / room if room > 1e-12 else np.inf)
                else:
                    v_p = max(v_p, rate / prof.prefill_tok_s)
                if k >= 8:  # later requests have later deadlines; 8 bound the search
                    break
        v_d = 0.0
        if ten.heap:
            b = len(ten.heap)
            nom = float(prof.itl_nom_ms(b)) / 1000.0
            m = float(prof.mem_fraction(b))
            h = np.array(ten.heap)
            rids = h[:, 1].astype(np.int64)
            left_tok = np.maximum(h[:, 0] - ten.counter, 1e-9)
            budget = self.tbt_s * (self.out[rids] - 1) - (t - self.t_first[rids])
            target = min(self.tbt_s, float(np.min(budget / left_tok)))
            ratio = target / nom
            if mixed and ten.pf_rid >= 0:  # a chunk rides in every iteration: no stall
                room = target - nom * m
                v_d = a_mix / room if room > 1e-12 else np.inf
            else:
                v_d = (1 - m) / (ratio - m) if ratio > m + 1e-9 else np.inf
            if ten.pf_rid >= 0 and not mixed:
                stall = float(np.min(budget - left_tok * nom))
                need = ten.pf_left / prof.prefill_tok_s
                v_p = max(v_p, need / stall if stall > 1e-9 else np.inf)
        return min(v_p, 1e3), min(v_d, 1e3)  # unreachable needs: capped, shares stay finite

    # ------------------------------------------------------------------ power / progress
    def _advance(self, g: int, t: float):
        G = self.gpus[g]
        dt = t - G.last
        if dt <= 0:
            return
        if G.on:
            power = self.gk.idle_w
            busy = False
            for ten in G.tenants.values():
                if ten.phase == "prefill":
                    ten.pf_left -= dt * ten.rate
                    G.e[0] += ten.dyn * dt
                elif ten.phase == "decode":
                    ten.counter += dt / ten.itl
                    G.e[1] += ten.dyn * dt
                elif ten.phase == "mixed":
                    ten.pf_left -= dt * ten.rate
                    ten.counter += dt / ten.itl
                    G.e[0] += ten.dyn * dt * ten.frac_p
                    G.e[1] += ten.dyn * dt * (1.0 - ten.frac_p)
                else:
                    continue
                power += ten.dyn
                busy = True
            G.e[2 if busy else 3] += self.gk.idle_w * dt
            self.segs.append((g, G.last, t, power, G.clock))
        G.last = t

    def _settle(self, g: int, t: float):
        """Finish prefills / sequences due at ``t`` and start the next prefills."""
        G = self.gpus[g]
        for ten in G.tenants.values():
            if t < ten.ready_at - 1e-12:
                continue
            prof = self.slots[ten.j]
            changed = True
            while changed:
                changed = False
                if ten.pf_rid >= 0 and ten.pf_left <= 1e-6:
                    rid = ten.pf_rid
                    self.t_first[rid] = t
                    if self.out[rid] <= 1:
                        self.t_done[rid] = t
                        self.n_done += 1
                    else:
                        heapq.heappush(ten.heap, (ten.counter + self.out[rid] - 1, rid))
                    ten.pf_rid = -1
                    changed = True
                while ten.heap and ten.heap[0][0] <= ten.counter + 1e-6:
                    _, rid = heapq.heappop(ten.heap)
                    self.t_done[rid] = t
                    self.n_done += 1
                    changed = True
                if ten.pf_rid < 0 and ten.queue and len(ten.heap) < prof.max_batch:
                    rid = ten.queue.popleft()
                    ten.queued_tokens -= self.prompt[rid]
                    ten.pf_rid, ten.pf_left = rid, float(self.prompt[rid])
                    changed = True
            b = len(ten.heap)
            wb = G.worst_batch
            wb[ten.j] = max(wb.get(ten.j, 0), b + (1 if ten.pf_rid >= 0 else 0))
            backlog = (ten.pf_left if ten.pf_rid >= 0 else 0.0) + ten.queued_tokens
            G.worst_backlog[ten.j] = max(G.worst_backlog.get(ten.j, 0.0), backlog)

    def _control(self, g: int, t: float):
        """Set the GPU clock and the tenants' SM shares (the policy's local scheduler)."""
        G = self.gpus[g]
        act = [ten for ten in G.tenants.values() if t >= ten.ready_at - 1e-12 and
               (ten.pf_rid >= 0 or ten.heap)]
        mode = self.mode.clock
        if not act:
            G.clock = (self.gk.f_max_mhz if mode == "max" else G.static_clock if mode == "static"
                       else float(self.clocks[0]))
            return act
        n = len(act)
        if mode in ("max", "static"):
            x = 1.0 if mode == "max" else G.static_clock / self.gk.f_max_mhz
            for ten in act:
                ten.share = 1.0 / n
        else:
            needs = []
            for ten in act:
                v_p, v_d = self._need(t, ten)
                needs.append((v_p, v_d, min(max(v_p, v_d), 1.0)))  # unreachable: whole GPU
            if not self.mode.adaptive_share:  # stage 2: equal shares, pinned by the neediest
                x = 0.0
                for ten, (_, _, v) in zip(act, needs, strict=True):
                    xo = self.xopt_p[ten.j] if ten.pf_rid >= 0 else self._xopt_d(ten.j,
                                                                                len(ten.heap))
                    x = max(x, v * n, xo)
                    ten.share = 1.0 / n
            else:  # stage 3+: Festina Eq. 9 over phases, shares proportional to need
                num = den = 0.0
                for ten, (v_p, v_d, _) in zip(act, needs, strict=True):
                    prof = self.slots[ten.j]
                    if ten.pf_rid >= 0:
                        f_p = max(self.xopt_p[ten.j], min(v_p, 1.0))
                        work = ten.pf_left + ten.queued_tokens
                        t_p = float(prefill_time_s(prof, self.gk, work, f_p * self.gk.f_max_mhz))
                        p_p = self.gk.idle_w + float(dynamic_power_w(
                            prof, self.gk, "prefill", 1, f_p * self.gk.f_max_mhz, 1.0, self.dv))
                        num += p_p * t_p * f_p
                        den += p_p * t_p
                    if ten.heap:
                        b = len(ten.heap)
                        f_d = max(self._xopt_d(ten.j, b), min(v_d, 1.0))
                        left = ten.heap[0][0] - ten.counter
                        t_d = float(decode_itl_s(prof, self.gk, b, f_d * self.gk.f_max_mhz)) \
                            * max(left, 1.0)
                        p_d = self.gk.idle_w + float(dynamic_power_w(
                            prof, self.gk, "decode", b, f_d * self.gk.f_max_mhz, 1.0, self.dv))
                        num += p_d * t_d * f_d
                        den += p_d * t_d
                x_eq9 = num / den if den > 0 else 1.0  # Eq. 9 summed over co-resident tenants
                total = sum(v for _, _, v in needs)
                x = max(x_eq9, total)
                if total > 1.0:  # over-subscribed: max-min fair (water-filling) shares
                    shares = _water_fill([v for _, _, v in needs])
                else:  # each tenant gets its need at the clock, the spare in proportion
                    tot = total if total > 0 else 1.0
                    shares = [(v / tot) if total > 0 else 1.0 / n for _, _, v in needs]
                shares = [max(sh, 1e-3) for sh in shares]
                s = sum(shares)
                for ten, sh in zip(act, shares, strict=True):
                    ten.share = sh / s
            x = self._grid_up(x)
        G.clock = x * self.gk.f_max_mhz
        return act

    def _replan(self, g: int, t: float):
        G = self.gpus[g]
        if not G.on:
            return
        self._settle(g, t)
        if G.draining and not any(ten.busy() for ten in G.tenants.values()):
            self._power_off(g)
            return
        if self.mode.serverless:  # keep-alive: unload replicas idle for keep_alive_s
            for j in list(G.tenants):
                ten = G.tenants[j]
                if ten.busy() or t < ten.ready_at:
                    ten.idle_since = -1.0
                elif ten.idle_since < 0:
                    ten.idle_since = t
                    self._push(t + self.p.keep_alive_s, 1, g, -1)
                elif t - ten.idle_since >= self.p.keep_alive_s - 1e-9:
                    del G.tenants[j]
                    G.mem -= self.need_gb[j]
            if not G.tenants:
                self._power_off(g)
                return
        act = self._control(g, t)
        nxt = np.inf
        for ten in G.tenants.values():
            ten.phase = ""
            if ten not in act:
                if t < ten.ready_at:
                    nxt = min(nxt, ten.ready_at)
                continue
            prof = self.slots[ten.j]
            if ten.pf_rid >= 0 and ten.heap and self.p.chunk_tokens > 0:
                b = len(ten.heap)
                ch = self._chunk(ten)
                t_d = float(decode_itl_s(prof, self.gk, b, G.clock, ten.share))
                t_c = float(prefill_time_s(prof, self.gk, ch, G.clock, ten.share))
                ten.phase = "mixed"
                ten.itl = t_d + t_c
                ten.rate = ch / ten.itl
                ten.frac_p = t_c / ten.itl
                ten.dyn = (t_d * float(dynamic_power_w(prof, self.gk, "decode", b, G.clock,
                                                       ten.share, self.dv))
                           + t_c * float(dynamic_power_w(prof, self.gk, "prefill", 1, G.clock,
                                                         ten.share, self.dv))) / ten.itl
                nxt = min(nxt, t + max(ten.pf_left, 0.0) / ten.rate,
                          t + max(ten.heap[0][0] - ten.counter, 0.0) * ten.itl)
            elif ten.pf_rid >= 0:
                ten.phase = "prefill"
                ten.rate = 1.0 / float(prefill_time_s(prof, self.gk, 1.0, G.clock, ten.share))
                ten.dyn = float(dynamic_power_w(prof, self.gk, "prefill", 1, G.clock, ten.share,
                                                self.dv))
                nxt = min(nxt, t + max(ten.pf_left, 0.0) / ten.rate)
            else:
                b = len(ten.heap)
                ten.phase = "decode"
                ten.itl = float(decode_itl_s(prof, self.gk, b, G.clock, ten.share))
                ten.dyn = float(dynamic_power_w(prof, self.gk, "decode", b, G.clock, ten.share,
                                                self.dv))
                nxt = min(nxt, t + max(ten.heap[0][0] - ten.counter, 0.0) * ten.itl)
        G.version += 1
        if np.isfinite(nxt):
            self._push(nxt, 1, g, G.version)

    # ------------------------------------------------------------------ placement
    def _power_on(self, g: int, t: float):
        G = self.gpus[g]
        G.on, G.last, G.draining = True, t, False
        G.clock = self.gk.f_max_mhz if self.mode.clock == "max" else (
            G.static_clock if self.mode.clock == "static" else float(self.clocks[0]))
        G.e_win = [G.e[2] + G.e[3], sum(G.e)]

    def _power_off(self, g: int):
        G = self.gpus[g]
        G.on, G.draining = False, False
        G.tenants.clear()
        G.mem = 0.0
        G.version += 1

    def _load(self, g: int, j: int, t: float) -> _Tenant:
        G = self.gpus[g]
        if not G.on:
            self._power_on(g, t)
        ten = _Tenant(g, j, t + self.slots[j].weights_gb / self.gk.pcie_gbs)
        G.tenants[j] = ten
        G.mem += self.need_gb[j]
        self._push(ten.ready_at, 1, g, -1)  # wake-up when the weights are in
        return ten

    def _free_sm(self, G: _Gpu, t: float) -> float:
        return 1.0 - sum(ten.share for ten in G.tenants.values() if ten.phase)

    def _rank(self, cands: list, t: float):
        """Festina tie-break (:func:`rank_candidates`) on this pool's memory and SM state."""
        return rank_candidates(cands, lambda g: self.capacity_gb - self.gpus[g].mem,
                               lambda g: self._free_sm(self.gpus[g], t))

    # ------------------------------------------------------------------ global scheduler lookups
    def _tenant_dyn_w(self, ten: _Tenant, ci: int, share: float | None = None) -> float:
        """Lookup dynamic power (W) of a busy tenant at clock index ``ci`` (its current phase,
        batch and SM share unless ``share`` is given); 0 for an idle tenant."""
        L = self.lut
        si = L.s(ten.share if share is None else share)
        if ten.pf_rid >= 0:
            return float(L.prefill_dyn_w[ten.j, si, ci])
        if ten.heap:
            return float(L.decode_dyn_w[ten.j, L.b(len(ten.heap)), si, ci])
        return 0.0

    def _offer(self, g: int, j: int, rid: int, t: float, ten: _Tenant | None = None
               ) -> tuple[float, float, float]:
        """Festina's global-scheduler lookup (Sec. 3.3): predicted ``(energy_j, ttft_s, tbt_s)``
        of serving request ``rid`` of model ``j`` on GPU ``g``, read from the offline profile
        table (:class:`analytics.serving.profiles.LookupTable`) and the GPU's state summary.

        * SM share: equal among the busy tenants plus this one (stages 1-2), or what the busy
          co-residents leave free at the top clock (stage 3+: shares follow SLO need).
        * TTFT / TBT: at the top clock with that share; TTFT includes the replica's prefill
          backlog and, for ``ten=None`` (a new replica), the cold start (weights / PCIe).
        * Energy (J): the request's marginal dynamic energy at the clock the GPU would run --
          the running clock raised to the lowest grid clock meeting both SLOs, never below the
          model's energy-optimal decode clock -- plus the extra power that raise costs the busy
          co-residents over the request's service time, plus the static floor over cold start
          and service time when the GPU is powered off (scale-out pays static power).
        Infeasible shares give ``(inf, inf, inf)``.
        """
        G, L = self.gpus[g], self.lut
        others = [o for o in G.tenants.values() if o is not ten and o.busy()]
        if self.mode.adaptive_share:
            share = 1.0 - sum(min(max(self._need(t, o)), 1.0) for o in others)
        else:
            share = 1.0 / (len(others) + 1)
        if share < L.shares[0] - 1e-12:
            return np.inf, np.inf, np.inf
        si, top = L.s(share), len(L.clocks_mhz) - 1
        if ten is None:
            wait = self.slots[j].weights_gb / self.gk.pcie_gbs
            backlog, batch = 0.0, 0
        else:
            wait = max(ten.ready_at - t, 0.0)
            backlog = (ten.pf_left if ten.pf_rid >= 0 else 0.0) + ten.queued_tokens
            batch = len(ten.heap)
        work = backlog + self.prompt[rid]
        bi = L.b(batch + 1)
        pf = L.prefill_s_per_tok[j, si]
        itl = L.decode_itl_s[j, bi, si]
        if self.p.chunk_tokens > 0 and batch:  # chunks of C - b tokens ride with the batch
            ch = max(self.p.chunk_tokens - batch, 1.0)
            pf_eff = pf + L.decode_itl_s[j, L.b(batch), si] / ch
            itl_eff = itl + (ch * pf if backlog > 0 else 0.0)
        else:
            pf_eff, itl_eff = pf, itl
        ttft, tbt = wait + work * pf_eff[top], float(itl_eff[top])
        ok = np.flatnonzero((wait + work * pf_eff <= self.ttft_s) & (itl_eff <= self.tbt_s))
        busy = bool(others) or (ten is not None and ten.busy())
        c_cur = L.c(G.clock) if (G.on and busy) else 0
        c_opt = L.c(self._xopt_d(j, batch + 1) * self.gk.f_max_mhz)
        c = max(c_cur, int(ok[0]) if ok.size else top, c_opt)
        n_dec = float(self.out[rid] - 1)
        t_p = self.prompt[rid] * pf[c]
        e = float(L.prefill_dyn_w[j, si, c]) * t_p
        e_dec = float(L.decode_dyn_w[j, bi, si, c] * itl[c])
        if batch:  # marginal: a sequence joining a batch costs the batch's extra energy
            b0 = L.b(batch)
            e_dec -= float(L.decode_dyn_w[j, b0, si, c] * L.decode_itl_s[j, b0, si, c])
        e += max(e_dec, 0.0) * n_dec
        dur = t_p + float(itl[c]) * n_dec
        if c > c_cur and others:
            e += sum(self._tenant_dyn_w(o, c) - self._tenant_dyn_w(o, c_cur)
                     for o in others) * dur
        if not G.on:
            e += self.gk.idle_w * (wait + dur)
        return e, ttft, tbt

    def _safe(self, offer: tuple[float, float, float]) -> bool:
        return offer[1] <= self.ttft_s and offer[2] <= self.tbt_s

    def _place(self, j: int, rid: int, t: float, must: bool = True) -> _Tenant | None:
        """Load a new replica of model ``j`` for request ``rid`` (scale-out / serverless
        placement) or return None.

        Serverless stages (4-5, Festina Sec. 3.3 phases two and three): the powered-on GPUs
        with memory are looked up (:meth:`_offer`); SLO-safe ones are ranked by energy with the
        2 % tie-break. With none, an SLO-safe powered-off GPU is switched on (its static power
        is in its lookup energy). Other policies: the SLO-safe on-GPU with the most free memory.
        When no GPU is SLO-safe, a new replica is loaded only if the model has none (``must``):
        the lowest predicted TTFT, on-GPUs first. Scaling out cannot rescue an SLO that no GPU
        meets, so an existing replica then keeps the request.
        """
        need = self.need_gb[j]
        on, off = [], []
        for g, G in enumerate(self.gpus):
            if j in G.tenants or G.draining or G.mem + need > self.capacity_gb + 1e-9:
                continue
            (on if G.on else off).append(g)
        if not self.mode.serverless:
            off = []
        offers = {g: self._offer(g, j, rid, t) for g in on}
        safe = [g for g, o in offers.items() if self._safe(o)]
        if safe:
            if self.mode.serverless:
                g = self._rank([(offers[g][0], g) for g in safe], t)[1]
            else:
                g = max(safe, key=lambda g: (self.capacity_gb - self.gpus[g].mem, -g))
            return self._load(g, j, t)
        offs = {g: self._offer(g, j, rid, t) for g in off}
        safe = [g for g, o in offs.items() if self._safe(o)]
        if safe:
            return self._load(self._rank([(offs[g][0], g) for g in safe], t)[1], j, t)
        if not must:
            return None
        pool = offers or offs
        if not pool:
            return None
        return self._load(self._rank([(o[1], g) for g, o in pool.items()], t)[1], j, t)

    def _dispatch(self, rid: int, t: float):
        j = int(self.model[rid])
        self.arrivals_by_model[j] += 1
        reps = [G.tenants[j] for G in self.gpus if G.on and not G.draining and j in G.tenants
                and not G.tenants[j].draining]
        offers = [(ten, *self._offer(ten.g, j, rid, t, ten)) for ten in reps]
        safe = [o for o in offers if o[2] <= self.ttft_s and o[3] <= self.tbt_s]
        chosen = None
        if safe:
            if self.mode.dispatch == "slo":
                chosen = min(safe, key=lambda r: (r[2], r[0].g))[0]
            else:
                g = self._rank([(e, ten.g) for ten, e, _, _ in safe], t)[1]
                chosen = self.gpus[g].tenants[j]
        if chosen is None:
            chosen = self._place(j, rid, t, must=not offers)
            if chosen is not None:
                self._advance(chosen.g, t)
        if chosen is None and offers:
            chosen = min(offers, key=lambda r: (r[2], r[0].g))[0]
        if chosen is None and self._evict_for(j, t):
            chosen = self._place(j, rid, t)
        if chosen is None:
            # no replica and no memory: wait for memory (retry), never a silent drop
            self._push(t + RETRY_S, 3, rid)
            return
        g = chosen.g
        self._advance(g, t)
        chosen.queue.append(rid)
        chosen.queued_tokens += self.prompt[rid]
        chosen.last_arrival = t
        self.gpu_of[rid] = g
        self._replan(g, t)

    def _evict_for(self, j: int, t: float) -> bool:
        """Unload idle replicas of other models (those with another replica first) until model
        ``j`` fits on some GPU. Returns whether it now fits."""
        reps = {}
        for G in self.gpus:
            for k in G.tenants:
                reps[k] = reps.get(k, 0) + 1
        idle = sorted(((reps[k] == 1, g, k) for g, G in enumerate(self.gpus) if G.on
                       and not G.draining for k, ten in G.tenants.items()
                       if not ten.busy() and t >= ten.ready_at), key=lambda r: r)
        for _, g, k in idle:
            G = self.gpus[g]
            self._advance(g, t)
            del G.tenants[k]
            G.mem -= self.need_gb[k]
            if G.mem + self.need_gb[j] <= self.capacity_gb + 1e-9:
                return True
        return any(not G.on for G in self.gpus) and self.mode.serverless

    def _consolidate(self, t: float):
        for g, G in enumerate(self.gpus):
            if G.on:
                self._advance(g, t)
        ewr = {}
        for g, G in enumerate(self.gpus):
            if not G.on or G.draining:
                continue
            st, tot = G.e[2] + G.e[3] - G.e_win[0], sum(G.e) - G.e_win[1]
            G.e_win = [G.e[2] + G.e[3], sum(G.e)]
            ewr[g] = st / tot if tot > 0 else 1.0
            if not G.tenants:
                self._power_off(g)
                ewr.pop(g)
        draining = set()
        for g in sorted(ewr, key=lambda g: (-ewr[g], g)):
            if ewr[g] < self.p.ewr_threshold or len(ewr) - len(draining) <= 1:
                continue
            G = self.gpus[g]
            plan, extra = {}, {}
            for j, ten in G.tenants.items():
                v_src = max(self._need(t, ten))
                cands = []
                for d, D in enumerate(self.gpus):
                    if d == g or d in draining or not D.on or D.draining:
                        continue
                    busy = [o for o in D.tenants.values() if o.busy()]
                    load = sum(max(self._need(t, o)) for o in busy) + extra.get(d, 0.0)
                    fits_mem = j in D.tenants or D.mem + extra.get(("m", d), 0.0) \
                        + self.need_gb[j] <= self.capacity_gb + 1e-9
                    if fits_mem and load + v_src <= 1.0 - self.p.safety_margin:
                        # lookup cost: dynamic power the move adds at the clock it needs
                        c0 = self.lut.c(D.clock) if busy else 0
                        c1 = max(c0, self.lut.c(self._grid_up(load + v_src)
                                                * self.gk.f_max_mhz))
                        cost = self._tenant_dyn_w(ten, c1, min(max(v_src, 1e-3), 1.0)) + sum(
                            self._tenant_dyn_w(o, c1) - self._tenant_dyn_w(o, c0) for o in busy)
                        cands.append((max(cost, 0.0) + 1e-9, d))
                if not cands:
                    plan = None
                    break
                dest = self._rank(cands, t)[1]
                plan[j] = dest
                extra[dest] = extra.get(dest, 0.0) + v_src
                if j not in self.gpus[dest].tenants:
                    extra[("m", dest)] = extra.get(("m", dest), 0.0) + self.need_gb[j]
            if not plan:
                continue
            for j, d in plan.items():
                if j not in self.gpus[d].tenants:
                    self._advance(d, t)
                    self._load(d, j, t)
                G.tenants[j].draining = True
            G.draining = True
            draining.add(g)
            self._replan(g, t)

    # ------------------------------------------------------------------ run
    def run(self) -> None:
        mode = self.mode
        if not mode.serverless:  # static placement: round-robin over all GPUs, all on
            for g in range(len(self.gpus)):
                self._power_on(g, 0.0)
                self.gpus[g].static_clock = self.static_clocks.get(g, self.gk.f_max_mhz)
                self.gpus[g].clock = (self.gk.f_max_mhz if mode.clock == "max"
                                      else self.gpus[g].static_clock)
            for j in range(len(self.slots)):
                for k in range(len(self.gpus)):
                    g = (j + k) % len(self.gpus)
                    if self.gpus[g].mem + self.need_gb[j] <= self.capacity_gb + 1e-9:
                        ten = _Tenant(g, j, 0.0)
                        self.gpus[g].tenants[j] = ten
                        self.gpus[g].mem += self.need_gb[j]
                        break
        else:  # serverless starts warm too, on as few GPUs as memory allows, load-balanced
            self._warm_start()
        if mode.consolidate:
            self._push(self.p.consolidation_s, 2, 0)
        i, n = 0, len(self.arr)
        last_arrival = self.arr[-1] if n else 0.0
        while i < n or self.heap:
            if i >= n and self.n_done >= n:
                break  # all work done: timers beyond (keep-alive, consolidation) are moot
            if i < n and (not self.heap or self.arr[i] <= self.heap[0][0]):
                self._dispatch(i, float(self.arr[i]))
                i += 1
                continue
            t, _, kind, a, b = heapq.heappop(self.heap)
            if kind == 1:
                G = self.gpus[a]
                if b != -1 and b != G.version:
                    continue
                self._advance(a, t)
                self._replan(a, t)
            elif kind == 3:
                self.arrivals_by_model[int(self.model[a])] -= 1
                self._dispatch(a, t)
            elif kind == 2:
                self._consolidate(t)
                if t + self.p.consolidation_s < last_arrival:
                    self._push(t + self.p.consolidation_s, 2, 0)
        end = float(np.nanmax(self.t_done)) if np.isfinite(self.t_done).any() else last_arrival
        end = max(end, last_arrival, max(G.last for G in self.gpus))
        self.extend_to(end)

    def _warm_start(self) -> None:
        """Initial serverless placement (stage 4 at time 0), SLO-aware by lookup: each model's
        steady need -- the share of a whole GPU at the top clock its mean request rate takes,
        prefill (rate x mean prompt / prefill tokens/s) plus decode (the TBT need at its
        Little's-law batch, times that batch's busy fraction) -- is packed best-fit decreasing
        onto GPUs with memory, keeping each GPU's total within ``1 - safety_margin``; a GPU is
        powered on only when no powered-on GPU can take a model. Rates are the trace's means:
        the operator's forecast of the mix. Models that fit nowhere load on demand."""
        cap = self.capacity_gb + 1e-9
        n_m = len(self.slots)
        dur = max(float(self.arr[-1] - self.arr[0]), 1.0) if len(self.arr) else 1.0
        counts = np.bincount(self.model, minlength=n_m).astype(float)
        p_sum = np.bincount(self.model, weights=self.prompt, minlength=n_m)
        o_sum = np.bincount(self.model, weights=self.out.astype(float), minlength=n_m)
        need = np.zeros(n_m)
        for j, prof in enumerate(self.slots):
            if not counts[j]:
                continue
            lam = counts[j] / dur
            v_p = lam * p_sum[j] / counts[j] / prof.prefill_tok_s
            tok_s = lam * max(o_sum[j] / counts[j] - 1.0, 0.0)  # decode tokens per second
            den = 1000.0 - tok_s * prof.itl_c_ms
            b = tok_s * prof.itl_a_ms / den if den > 0 else float(prof.max_batch)
            bb = min(max(b, 1.0), prof.max_batch)
            nom = float(prof.itl_nom_ms(bb)) / 1000.0
            m = float(prof.mem_fraction(bb))
            ratio = self.tbt_s / nom
            v_d = (1 - m) / (ratio - m) if ratio > m + 1e-9 else 1.0
            need[j] = v_p + min(v_d, 1.0) * min(b, 1.0)
        limit = 1.0 - self.p.safety_margin
        load = np.zeros(len(self.gpus))
        for j in sorted(range(n_m), key=lambda j: (-need[j], -self.need_gb[j], j)):
            room = [g for g, G in enumerate(self.gpus) if G.mem + self.need_gb[j] <= cap]
            if not room:
                continue
            on_ok = [g for g in room if self.gpus[g].on and load[g] + need[j] <= limit]
            off = [g for g in room if not self.gpus[g].on]
            if on_ok:
                g = max(on_ok, key=lambda g: (load[g], -g))  # best fit: pack
            elif off:
                g = off[0]
            else:
                g = min(room, key=lambda g: (load[g], g))
            G = self.gpus[g]
            if not G.on:
                self._power_on(g, 0.0)
            G.tenants[j] = _Tenant(g, j, 0.0)
            G.mem += self.need_gb[j]
            load[g] += need[j]

    def extend_to(self, horizon: float) -> None:
        """Account every GPU up to ``horizon`` (powered-on GPUs draw their static floor)."""
        for g in range(len(self.gpus)):
            self._advance(g, horizon)
        self.end = horizon


def _static_clocks(gpu: GpuDvfs, slots: list[Profile], sim: _Sim, params: ServingParams
                   ) -> dict[int, float]:
    """DynamoLLM-style: per GPU the lowest grid clock meeting both SLOs (with margin) at the worst
    batch and prefill backlog of each resident model seen in the max-clock run, equal shares,
    and never below a resident's energy-optimal clock (prefill, or decode at its worst batch):
    a lower clock would cost energy and SLO slack at once."""
    out = {}
    for g, G in enumerate(sim.gpus):
        n = max(len(G.tenants), 1)
        best = gpu.f_max_mhz
        floor = max((max(sim.xopt_p[j], sim._xopt_d(j, max(G.worst_batch.get(j, 1), 1)))
                     for j in G.tenants), default=0.0) * gpu.f_max_mhz
        for f in sim.clocks:
            ok = True
            for j in G.tenants:
                prof = slots[j]
                b = max(G.worst_batch.get(j, 1), 1)
                backlog = max(G.worst_backlog.get(j, 0.0), 1.0)
                if float(decode_itl_s(prof, gpu, b, f, 1.0 / n)) > sim.tbt_s or \
                        float(prefill_time_s(prof, gpu, backlog, f, 1.0 / n)) > sim.ttft_s:
                    ok = False
                    break
            if ok:
                best = float(f)
                break
        out[g] = max(best, float(sim.clocks[int(np.searchsorted(sim.clocks, floor - 1e-6))])
                     if floor <= sim.clocks[-1] else best)
    return out


def _lagging_gpus(sim: _Sim, base: _Sim, params: ServingParams, slack: float = 0.01
                  ) -> list[int]:
    """GPUs whose requests meet both SLOs less often than in the max-clock run by > ``slack``."""
    def att(s: _Sim) -> pd.Series:
        ttft = (s.t_first - s.arr) * 1000.0
        tbt = np.where(s.out > 1, (s.t_done - s.t_first) / np.maximum(s.out - 1, 1) * 1000.0, 0)
        ok = np.isfinite(s.t_done) & (ttft <= params.ttft_slo_ms) & (tbt <= params.tbt_slo_ms)
        return pd.Series(ok).groupby(s.gpu_of).mean()

    a, b = att(sim), att(base)
    return [int(g) for g in a.index if g >= 0 and a[g] < b.get(g, 1.0) - slack]


def _result(policy: str, sim: _Sim, params: ServingParams) -> SimResult:
    ttft_ms = (sim.t_first - sim.arr) * 1000.0
    dec = sim.t_done - sim.t_first
    tbt_ms = np.where(sim.out > 1, dec / np.maximum(sim.out - 1, 1) * 1000.0, np.nan)
    served = np.isfinite(sim.t_done)
    ttft_ok = served & (ttft_ms <= params.ttft_slo_ms)
    tbt_ok = served & ((sim.out <= 1) | (tbt_ms <= params.tbt_slo_ms))
    req = pd.DataFrame({"model": sim.model, "gpu": sim.gpu_of, "arrival_s": sim.arr,
                        "ttft_ms": ttft_ms, "tbt_ms": tbt_ms, "ttft_ok": ttft_ok,
                        "tbt_ok": tbt_ok})
    seg = pd.DataFrame(sim.segs, columns=["gpu", "t0_s", "t1_s", "power_w", "clock_mhz"])
    e = np.sum([G.e for G in sim.gpus], axis=0)
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
    }
    return SimResult(policy, summary, req, seg, energy)


@dataclass
class Comparison:
    """All policies on one trace: ``results`` by policy name, the trace, the profiles used."""

    results: dict[str, SimResult]
    trace: pd.DataFrame
    slots: list[Profile]
    popularity: np.ndarray
    params: ServingParams
    notes: list[str] = field(default_factory=list)

    def table(self) -> pd.DataFrame:
        """One row per policy / stage: summary metrics plus energy normalised to Festina."""
        rows = [{"policy": k, **v.summary} for k, v in self.results.items()]
        df = pd.DataFrame(rows)
        fest = self.results["festina"].summary["energy_kwh"] if "festina" in self.results \
            else np.nan
        df["energy_vs_festina"] = df["energy_kwh"] / fest
        if "max_clock" in self.results:
            mc = self.results["max_clock"].summary
            df["saving_vs_max_clock"] = 1 - df["energy_kwh"] / mc["energy_kwh"]
            df["ttft_pp_vs_max_clock"] = 100 * (df["ttft_attainment"] - mc["ttft_attainment"])
            df["tbt_pp_vs_max_clock"] = 100 * (df["tbt_attainment"] - mc["tbt_attainment"])
        return df


def check_params(params: ServingParams) -> None:
    """Raise ValueError naming the first out-of-range what-if parameter."""
    def finite(name: str, v: float, lo: float, hi: float, lo_open: bool = False) -> None:
        if not (np.isfinite(v) and (v > lo if lo_open else v >= lo) and v <= hi):
            raise ValueError(f"{name} = {v!r} is out of range "
                             f"{'(' if lo_open else '['}{lo:g}, {hi:g}]")

    if params.n_models < 1 or params.n_gpus < 1:
        raise ValueError("n_models and n_gpus must be >= 1")
    finite("ttft_slo_ms", params.ttft_slo_ms, 0, 3.6e6, lo_open=True)
    finite("tbt_slo_ms", params.tbt_slo_ms, 0, 3.6e6, lo_open=True)
    finite("safety_margin", params.safety_margin, 0, 0.99)
    finite("zipf_s", params.zipf_s, 0, 10)
    finite("static_scale", params.static_scale, 0, 100, lo_open=True)
    if params.gamma is not None:
        finite("gamma", params.gamma, 0, 10, lo_open=True)
    if params.window_s is not None:
        finite("window_s", params.window_s, 0, 1e9, lo_open=True)
    if params.chunk_tokens < 0:
        raise ValueError(f"chunk_tokens = {params.chunk_tokens} must be >= 0 (0 = off)")


def resolve_gamma(params: ServingParams, profiles: list[Profile], gpu: GpuDvfs
                  ) -> tuple[ServingParams, list[str]]:
    """``params`` with ``gamma`` set (calibrated when None) and a note saying where it came
    from. Profiles with nothing to calibrate on (all measured) fall back to 3 and say so."""
    if params.gamma is not None:
        return params, [f"DVFS exponent gamma = {params.gamma:g} (given)"]
    if profiles and all({"prefill", "decode"} <= set(p.measured) for p in profiles):
        return replace(params, gamma=DvfsParams().gamma), [
            "DVFS exponent gamma not used: measured profiles replace the DVFS model"]
    try:
        gamma = calibrate_gamma(profiles, gpu)
        note = (f"DVFS exponent gamma = {gamma:.2f}, calibrated so the largest decode-energy "
                f"saving the model predicts for the dense profiles equals the "
                f"{DECODE_SAVING_TARGET:.0%} measured with SM clock locking (Ma et al., arXiv "
                "2605.11999)")
    except ValueError as exc:
        gamma = DvfsParams().gamma
        note = f"DVFS exponent gamma = {gamma:g} (CMOS textbook value): {exc}"
    return replace(params, gamma=gamma), [note]


def simulate(trace: pd.DataFrame, profiles: list[Profile], params: ServingParams,
             policies: tuple[str, ...] = POLICIES + STAGES[:-1],
             rng: np.random.Generator | None = None) -> Comparison:
    """Run the policies on one trace.

    Parameters
    ----------
    trace : frame from :func:`trace_arrays` (``arrival_s``, ``prompt``, ``output``)
    profiles : bench profiles of ``params.gpu`` (:func:`serving_profiles.profiles_from_bench`)
    params : what-if parameters
    policies : names from :data:`MODES`; ``static_dvfs`` implies a ``max_clock`` run first
    rng : generator for the model assignment (default ``default_rng(params.seed)``)

    Returns
    -------
    Comparison (``results`` keyed by policy; ``stage1`` shares the ``max_clock`` run: same mode)

    Raises
    ------
    ValueError : unknown GPU kind or policy, empty trace, no profiles
    """
    if params.gpu not in GPU_DVFS:
        raise ValueError(f"unknown GPU kind {params.gpu!r}; choose one of {sorted(GPU_DVFS)}")
    check_params(params)
    bad = [p for p in policies if p not in MODES]
    if bad:
        raise ValueError(f"unknown policy {bad[0]!r}; choose from {', '.join(MODES)}")
    if trace.empty:
        raise ValueError("no requests in the chosen window of the trace")
    gpu = GPU_DVFS[params.gpu]
    if params.static_scale != 1.0:
        gpu = replace(gpu, idle_w=gpu.idle_w * params.static_scale)
    rng = rng if rng is not None else np.random.default_rng(params.seed)
    cap = hardware.SPECS[gpu.key].memory_gb * params.mem_util
    fits = [p for p in profiles if p.weights_gb * (1 + params.kv_factor) <= cap]
    if not fits:
        raise ValueError(f"no benchmarked model fits one {params.gpu} with its KV budget "
                         f"({cap:.0f} GB usable); lower kv_factor")
    slots = model_slots(fits, params.n_models)
    params, notes = resolve_gamma(params, profiles, gpu)
    models, pop = assign_models(len(trace), params.n_models, params.zipf_s, rng)
    results: dict[str, SimResult] = {}
    base_sim = None
    order = list(dict.fromkeys(("max_clock",) + tuple(policies)
                               if "static_dvfs" in policies else policies))
    sims: dict[str, _Sim] = {}
    runs: dict[str, int] = {}
    for pol in order:
        if pol == "stage1" and "max_clock" in sims:
            continue
        static = _static_clocks(gpu, slots, base_sim, params) if pol == "static_dvfs" else None
        sim = _Sim(trace, models, slots, gpu, params, MODES[pol], static)
        sim.run()
        runs[pol] = 1
        for _ in range(STATIC_ROUNDS if pol == "static_dvfs" else 0):
            # re-provision: GPUs that lost SLO attainment vs max-clock go 3 grid steps up
            lag = _lagging_gpus(sim, base_sim, params)
            if not lag:
                break
            for g in lag:
                k = int(np.searchsorted(sim.clocks, static[g] - 1e-6))
                static[g] = float(sim.clocks[min(k + 3, len(sim.clocks) - 1)])
            sim = _Sim(trace, models, slots, gpu, params, MODES[pol], static)
            sim.run()
            runs[pol] += 1
        if pol in ("max_clock", "stage1") and base_sim is None:
            base_sim = sim
        sims[pol] = sim
    # one horizon for all policies: the last completion of any of them
    horizon = max(sim.end for sim in sims.values())
    for pol, sim in sims.items():
        sim.extend_to(horizon)
        results[pol] = replace(_result(pol, sim, params), sim_runs=runs[pol])
    if "stage1" in order and "stage1" not in results:
        results["stage1"] = replace(results["max_clock"], policy="stage1")
    results = {k: results[k] for k in dict.fromkeys(tuple(policies)) if k in results} | \
        {k: v for k, v in results.items() if k not in policies}
    notes += [f"{len(profiles) - len(fits)} benchmarked models do not fit one GPU with their "
              "KV budget and are not co-hosted"] if len(fits) < len(profiles) else []
    notes += [f"{len(trace):,} requests over {trace['arrival_s'].max() / 60:.1f} min; "
             f"{params.n_models} models on {params.n_gpus} x {params.gpu}; Zipf s="
             f"{params.zipf_s} popularity (seed {params.seed})"]
    return Comparison(results, trace, slots, pop, params, notes)


def sensitivity(trace: pd.DataFrame, profiles: list[Profile], params: ServingParams,
                gammas: tuple[float | None, ...] = (None, 1.5, 2.0, 3.0),
                static_scales: tuple[float, ...] = (0.5, 1.0, 1.5)) -> pd.DataFrame:
    """How Festina's saving over max-clock moves with the two DVFS-model inputs no staged file
    measures directly: the dynamic-power exponent ``gamma`` (None = calibrated) and the static
    floor (x ``static_scale`` of the cited idle power).

    Returns one row per (static_scale, gamma): ``static_scale``, ``idle_w``, ``gamma``,
    ``calibrated``, ``max_clock_kwh``, ``festina_kwh``, ``saving`` (fraction),
    ``ttft_pp`` / ``tbt_pp`` (Festina minus max-clock attainment, percentage points),
    ``festina_gpus_on``, ``festina_clock_mhz``.
    """
    rows = []
    for sc in static_scales:
        for g in gammas:
            comp = simulate(trace, profiles, replace(params, gamma=g, static_scale=sc),
                            ("max_clock", "festina"))
            f, m = comp.results["festina"].summary, comp.results["max_clock"].summary
            rows.append({
                "static_scale": sc, "idle_w": GPU_DVFS[params.gpu].idle_w * sc,
                "gamma": comp.params.gamma, "calibrated": g is None,
                "max_clock_kwh": m["energy_kwh"], "festina_kwh": f["energy_kwh"],
                "saving": 1 - f["energy_kwh"] / m["energy_kwh"],
                "ttft_pp": 100 * (f["ttft_attainment"] - m["ttft_attainment"]),
                "tbt_pp": 100 * (f["tbt_attainment"] - m["tbt_attainment"]),
                "festina_gpus_on": f["mean_gpus_on"], "festina_clock_mhz": f["mean_clock_mhz"]})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- views
def timeseries(result: SimResult, trace: pd.DataFrame, bin_s: float = 60.0) -> pd.DataFrame:
    """Per-bin GPUs on (time-average), mean clock of powered-on GPUs (MHz), power (kW) and
    arrival rate (req/s).

    Returns a frame with ``t_min`` (bin start, minutes), ``gpus_on``, ``clock_mhz``,
    ``power_kw``, ``arrivals_per_s``.
    """
    seg = result.segments
    end = max(float(seg["t1_s"].max()) if len(seg) else 0.0, float(trace["arrival_s"].max()))
    edges = np.arange(0.0, end + bin_s, bin_s)
    on = np.zeros(len(edges) - 1)
    clk = np.zeros(len(edges) - 1)
    pw = np.zeros(len(edges) - 1)
    t0, t1 = seg["t0_s"].to_numpy(), seg["t1_s"].to_numpy()
    for k in range(len(edges) - 1):
        lo, hi = edges[k], edges[k + 1]
        ov = np.clip(np.minimum(t1, hi) - np.maximum(t0, lo), 0, None)
        on[k] = ov.sum() / bin_s
        pw[k] = (ov * seg["power_w"].to_numpy()).sum() / bin_s / 1000.0
        clk[k] = (ov * seg["clock_mhz"].to_numpy()).sum() / ov.sum() if ov.sum() else np.nan
    arrivals = np.histogram(trace["arrival_s"], edges)[0] / bin_s
    return pd.DataFrame({"t_min": edges[:-1] / 60.0, "gpus_on": on, "clock_mhz": clk,
                         "power_kw": pw, "arrivals_per_s": arrivals})


def latency_cdf(result: SimResult, metric: str = "ttft_ms", points: int = 50) -> pd.DataFrame:
    """Per-model latency CDF: ``model``, ``quantile``, ``value`` (ms) at ``points`` quantiles;
    unserved requests are left out of the CDF (they show in attainment)."""
    q = np.linspace(0, 1, points)
    rows = []
    for j, g in result.requests.groupby("model"):
        v = g[metric].dropna().to_numpy()
        if v.size:
            rows.append(pd.DataFrame({"model": j, "quantile": q, "value": np.quantile(v, q)}))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(
        columns=["model", "quantile", "value"])


def profile_curves(profiles: list[Profile], gpu: str, batch: int = 32, n_clocks: int = 40,
                   gamma: float | None = None, static_scale: float = 1.0) -> pd.DataFrame:
    """Energy per token vs clock for each profile and phase (``model`` column added); ``gamma``
    None calibrates it (:func:`resolve_gamma`); ``static_scale`` multiplies the static floor."""
    g = replace(GPU_DVFS[gpu], idle_w=GPU_DVFS[gpu].idle_w * static_scale)
    if gamma is None:
        gamma = resolve_gamma(ServingParams(gpu=gpu), profiles, g)[0].gamma
    f = np.linspace(g.f_min_mhz, g.f_max_mhz, n_clocks)
    return pd.concat([energy_curve(p, g, f, batch, DvfsParams(gamma)).assign(model=p.model)
                      for p in profiles], ignore_index=True)


def to_json(comp: Comparison) -> dict:
    """The CLI document: ``policies`` (max_clock, static_dvfs, festina) and ``ablation`` stages,
    each ``energy_kwh``, ``ttft_attainment``, ``tbt_attainment`` plus context."""
    def doc(r: SimResult) -> dict:
        s = r.summary
        return {"energy_kwh": round(s["energy_kwh"], 6),
                "ttft_attainment": round(s["ttft_attainment"], 6),
                "tbt_attainment": round(s["tbt_attainment"], 6),
                "slo_attainment": round(s["slo_attainment"], 6),
                "mean_gpus_on": round(s["mean_gpus_on"], 3),
                "mean_clock_mhz": round(s["mean_clock_mhz"], 1),
                "served": s["served"], "requests": s["requests"]}

    res = comp.results
    out = {"policies": {k: doc(res[k]) for k in POLICIES if k in res},
           "ablation": {STAGE_LABELS[k]: doc(res[k]) for k in STAGES if k in res}}
    if "festina" in res and "max_clock" in res:
        f, m = res["festina"].summary, res["max_clock"].summary
        out["festina_vs_max_clock"] = {
            "energy_saving": round(1 - f["energy_kwh"] / m["energy_kwh"], 4),
            "ttft_pp": round(100 * (f["ttft_attainment"] - m["ttft_attainment"]), 3),
            "tbt_pp": round(100 * (f["tbt_attainment"] - m["tbt_attainment"]), 3)}
    p = comp.params
    out["params"] = {"gpu": p.gpu, "n_gpus": p.n_gpus, "n_models": p.n_models,
                     "ttft_slo_ms": p.ttft_slo_ms, "tbt_slo_ms": p.tbt_slo_ms,
                     "safety_margin": p.safety_margin, "zipf_s": p.zipf_s, "seed": p.seed,
                     "window_s": p.window_s, "gamma": p.gamma, "kv_factor": p.kv_factor,
                     "static_scale": p.static_scale, "chunk_tokens": p.chunk_tokens,
                     "requests": int(len(comp.trace))}
    out["notes"] = list(comp.notes)
    out["models"] = sorted({s.model for s in comp.slots})
    return out
