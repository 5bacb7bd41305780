"""EWR consolidation (Festina stage 5): every ``consolidation_s`` the Energy Waste Ratio (static
energy / total energy in the window) of each powered-on GPU is computed; GPUs above
``ewr_threshold`` whose models all fit elsewhere (memory + SLO lookup) are drained and powered
down. The EWR definition is ours: the staged paper text names the metric but not its formula.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the engine owns its consolidator
    from analytics.serving.engine import ServingEngine


class Consolidator:
    """Periodic EWR consolidation of one engine's pool."""

    def __init__(self, sim: ServingEngine):
        self.sim = sim

    def window_ewr(self, t: float) -> dict[int, float]:
        """Energy Waste Ratio of each powered-on, non-draining GPU since the last consolidation:
        static / total energy in the window (1 when it used none). GPUs without residents are
        powered off and left out. Opens the next window."""
        sim = self.sim
        for g, device in enumerate(sim.gpus):
            if device.on:
                sim.advance(g, t)
        ewr = {}
        for g, device in enumerate(sim.gpus):
            if not device.on or device.draining:
                continue
            energy = device.energy_j
            st = energy[2] + energy[3] - device.energy_at_window[0]
            tot = sum(energy) - device.energy_at_window[1]
            device.energy_at_window = [energy[2] + energy[3], sum(energy)]
            ewr[g] = st / tot if tot > 0 else 1.0
            if not device.tenants:
                sim.power_off(g)
                ewr.pop(g)
        return ewr

    def consolidate(self, t: float) -> None:
        """Drain GPUs whose EWR is above ``ewr_threshold``, most wasteful first, when every
        resident model fits on another powered-on GPU (memory, and SLO need within
        ``1 - safety_margin`` of its SMs); destinations are ranked by the lookup power the move
        adds (2 % tie-break). At least one GPU stays on."""
        sim = self.sim
        ewr = self.window_ewr(t)
        draining = set()
        for g in sorted(ewr, key=lambda g: (-ewr[g], g)):
            if ewr[g] < sim.params.ewr_threshold or len(ewr) - len(draining) <= 1:
                continue
            device = sim.gpus[g]
            plan, extra = {}, {}
            for j, replica in device.tenants.items():
                v_src = max(sim.scheduler.need(t, replica))
                cands = []
                for d, other in enumerate(sim.gpus):
                    if d == g or d in draining or not other.on or other.draining:
                        continue
                    busy = [o for o in other.tenants.values() if o.busy()]
                    load = sum(max(sim.scheduler.need(t, o)) for o in busy) + extra.get(d, 0.0)
                    fits_mem = j in other.tenants or other.mem_gb + extra.get(("m", d), 0.0) \
                        + sim.need_gb[j] <= sim.capacity_gb + 1e-9
                    if fits_mem and load + v_src <= 1.0 - sim.params.safety_margin:
                        # lookup cost: dynamic power the move adds at the clock it needs
                        c0 = sim.lookup.c(other.clock) if busy else 0
                        c1 = max(c0, sim.lookup.c(sim.grid.up(load + v_src)
                                                * sim.kind.f_max_mhz))
                        dyn_w = sim.placement.tenant_dyn_w
                        cost = dyn_w(replica, c1, min(max(v_src, 1e-3), 1.0)) + sum(
                            dyn_w(o, c1) - dyn_w(o, c0) for o in busy)
                        cands.append((max(cost, 0.0) + 1e-9, d))
                if not cands:
                    plan = None
                    break
                dest = sim.placement.rank(cands, t)[1]
                plan[j] = dest
                extra[dest] = extra.get(dest, 0.0) + v_src
                if j not in sim.gpus[dest].tenants:
                    extra[("m", dest)] = extra.get(("m", dest), 0.0) + sim.need_gb[j]
            if not plan:
                continue
            for j, d in plan.items():
                if j not in sim.gpus[d].tenants:
                    sim.advance(d, t)
                    sim.load(d, j, t)
                device.tenants[j].draining = True
            device.draining = True
            draining.add(g)
            sim.replan(g, t)
