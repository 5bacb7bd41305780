"""Global placement (Festina Sec. 3.3): request dispatch to replicas, the offline-table lookup
that predicts a request's energy and latency on a GPU, new replicas (scale-out, serverless cold
starts), eviction of idle replicas, and the initial placement (round-robin for the baselines,
packed by SLO need for the serverless stages).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from analytics.serving.params import RETRY_S, TIE_BREAK
from analytics.serving.state import RETRY, Replica

if TYPE_CHECKING:  # annotations only: the engine owns its placement
    from analytics.serving.engine import ServingEngine


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


class Placement:
    """The global scheduler of one engine: dispatch, lookups, scale-out and warm start."""

    def __init__(self, sim: ServingEngine):
        self.sim = sim

    def rank(self, cands: list, t: float):
        """Festina tie-break (:func:`rank_candidates`) on this pool's memory and SM state."""
        sim = self.sim
        return rank_candidates(cands, lambda g: sim.capacity_gb - sim.gpus[g].mem_gb,
                               lambda g: sim.free_sm(sim.gpus[g], t))

    def tenant_dyn_w(self, replica: Replica, ci: int, share: float | None = None) -> float:
        """Lookup dynamic power (W) of a busy tenant at clock index ``ci`` (its current phase,
        batch and SM share unless ``share`` is given); 0 for an idle tenant."""
        sim = self.sim
        table = sim.lookup
        si = table.s(replica.share if share is None else share)
        if replica.prefill_rid >= 0:
            return float(table.prefill_dyn_w[replica.model, si, ci])
        if replica.running:
            return float(table.decode_dyn_w[replica.model, table.b(len(replica.running)), si, ci])
        return 0.0

    def offer(self, g: int, j: int, rid: int, t: float, replica: Replica | None = None
               ) -> tuple[float, float, float]:
        """Festina's global-scheduler lookup (Sec. 3.3): predicted ``(energy_j, ttft_s, tbt_s)``
        of serving request ``rid`` of model ``j`` on GPU ``g``, read from the offline profile
        table (:class:`analytics.serving.lookup.LookupTable`) and the GPU's state summary.

        * SM share: equal among the busy tenants plus this one (stages 1-2), or what the busy
          co-residents leave free at the top clock (stage 3+: shares follow SLO need).
        * TTFT / TBT: at the top clock with that share; TTFT includes the replica's prefill
          backlog and, for ``replica=None`` (a new replica), the cold start (weights / PCIe).
        * Energy (J): the request's marginal dynamic energy over its *predicted* decode tokens
          (:mod:`analytics.serving.prediction`; never the true ones) at the clock the GPU would
          run -- the running clock raised to the lowest grid clock meeting both SLOs, never
          below the model's energy-optimal decode clock -- plus the extra power that raise costs the busy
          co-residents over the request's service time, plus the static floor over cold start
          and service time when the GPU is powered off (scale-out pays static power).
        Infeasible shares give ``(inf, inf, inf)``.
        """
        sim = self.sim
        device, table = sim.gpus[g], sim.lookup
        others = [o for o in device.tenants.values() if o is not replica and o.busy()]
        if sim.policy.adaptive_share:
            share = 1.0 - sum(min(max(sim.scheduler.need(t, o)), 1.0) for o in others)
        else:
            share = 1.0 / (len(others) + 1)
        if share < table.shares[0] - 1e-12:
            return np.inf, np.inf, np.inf
        si, top = table.s(share), len(table.clocks_mhz) - 1
        if replica is None:
            wait = sim.slots[j].weights_gb / sim.kind.pcie_gbs
            backlog, batch = 0.0, 0
        else:
            wait = max(replica.ready_at - t, 0.0)
            backlog = (replica.prefill_left if replica.prefill_rid >= 0 else 0.0) + replica.queued_tokens
            batch = len(replica.running)
        work = backlog + sim.prompt[rid]
        bi = table.b(batch + 1)
        pf = table.prefill_s_per_tok[j, si]
        itl = table.decode_itl_s[j, bi, si]
        if sim.params.chunk_tokens > 0 and batch:  # chunks of C - b tokens ride with the batch
            ch = max(sim.params.chunk_tokens - batch, 1.0)
            pf_eff = pf + table.decode_itl_s[j, table.b(batch), si] / ch
            itl_eff = itl + (ch * pf if backlog > 0 else 0.0)
        else:
            pf_eff, itl_eff = pf, itl
        ttft, tbt = wait + work * pf_eff[top], float(itl_eff[top])
        ok = np.flatnonzero((wait + work * pf_eff <= sim.ttft_s) & (itl_eff <= sim.tbt_s))
        busy = bool(others) or (replica is not None and replica.busy())
        c_cur = table.c(device.clock) if (device.on and busy) else 0
        c_opt = table.c(sim.grid.xopt_decode(j, batch + 1) * sim.kind.f_max_mhz)
        c = max(c_cur, int(ok[0]) if ok.size else top, c_opt)
        n_dec = float(sim.pred[rid] - 1)  # predicted: the scheduler never sees the true length
        t_p = sim.prompt[rid] * pf[c]
        e = float(table.prefill_dyn_w[j, si, c]) * t_p
        e_dec = float(table.decode_dyn_w[j, bi, si, c] * itl[c])
        if batch:  # marginal: a sequence joining a batch costs the batch's extra energy
            b0 = table.b(batch)
            e_dec -= float(table.decode_dyn_w[j, b0, si, c] * table.decode_itl_s[j, b0, si, c])
        e += max(e_dec, 0.0) * n_dec
        dur = t_p + float(itl[c]) * n_dec
        if c > c_cur and others:
            e += sum(self.tenant_dyn_w(o, c) - self.tenant_dyn_w(o, c_cur)
                     for o in others) * dur
        if not device.on:
            e += sim.kind.idle_w * (wait + dur)
        return e, ttft, tbt

    def safe(self, offer: tuple[float, float, float]) -> bool:
        """True when an :meth:`offer`'s predicted TTFT and TBT meet both SLOs (with margin)."""
        sim = self.sim
        return offer[1] <= sim.ttft_s and offer[2] <= sim.tbt_s

    def place(self, j: int, rid: int, t: float, must: bool = True) -> Replica | None:
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
        sim = self.sim
        need = sim.need_gb[j]
        on, off = [], []
        for g, device in enumerate(sim.gpus):
            if j in device.tenants or device.draining or device.mem_gb + need > sim.capacity_gb + 1e-9:
                continue
            (on if device.on else off).append(g)
        if not sim.policy.serverless:
            off = []
        offers = {g: self.offer(g, j, rid, t) for g in on}
        safe = [g for g, o in offers.items() if self.safe(o)]
        if safe:
            if sim.policy.serverless:
                g = self.rank([(offers[g][0], g) for g in safe], t)[1]
            else:
                g = max(safe, key=lambda g: (sim.capacity_gb - sim.gpus[g].mem_gb, -g))
            return sim.load(g, j, t)
        offs = {g: self.offer(g, j, rid, t) for g in off}
        safe = [g for g, o in offs.items() if self.safe(o)]
        if safe:
            return sim.load(self.rank([(offs[g][0], g) for g in safe], t)[1], j, t)
        if not must:
            return None
        pool = offers or offs
        if not pool:
            return None
        return sim.load(self.rank([(o[1], g) for g, o in pool.items()], t)[1], j, t)

    def route_request(self, rid: int, t: float) -> None:
        """Route request ``rid`` at time ``t``: to the SLO-safe replica of its model with the
        lowest predicted TTFT (baselines) or lookup energy (2 % tie-break, stages 2+); else a new
        replica (:meth:`place`), else the replica with the lowest TTFT, else evict idle replicas;
        with no memory anywhere it retries after ``RETRY_S`` (never a silent drop)."""
        sim = self.sim
        j = int(sim.model_of[rid])
        reps = [device.tenants[j] for device in sim.gpus if device.on and not device.draining
                and j in device.tenants and not device.tenants[j].draining]
        offers = [(replica, *self.offer(replica.gpu, j, rid, t, replica)) for replica in reps]
        safe = [o for o in offers if o[2] <= sim.ttft_s and o[3] <= sim.tbt_s]
        chosen = None
        if safe:
            if not sim.policy.energy_routing:
                chosen = min(safe, key=lambda r: (r[2], r[0].gpu))[0]
            else:
                g = self.rank([(e, replica.gpu) for replica, e, _, _ in safe], t)[1]
                chosen = sim.gpus[g].tenants[j]
        if chosen is None:
            chosen = self.place(j, rid, t, must=not offers)
            if chosen is not None:
                sim.advance(chosen.gpu, t)
        if chosen is None and offers:
            chosen = min(offers, key=lambda r: (r[2], r[0].gpu))[0]
        if chosen is None and self.evict_for(j, t):
            chosen = self.place(j, rid, t)
        if chosen is None:
            # no replica and no memory: wait for memory (retry), never a silent drop
            sim.push(t + RETRY_S, RETRY, rid)
            return
        g = chosen.gpu
        sim.advance(g, t)
        chosen.queue.append(rid)
        chosen.queued_tokens += sim.prompt[rid]
        sim.gpu_of[rid] = g
        sim.replan(g, t)

    def evict_for(self, j: int, t: float) -> bool:
        """Unload idle replicas of other models (those with another replica first) until model
        ``j`` fits on some GPU. Returns whether it now fits."""
        sim = self.sim
        reps = {}
        for device in sim.gpus:
            for k in device.tenants:
                reps[k] = reps.get(k, 0) + 1
        idle = sorted(((reps[k] == 1, g, k) for g, device in enumerate(sim.gpus) if device.on
                       and not device.draining for k, replica in device.tenants.items()
                       if not replica.busy() and t >= replica.ready_at), key=lambda r: r)
        for _, g, k in idle:
            device = sim.gpus[g]
            sim.advance(g, t)
            del device.tenants[k]
            device.mem_gb -= sim.need_gb[k]
            if device.mem_gb + sim.need_gb[j] <= sim.capacity_gb + 1e-9:
                return True
        return any(not device.on for device in sim.gpus) and sim.policy.serverless

    def warm_start(self) -> None:
        """Initial serverless placement (stage 4 at time 0), SLO-aware by lookup: each model's
        steady need -- the share of a whole GPU at the top clock its mean request rate takes,
        prefill (rate x mean prompt / prefill tokens/s) plus decode (the TBT need at its
        Little's-law batch, times that batch's busy fraction) -- is packed best-fit decreasing
        onto GPUs with memory, keeping each GPU's total within ``1 - safety_margin``; a GPU is
        powered on only when no powered-on GPU can take a model. Rates are the trace's means
        (output lengths as predicted): the operator's forecast of the mix. Models that fit
        nowhere load on demand."""
        sim = self.sim
        cap = sim.capacity_gb + 1e-9
        n_m = len(sim.slots)
        dur = max(float(sim.arrival[-1] - sim.arrival[0]), 1.0) if len(sim.arrival) else 1.0
        counts = np.bincount(sim.model_of, minlength=n_m).astype(float)
        p_sum = np.bincount(sim.model_of, weights=sim.prompt, minlength=n_m)
        o_sum = np.bincount(sim.model_of, weights=sim.pred, minlength=n_m)  # predicted lengths
        need = np.zeros(n_m)
        for j, prof in enumerate(sim.slots):
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
            ratio = sim.tbt_s / nom
            v_d = (1 - m) / (ratio - m) if ratio > m + 1e-9 else 1.0
            need[j] = v_p + min(v_d, 1.0) * min(b, 1.0)
        limit = 1.0 - sim.params.safety_margin
        load = np.zeros(len(sim.gpus))
        for j in sorted(range(n_m), key=lambda j: (-need[j], -sim.need_gb[j], j)):
            room = [g for g, device in enumerate(sim.gpus) if device.mem_gb + sim.need_gb[j] <= cap]
            if not room:
                continue
            on_ok = [g for g in room if sim.gpus[g].on and load[g] + need[j] <= limit]
            off = [g for g in room if not sim.gpus[g].on]
            if on_ok:
                g = max(on_ok, key=lambda g: (load[g], -g))  # best fit: pack
            elif off:
                g = off[0]
            else:
                g = min(room, key=lambda g: (load[g], g))
            device = sim.gpus[g]
            if not device.on:
                sim.power_on(g, 0.0)
            device.tenants[j] = Replica(g, j, 0.0)
            device.mem_gb += sim.need_gb[j]
            load[g] += need[j]

    def static_start(self) -> None:
        """Initial placement of the non-serverless policies: all GPUs on at their policy clock,
        each model on the first GPU from ``model mod n_gpus`` on with memory (round-robin)."""
        sim = self.sim
        for g in range(len(sim.gpus)):
            sim.power_on(g, 0.0)
            sim.gpus[g].static_clock = sim.static_clocks.get(g, sim.kind.f_max_mhz)
            sim.gpus[g].clock = (sim.kind.f_max_mhz if sim.policy.clock == "max"
                                  else sim.gpus[g].static_clock)
        for j in range(len(sim.slots)):
            for k in range(len(sim.gpus)):
                g = (j + k) % len(sim.gpus)
                if sim.gpus[g].mem_gb + sim.need_gb[j] <= sim.capacity_gb + 1e-9:
                    replica = Replica(g, j, 0.0)
                    sim.gpus[g].tenants[j] = replica
                    sim.gpus[g].mem_gb += sim.need_gb[j]
                    break
