"""Mutable state of one simulated pool: a model replica on a GPU (:class:`Replica`, vLLM-like
continuous batching state) and one GPU (:class:`GpuState`: power, clock, residents, energy
counters). The engine and its collaborators (local scheduler, placement, consolidation) read and
write these; nothing here decides anything.
"""

from __future__ import annotations

from collections import deque

#: event kinds of the engine's queue: wake a GPU, consolidate, retry a request
WAKE, CONSOLIDATE, RETRY = 1, 2, 3


class Replica:
    """One model replica ("tenant") on one GPU.

    Attributes
    ----------
    gpu, model : GPU index and model slot
    ready_at : time its weights are loaded, s (cold start = weights / PCIe bandwidth)
    share : MPS SM share (0 to 1)
    queue : request ids waiting for prefill (FIFO); ``queued_tokens`` their prompt tokens
    prefill_rid, prefill_left : request in prefill (-1: none) and its prompt tokens left
    running : heap of ``(iteration at which it ends, request id)`` of decoding sequences
    iterations : decode iterations done so far (fractional between events)
    draining : being moved away by consolidation
    phase : ``"prefill"``, ``"decode"``, ``"mixed"`` (chunked prefill) or ``""`` (idle/loading)
    prefill_rate : prompt tokens per s now; ``itl`` decode iteration time now, s
    dyn_w : dynamic power now, W; ``prefill_frac`` prefill share of a mixed iteration's time
    idle_since : start of the current idle spell (-1: busy)
    """

    __slots__ = ("gpu", "model", "share", "queue", "prefill_rid", "prefill_left", "running",
                 "iterations", "ready_at", "draining", "prefill_rate", "itl", "dyn_w", "phase",
                 "queued_tokens", "idle_since", "prefill_frac")

    def __init__(self, gpu: int, model: int, ready_at: float):
        self.gpu, self.model, self.ready_at = gpu, model, ready_at
        self.share = 1.0
        self.queue: deque = deque()
        self.prefill_rid, self.prefill_left = -1, 0.0
        self.running: list = []
        self.iterations = 0.0
        self.draining = False
        self.prefill_rate = self.itl = self.dyn_w = self.prefill_frac = 0.0
        self.phase = ""  # "prefill" | "decode" | "mixed" (chunked) | "" (idle or loading)
        self.queued_tokens = 0.0
        self.idle_since = -1.0

    def busy(self) -> bool:
        """True while it has a prefill, a queued request or a decoding sequence."""
        return self.prefill_rid >= 0 or bool(self.queue) or bool(self.running)


class GpuState:
    """One GPU of the pool.

    Attributes
    ----------
    on, draining : powered on; being emptied by consolidation
    clock : SM clock now, MHz; ``static_clock`` the provisioned clock (static DVFS)
    tenants : resident replicas by model slot; ``mem_gb`` their memory (weights + KV budget)
    last_t : time up to which power and progress are accounted, s
    version : bumped on every re-plan; stale wake-up events carry an older version
    energy_j : prefill, decode, static-while-busy, idle energy (J)
    energy_at_window : static and total energy at the last consolidation (J)
    worst_batch, worst_backlog : per model, the largest batch and prefill backlog (tokens) seen
    clock_tokens : prefill tokens, their sum of clock x tokens (MHz), decode tokens, theirs:
        the token-weighted clock of each phase
    clock_changes : power segments whose clock differs from the GPU's previous segment
    replans : clock settings of the GPU with a busy replica; ``need_bound`` those in which
        the SLO need, not the energy-optimal clocks (stage 2) or Eq. 9 (stage 3+), set the clock
    """

    __slots__ = ("on", "clock", "tenants", "last_t", "version", "mem_gb", "draining", "energy_j",
                 "energy_at_window", "static_clock", "worst_batch", "worst_backlog",
                 "clock_tokens", "clock_changes", "seg_clock", "replans", "need_bound")

    def __init__(self):
        self.on = False
        self.clock = 0.0
        self.tenants: dict[int, Replica] = {}
        self.last_t = 0.0
        self.version = 0
        self.mem_gb = 0.0
        self.draining = False
        self.energy_j = [0.0, 0.0, 0.0, 0.0]  # prefill, decode, static_busy, idle (J)
        self.energy_at_window = [0.0, 0.0]  # static, total at the last consolidation
        self.static_clock = 0.0
        self.worst_batch = {}
        self.worst_backlog = {}
        self.clock_tokens = [0.0, 0.0, 0.0, 0.0]
        self.clock_changes = 0
        self.seg_clock = -1.0  # clock of the GPU's last power segment
        self.replans = self.need_bound = 0
