"""The per-replica local scheduler (vLLM-like continuous batching on MPS SM shares) and the
per-GPU clock controller of each policy.

A tenant runs one prefill at a time (FIFO) and one decode batch in which every running sequence
gets one token per iteration. Without chunked prefill (default) a prefill pauses that tenant's
decode batch, so TBT includes prefill stalls, and the scheduler budgets them (:meth:`need`). With
``chunk_tokens = C`` (vLLM ``--enable-chunked-prefill`` with ``max_num_batched_tokens = C``) each
iteration carries the ``b`` decode tokens plus a prefill chunk of ``C - b`` prompt tokens:
iteration time = decode ITL(b) + prefill time of the chunk, power the time-weighted mix of the
two phases. New sequences join the batch when their prefill ends, up to the largest benchmarked
batch. Co-resident tenants run in parallel on their SM shares (MPS); they share one device clock,
set by the policy's clock rule (:meth:`LocalScheduler.control`; stage 3+: Festina Eq. 9).
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

import numpy as np

from analytics.serving.dvfs import decode_itl_s, dynamic_power_w, phase_clock_weighted, prefill_time_s
from analytics.serving.state import Replica

if TYPE_CHECKING:  # annotations only: the engine owns its scheduler
    from analytics.serving.engine import ServingEngine


def water_fill(needs: list[float]) -> list[float]:
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


class LocalScheduler:
    """Continuous batching, SLO needs and the clock / SM-share controller of one engine's GPUs."""

    def __init__(self, sim: ServingEngine):
        self.sim = sim

    def chunk(self, replica: Replica) -> float:
        """Prompt tokens per iteration of a chunked prefill beside ``len(heap)`` decode tokens."""
        sim = self.sim
        return max(min(sim.params.chunk_tokens - len(replica.running), replica.prefill_left), 1.0)

    def need(self, t: float, replica: Replica) -> tuple[float, float]:
        """Required effective speed ``x*share`` for prefill (TTFT) and decode (TBT) of a tenant
        now (0 when the phase has no work, > 1 when unreachable).

        TBT is a per-request mean, so the decode need follows each in-flight sequence's budget
        left, ``tbt * (out - 1) - (t - first_token)``, over its tokens left (never looser than
        the SLO itself). A running prefill stalls the batch (no chunked prefill), so it must
        also end within the smallest stall the in-flight sequences can absorb if decode then
        runs at the top clock."""
        sim = self.sim
        prof = sim.slots[replica.model]
        mixed = sim.params.chunk_tokens > 0 and bool(replica.running)
        if mixed:  # iteration = nom*m + (nom*(1-m) + chunk/prefill_tok_s) / v
            b = len(replica.running)
            nom_b = float(prof.itl_nom_ms(b)) / 1000.0
            m_b = float(prof.mem_fraction(b))
            ch = self.chunk(replica) if replica.prefill_rid >= 0 else max(sim.params.chunk_tokens - b, 1.0)
            a_mix = nom_b * (1 - m_b) + ch / prof.prefill_tok_s
        v_p = 0.0
        if replica.prefill_rid >= 0 or replica.queue:
            work = replica.prefill_left if replica.prefill_rid >= 0 else 0.0
            rids = ([replica.prefill_rid] if replica.prefill_rid >= 0 else []) + list(replica.queue)
            for k, rid in enumerate(rids):
                if k > 0:
                    work += sim.prompt[rid]
                left = sim.arrival[rid] + sim.ttft_s - max(t, replica.ready_at)
                rate = work / left if left > 1e-9 else np.inf
                if mixed:  # prompt tokens flow at chunk / iteration time
                    room = ch / rate - nom_b * m_b if np.isfinite(rate) else -1.0
                    v_p = max(v_p, a_mix / room if room > 1e-12 else np.inf)
                else:
                    v_p = max(v_p, rate / prof.prefill_tok_s)
                if k >= 8:  # later requests have later deadlines; 8 bound the search
                    break
        v_d = 0.0
        if replica.running:
            b = len(replica.running)
            nom = float(prof.itl_nom_ms(b)) / 1000.0
            m = float(prof.mem_fraction(b))
            # per in-flight sequence from its *predicted* length, as :meth:`predicted_left`
            # (a plain loop: batches are small, and no arrays per event)
            tight, stall, it = np.inf, np.inf, replica.iterations
            for _, rid in replica.running:
                end, n_dec = float(sim.pred_end[rid]), float(sim.pred[rid] - 1)
                if end < it - 1e-6:  # past its predicted end: expected at its next token
                    n_dec, end = n_dec + (it + 1.0 - end), it + 1.0
                left_tok = max(end - it, 1e-9)
                budget = sim.tbt_s * n_dec - (t - float(sim.t_first[rid]))
                tight = min(tight, budget / left_tok)
                stall = min(stall, budget - left_tok * nom)
            target = min(sim.tbt_s, tight)
            ratio = target / nom
            if mixed and replica.prefill_rid >= 0:  # a chunk rides in every iteration: no stall
                room = target - nom * m
                v_d = a_mix / room if room > 1e-12 else np.inf
            else:
                v_d = (1 - m) / (ratio - m) if ratio > m + 1e-9 else np.inf
            if replica.prefill_rid >= 0 and not mixed:
                need = replica.prefill_left / prof.prefill_tok_s
                v_p = max(v_p, need / stall if stall > 1e-9 else np.inf)
        return min(v_p, 1e3), min(v_d, 1e3)  # unreachable needs: capped, shares stay finite

    def predicted_left(self, replica: Replica) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The running sequences of ``replica`` as the scheduler sees them, from their
        *predicted* output lengths (:mod:`analytics.serving.prediction`), never the true ones:
        ``(request ids, decode tokens left (>= 1e-9), predicted decode tokens in all)``, each
        (b,). A sequence that has outlived its prediction is expected to end at its next token
        (its predicted total grows with it)."""
        sim = self.sim
        rids = np.fromiter((rid for _, rid in replica.running), np.int64, len(replica.running))
        it = replica.iterations
        end = sim.pred_end[rids]
        n_dec = sim.pred[rids] - 1
        over = end < it - 1e-6  # past its predicted end (beyond the event-time rounding)
        if over.any():
            n_dec = np.where(over, n_dec + (it + 1.0 - end), n_dec)
            end = np.where(over, it + 1.0, end)
        return rids, np.maximum(end - it, 1e-9), n_dec

    def settle(self, g: int, t: float):
        """Finish prefills / sequences due at ``t`` and start the next prefills."""
        sim = self.sim
        device = sim.gpus[g]
        for replica in device.tenants.values():
            if t < replica.ready_at - 1e-12:
                continue
            prof = sim.slots[replica.model]
            changed = True
            while changed:
                changed = False
                if replica.prefill_rid >= 0 and replica.prefill_left <= 1e-6:
                    rid = replica.prefill_rid
                    sim.t_first[rid] = t
                    if sim.output[rid] <= 1:
                        sim.t_done[rid] = t
                        sim.n_done += 1
                    else:  # execution: the true length; the scheduler: the predicted end
                        heapq.heappush(replica.running, (replica.iterations + sim.output[rid] - 1, rid))
                        sim.pred_end[rid] = replica.iterations + sim.pred[rid] - 1
                    replica.prefill_rid = -1
                    changed = True
                while replica.running and replica.running[0][0] <= replica.iterations + 1e-6:
                    _, rid = heapq.heappop(replica.running)
                    sim.t_done[rid] = t
                    sim.n_done += 1
                    changed = True
                if replica.prefill_rid < 0 and replica.queue and len(replica.running) < prof.max_batch:
                    rid = replica.queue.popleft()
                    replica.queued_tokens -= sim.prompt[rid]
                    replica.prefill_rid, replica.prefill_left = rid, float(sim.prompt[rid])
                    changed = True
            b = len(replica.running)
            wb = device.worst_batch
            wb[replica.model] = max(wb.get(replica.model, 0), b + (1 if replica.prefill_rid >= 0 else 0))
            backlog = (replica.prefill_left if replica.prefill_rid >= 0 else 0.0) + replica.queued_tokens
            device.worst_backlog[replica.model] = max(device.worst_backlog.get(replica.model, 0.0), backlog)

    def control(self, g: int, t: float) -> list[Replica]:
        """Set the GPU clock and the tenants' SM shares by the policy's clock rule; returns the
        active (loaded and busy) replicas.

        * ``max`` / ``static``: the top / provisioned clock, equal shares.
        * ``pinned`` (stage 2): equal shares, the clock raised to the neediest tenant's need
          times the tenant count, never below a phase's energy-optimal clock.
        * ``eq9`` (stage 3+): :meth:`eq9_clock_and_shares`.
        """
        sim = self.sim
        device = sim.gpus[g]
        act = [replica for replica in device.tenants.values() if t >= replica.ready_at - 1e-12 and
               (replica.prefill_rid >= 0 or replica.running)]
        policy = sim.policy
        if not act:
            device.clock = policy.idle_clock_mhz(device.static_clock, float(sim.grid.clocks[0]),
                                                 sim.kind.f_max_mhz)
            return act
        n = len(act)
        if policy.fixed_clock:
            x = 1.0 if policy.clock == "max" else device.static_clock / sim.kind.f_max_mhz
            for replica in act:
                replica.share = 1.0 / n
        else:
            needs = []
            for replica in act:
                v_p, v_d = self.need(t, replica)
                needs.append((v_p, v_d, min(max(v_p, v_d), 1.0)))  # unreachable: whole GPU
            if not policy.adaptive_share:  # stage 2: equal shares, pinned by the neediest
                x = 0.0
                for replica, (_, _, v) in zip(act, needs, strict=True):
                    xo = (sim.grid.xopt_prefill[replica.model] if replica.prefill_rid >= 0
                          else sim.grid.xopt_decode(replica.model, len(replica.running)))
                    x = max(x, v * n, xo)
                    replica.share = 1.0 / n
                x_need = n * max(v for _, _, v in needs)
            else:  # stage 3+: Festina Eq. 9 over phases, shares proportional to need
                x = self.eq9_clock_and_shares(act, needs)
                x_need = sum(v for _, _, v in needs)
            device.replans += 1
            device.need_bound += x_need >= x  # the SLO need, not the energy optimum, set it
            x = sim.grid.up(x)
        device.clock = x * sim.kind.f_max_mhz
        return act

    def phase_terms(self, replica: Replica, v_p: float, v_d: float) -> list[tuple]:
        """Festina Eq. 9 terms ``(P, T, x)`` of one busy replica: per phase that runs under the
        clock being set, the relative clock ``x`` (its need, never below the phase's
        energy-optimal clock), the phase's time ``T`` at that clock (prefill: the backlog;
        decode: the tokens left of the earliest-ending sequence, as predicted) and the
        whole-GPU power ``P`` (static floor included).

        Without chunked prefill a running prefill stalls the replica's decode batch: the batch
        does not run under this clock (the clock is set again when the prefill ends), so it
        gets no term; its TBT budget still bounds the prefill through the prefill need ``v_p``
        (:meth:`need`). Weighting a prefill's clock by a stalled batch's long decode time ran
        every such prefill near the decode clock, above its energy-optimal clock (1,436 vs
        1,243 MHz token-weighted): +32 % prefill energy and the +1.2 % of ablation stage 3
        over stage 2 on the full Azure conv trace (+1.9 % with 8 models; without it stage 3 is
        -0.01 % and 0.00 %). Festina applies Eq. 9 to the phases that share the device clock.
        With chunked prefill both phases run in every iteration and both are terms."""
        sim = self.sim
        prof, kind = sim.slots[replica.model], sim.kind
        stalled = replica.prefill_rid >= 0 and not sim.params.chunk_tokens
        terms = []
        if replica.prefill_rid >= 0:
            f_p = max(sim.grid.xopt_prefill[replica.model], min(v_p, 1.0))
            work = replica.prefill_left + replica.queued_tokens
            t_p = float(prefill_time_s(prof, kind, work, f_p * kind.f_max_mhz))
            p_p = kind.idle_w + float(dynamic_power_w(
                prof, kind, "prefill", 1, f_p * kind.f_max_mhz, 1.0, sim.dvfs))
            terms.append((p_p, t_p, f_p))
        if replica.running and not stalled:
            b = len(replica.running)
            f_d = max(sim.grid.xopt_decode(replica.model, b), min(v_d, 1.0))
            left = float(np.min(self.predicted_left(replica)[1]))
            t_d = float(decode_itl_s(prof, kind, b, f_d * kind.f_max_mhz)) * max(left, 1.0)
            p_d = kind.idle_w + float(dynamic_power_w(
                prof, kind, "decode", b, f_d * kind.f_max_mhz, 1.0, sim.dvfs))
            terms.append((p_d, t_d, f_d))
        return terms

    def eq9_clock_and_shares(self, act: list[Replica], needs: list[tuple]) -> float:
        """Stage 3+ clock: Festina Eq. 9 (:func:`analytics.serving.dvfs.phase_clock_weighted`)
        summed over the phases of all co-resident busy replicas, raised to the sum of their SLO
        needs; SM shares proportional to need (max-min fair when over-subscribed). Sets each
        replica's ``share``; returns the relative clock (before rounding up to the grid)."""
        terms = [term for replica, (v_p, v_d, _) in zip(act, needs, strict=True)
                 for term in self.phase_terms(replica, v_p, v_d)]
        x_eq9 = phase_clock_weighted(terms, 1.0)  # no work: the top clock
        total = sum(v for _, _, v in needs)
        x = max(x_eq9, total)
        if total > 1.0:  # over-subscribed: max-min fair (water-filling) shares
            shares = water_fill([v for _, _, v in needs])
        else:  # each tenant gets its need at the clock, the spare in proportion
            tot = total if total > 0 else 1.0
            shares = [(v / tot) if total > 0 else 1.0 / len(act) for _, _, v in needs]
        shares = [max(sh, 1e-3) for sh in shares]
        s = sum(shares)
        for replica, sh in zip(act, shares, strict=True):
            replica.share = sh / s
        return x

    def set_phases(self, g: int, t: float, act: list[Replica]) -> float:
        """Set each replica's phase, progress rates and dynamic power at the GPU's clock and its
        SM share (chunked prefill: an iteration carries the decode batch plus a prompt chunk,
        its power the time-weighted mix of the two phases). Returns the time of the GPU's next
        event (a prefill or a sequence ending, a replica's weights loaded; inf: none)."""
        sim = self.sim
        device = sim.gpus[g]
        nxt = np.inf
        for replica in device.tenants.values():
            replica.phase = ""
            if replica not in act:
                if t < replica.ready_at:
                    nxt = min(nxt, replica.ready_at)
                continue
            prof, kind, clock, share = sim.slots[replica.model], sim.kind, device.clock, replica.share
            if replica.prefill_rid >= 0 and replica.running and sim.params.chunk_tokens > 0:
                b = len(replica.running)
                ch = self.chunk(replica)
                t_d = float(decode_itl_s(prof, kind, b, clock, share))
                t_c = float(prefill_time_s(prof, kind, ch, clock, share))
                replica.phase = "mixed"
                replica.itl = t_d + t_c
                replica.prefill_rate = ch / replica.itl
                replica.prefill_frac = t_c / replica.itl
                replica.dyn_w = (t_d * float(dynamic_power_w(prof, kind, "decode", b, clock, share,
                                                             sim.dvfs))
                                 + t_c * float(dynamic_power_w(prof, kind, "prefill", 1, clock, share,
                                                               sim.dvfs))) / replica.itl
                nxt = min(nxt, t + max(replica.prefill_left, 0.0) / replica.prefill_rate,
                          t + max(replica.running[0][0] - replica.iterations, 0.0) * replica.itl)
            elif replica.prefill_rid >= 0:
                replica.phase = "prefill"
                replica.prefill_rate = 1.0 / float(prefill_time_s(prof, kind, 1.0, clock, share))
                replica.dyn_w = float(dynamic_power_w(prof, kind, "prefill", 1, clock, share, sim.dvfs))
                nxt = min(nxt, t + max(replica.prefill_left, 0.0) / replica.prefill_rate)
            else:
                b = len(replica.running)
                replica.phase = "decode"
                replica.itl = float(decode_itl_s(prof, kind, b, clock, share))
                replica.dyn_w = float(dynamic_power_w(prof, kind, "decode", b, clock, share, sim.dvfs))
                nxt = min(nxt, t + max(replica.running[0][0] - replica.iterations, 0.0) * replica.itl)
        return nxt
