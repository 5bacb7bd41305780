"""The discrete-event engine of the hybrid power simulator: one GPU pool shared by a batch
queue and an inference allocation with priority (hybrid power paper, Methods,
"Batch-inference co-simulation").

Shape (after vidur's event loop / entities / scheduler / metrics split): :class:`PowerPoolEngine`
owns the clock, the event heap, the job and pool state and the records; the scheduling
policies are registered objects in :mod:`analytics.power.scheduler`; the immutable records are
in :mod:`analytics.power.entities`; per-minute averages in :mod:`analytics.power.metrics`.
:func:`simulate` is the one-call entry point. Parameters: :class:`SimParams` (self-documenting
knobs, :mod:`analytics.params`) and :class:`SimResult` live in :mod:`analytics.power.runspec`.
"""

from __future__ import annotations

import array
import bisect
import heapq
import math
from bisect import insort
from heapq import heappush

import numpy as np
import pandas as pd

from analytics.power.entities import (
    EventKind,
    ReservationRecord,
    RunningSegment,
    SegmentRecord,
    minute_span,
)
from analytics.power.inference import InferenceLoad
from analytics.power.jobs import JobArrays
from analytics.power.metrics import per_minute
from analytics.power.runspec import SimParams, SimResult, records_frame
from analytics.power.scheduler import BACKFILL_POLICIES, QUEUE_ORDERS

ARRIVAL, SEGMENT_END, CAPACITY = EventKind.ARRIVAL, EventKind.SEGMENT_END, EventKind.CAPACITY
_new_tuple = tuple.__new__  # a named tuple without its Python-level constructor


class PowerPoolEngine:
    """One run of the batch queue beside the inference allocation on one GPU pool.

    State is held in named attributes: the clock ``now_s``; the event heap ``events`` of
    ``(time_s, seq, kind, payload)`` with ``seq`` from the per-run counter ``seq`` (arrivals are
    read in submit order from ``arrival_jobs`` beside the heap, each taking the ``seq`` it would
    have had as a heap entry, so the counts and tie order are those of one heap); the queue
    (a sorted list of policy ranks, ``order.rank[job]``; by rank ``queued``, ``need_by_rank``
    and ``segment_by_rank`` for the backfill scan, with the list mirrors ``need_rank_list`` and
    ``segment_rank_list`` for a short queue; the head reservation on a constant pool
    ``reserved_s``, valid while ``reserved_rank`` is the head's rank);
    ``running`` (job -> :class:`~analytics.power.entities.RunningSegment`), mirrored,
    when backfilling, in the slot arrays ``slot_ahead_rank`` (the job's queue rank if it has
    work left after the segment, else ``n_jobs``: later than any head), ``slot_end_s``,
    ``slot_hold_s`` (``end_s`` + that work left), ``slot_milli`` and ``slot_until_min`` (a
    free slot has milli 0 and ends at inf), so that a reservation is
    worked out in numpy; ``used_milli`` and ``batch_power_w`` of the running segments; per job
    ``remaining_s``, ``first_start_s``, ``end_s``, ``segment_count`` (with ``record=True``;
    Python lists while running: scalar access to lists is several times
    cheaper than to ndarrays); the per-minute plan ``demand_milli``, ``inference_power_w``,
    ``inference_alloc_milli``, ``batch_capacity_milli`` and ``booked_milli``. See
    :func:`simulate` for the semantics; :meth:`run` returns the :class:`SimResult`.
    """

    def __init__(self, jobs: JobArrays, params: SimParams, horizon_s: float,
                 inference: InferenceLoad | None = None, record: bool = False):
        self.jobs, self.params, self.horizon_s, self.record = jobs, params, horizon_s, record
        n_jobs = self.n_jobs = len(jobs)
        self.capacity_milli = params.capacity_gpus * 1000
        self.segment_s = math.inf if params.checkpoint_min is None else params.checkpoint_min * 60.0
        self.order = QUEUE_ORDERS[params.scheduler](jobs.submit_s, jobs.gpu_milli, jobs.runtime_s)
        self.rank = self.order.rank  # ndarray: queue position order of each job
        self.rank_list = self.rank.tolist()
        self.job_of_rank = np.argsort(self.rank)
        self.job_of_rank_list = self.job_of_rank.tolist()
        self.policy = BACKFILL_POLICIES["easy" if params.backfill else "none"](
            params.backfill_depth)
        self.n_min = int(math.ceil(horizon_s / 60.0))
        self.constant_capacity = inference is None  # batch capacity never changes: fast path
        self._plan_capacity(inference)
        self.gpu_milli = jobs.gpu_milli.tolist()  # python ints: exact occupancy arithmetic
        self.power_per_gpu_w = jobs.power_per_gpu_w.tolist()
        remaining = jobs.runtime_s.astype(float)
        self.remaining_s = remaining.tolist()
        self.first_start_s = [math.nan] * n_jobs
        self.end_s = [math.nan] * n_jobs
        self.segment_count = [0] * n_jobs
        self.queue: list[int] = []
        # the head reservation on a constant pool, valid while ``reserved_rank`` is the head's
        # rank (see EasyBackfilling.schedule_constant; -1: none held)
        self.reserved_rank = -1
        self.reserved_s = math.inf
        # by rank, for the backfill scan: queued or not, GPU request, next segment length;
        # stored through a bytearray / array (scalar stores cheaper than an ndarray's), read
        # by the scan as ndarray views of the same memory
        self.queued_flags = bytearray(n_jobs)
        self.queued = np.frombuffer(self.queued_flags, bool) if n_jobs else np.zeros(0, bool)
        self.need_by_rank = jobs.gpu_milli[self.job_of_rank]
        self.segment_flat = array.array("d", np.minimum(remaining, self.segment_s)[
            self.job_of_rank].tobytes())
        self.segment_by_rank = np.frombuffer(self.segment_flat) if n_jobs else np.zeros(0)
        self.need_rank_list = self.need_by_rank.tolist()  # list mirrors for short queues
        self.segment_rank_list = self.segment_by_rank.tolist()
        self.running: dict[int, RunningSegment] = {}
        self.backfill = params.backfill
        # a reservation on the per-minute plan reads the slot arrays, one on a constant pool
        # walks ``ends_sorted`` (``(end_s, job)`` of started segments, ascending: :meth:`live_ends`)
        self.track_slots = params.backfill and not self.constant_capacity
        self.track_ends = params.backfill and self.constant_capacity
        self.ends_sorted: list[tuple[float, int]] = []
        # queued ``(segment_s, rank)``, a lazy min-heap (:meth:`shortest_queued_s`)
        self.queued_segments: list[tuple[float, int]] = []
        self._init_slots(16)
        self.used_milli = 0
        self.batch_power_w = 0.0
        self.now_s = 0.0
        self.n_events = 0
        self.state_times_s: list[float] = []
        self.state_rows: list = []  # used_milli, batch_power_w, queued jobs per instant, flat
        self.segment_records: list[SegmentRecord] = []
        self.reservation_records: list[ReservationRecord] = []
        self.event_times_s: list[float] = []
        self._seed_events(inference is not None)

    # --- set-up ---------------------------------------------------------------------------------

    def _plan_capacity(self, inference: InferenceLoad | None) -> None:
        """Per-minute inference demand, its priority allocation and the batch capacity left,
        over the horizon plus the longest span one segment can book."""
        cap = self.capacity_milli
        cap_gpus = self.params.inference_cap_gpus
        inference_cap = cap if cap_gpus is None else min(cap, cap_gpus * 1000)
        runtime = self.jobs.runtime_s
        longest_s = float(min(self.segment_s, runtime.max())) if len(self.jobs) else 60.0
        self.lookahead_min = int(math.ceil(longest_s / 60.0)) + 2  # minutes a segment can span
        self.longest_segment_s = longest_s
        self.min_need_milli = int(self.jobs.gpu_milli.min()) if len(self.jobs) else 0
        total_min = self.n_min + self.lookahead_min + 1
        self.demand_milli = np.zeros(total_min, np.int64)
        self.inference_power_w = np.zeros(total_min)
        if inference is not None:
            k = min(self.n_min, inference.demand_gpus.size)
            self.demand_milli[:k] = inference.demand_gpus[:k] * 1000
            self.inference_power_w[:k] = inference.power_full_w[:k]
        self.inference_alloc_milli = np.minimum(self.demand_milli, inference_cap)
        self.batch_capacity_milli = cap - self.inference_alloc_milli
        self.booked_milli = np.zeros(total_min, np.int64)  # booked by running segments

    def _init_slots(self, size: int) -> None:
        """Slot arrays mirroring ``running`` (grown by doubling in :meth:`_take_slot`)."""
        self.slot_ahead_rank = np.zeros(size, np.int64)
        self.slot_end_s = np.full(size, math.inf)
        self.slot_hold_s = np.full(size, math.inf)
        self.slot_milli = np.zeros(size, np.int64)
        self.slot_until_min = np.zeros(size, np.int64)
        self.free_slots = list(range(size - 1, -1, -1))
        self.slot_high = 0  # slots in [slot_high, size) were never used

    def _take_slot(self) -> int:
        """A free slot index (the arrays double when full)."""
        if not self.free_slots:
            size = self.slot_ahead_rank.size
            for name in ("slot_ahead_rank", "slot_end_s", "slot_hold_s", "slot_milli",
                         "slot_until_min"):
                old = getattr(self, name)
                grown = np.full(2 * size, math.inf if old.dtype.kind == "f" else 0, old.dtype)
                grown[:size] = old
                setattr(self, name, grown)
            self.free_slots = list(range(2 * size - 1, size - 1, -1))
        return self.free_slots.pop()

    def _seed_events(self, with_capacity: bool) -> None:
        """Arrivals before the horizon (in submit order, ties by job index: the order a heap of
        ``(submit_s, seq)`` pops them), then the first capacity change (minute 0)."""
        self.events: list[tuple] = []
        submit = self.jobs.submit_s
        order = np.argsort(submit, kind="stable")
        order = order[submit[order] < self.horizon_s]
        self.arrival_jobs = order.tolist()
        self.arrival_s = submit[order].tolist() + [math.inf]  # inf: past the last arrival
        self.seq = len(self.arrival_jobs)
        if with_capacity:
            self.push(0.0, CAPACITY, 0)

    # --- events ---------------------------------------------------------------------------------

    def push(self, time_s: float, kind: int, payload: int) -> None:
        """Schedule an event; ties at one instant resolve in insertion order."""
        heapq.heappush(self.events, (time_s, self.seq, kind, payload))
        self.seq += 1

    def run(self) -> SimResult:
        """Process every event before the horizon; all events at one instant are applied, then
        the policy schedules once and the state is recorded.

        The events of an instant: arrivals (in submit order) first, then the heap's. An
        arrival's ``seq`` is below every pushed event's (arrivals are numbered first), so this is
        the heap order of one ``(time_s, seq)`` heap; within an instant only the order of segment
        ends matters (the float running sum of batch power), and it is kept. The policy's pass
        is :meth:`~analytics.power.scheduler.HeadFirst.schedule_constant` or ``schedule_booked``
        (what its ``schedule`` dispatches to), called when the queue is not empty.

        Raises
        ------
        RuntimeError
            If an event would move time backwards (an engine bug, never expected).
        """
        events, arrival_s, arrival_jobs = self.events, self.arrival_s, self.arrival_jobs
        horizon_s, record, queue, running = self.horizon_s, self.record, self.queue, self.running
        policy, enqueue, end_segment = self.policy, self.enqueue, self.end_segment
        schedule = policy.schedule_constant if self.constant_capacity else policy.schedule_booked
        times_append, rows_extend = self.state_times_s.append, self.state_rows.extend
        heappop = heapq.heappop
        i, n_events, last_s = 0, self.n_events, self.now_s
        self.snapshot(0.0)
        while True:
            now_s = arrival_s[i]  # inf once every arrival is in (the list's last entry)
            if events and events[0][0] < now_s:
                now_s = events[0][0]
            if now_s >= horizon_s:
                break
            if now_s < last_s:
                raise RuntimeError(f"time ran backwards: event at {now_s} s after {last_s} s")
            self.now_s = last_s = now_s
            count = 0
            while arrival_s[i] == now_s:  # never inf: now_s < horizon_s
                enqueue(arrival_jobs[i])
                i += 1
                count += 1
            while events and events[0][0] == now_s:
                _, _, kind, payload = heappop(events)
                count += 1
                if kind == SEGMENT_END:
                    end_segment(payload, now_s)
                else:
                    self.change_capacity(payload)
            n_events += count
            if record:
                self.event_times_s.extend([now_s] * count)
            if not running:
                self.batch_power_w = 0.0  # drop float residue of the running sum
            if queue:
                schedule(self, now_s)
            times_append(now_s)  # = self.snapshot(now_s), inlined
            rows_extend((self.used_milli, self.batch_power_w, len(queue)))
        self.next_arrival, self.n_events = i, n_events
        return self.result()

    def change_capacity(self, minute: int) -> None:
        """Minute ``minute`` starts: inference takes its new allocation (read from the plan when
        the state is recorded, :meth:`states`); the next change is scheduled."""
        if minute + 1 < self.n_min:
            self.push((minute + 1) * 60.0, CAPACITY, minute + 1)

    def end_segment(self, job: int, now_s: float) -> None:
        """Release the segment's GPUs; a job with work left requeues at once with its original
        priority (paper: segment k+1 is eligible immediately after segment k)."""
        _, milli, until, slot = self.running.pop(job)
        self.used_milli -= milli
        self.batch_power_w -= milli / 1000.0 * self.power_per_gpu_w[job]
        if slot >= 0:  # mirrored in the slot arrays (per-minute plan)
            self.slot_milli[slot] = 0
            self.slot_end_s[slot] = math.inf
            self.slot_hold_s[slot] = math.inf
            self.free_slots.append(slot)
        if until and int(now_s // 60.0) < until:  # 0 on a constant pool: nothing booked
            self.booked_milli[int(now_s // 60.0):until] -= milli
        if self.remaining_s[job] > 0:
            self.enqueue(job)  # its original priority; a rank ahead of the head drops the reservation
        else:
            self.end_s[job] = now_s

    # --- queue and pool -------------------------------------------------------------------------

    def enqueue(self, job: int) -> None:
        """Insert ``job`` in policy order."""
        rank = self.rank_list[job]
        queue = self.queue
        insort(queue, rank)
        self.queued_flags[rank] = True
        if self.backfill:
            heap = self.queued_segments
            if len(heap) > 2 * len(queue) + 64:
                self.rebuild_queued_segments()
            else:
                heappush(heap, (self.segment_rank_list[rank], rank))
        if rank < self.reserved_rank:  # a new head
            self.reserved_rank = -1

    def head(self) -> int:
        """The job at the queue head (the queue must not be empty)."""
        return self.job_of_rank_list[self.queue[0]]

    def pop_head(self) -> int:
        """Remove the queue head; returns its job."""
        rank = self.queue.pop(0)
        self.queued_flags[rank] = False
        self.reserved_rank = -1
        job = self.job_of_rank_list[rank]
        return job

    def remove_entry(self, entry: int) -> None:
        """Remove one queue entry (the rank of a backfilled job)."""
        del self.queue[bisect.bisect_left(self.queue, entry)]
        self.queued_flags[entry] = False

    def next_segment_s(self, job: int) -> float:
        """Length of ``job``'s next segment, s."""
        return min(self.remaining_s[job], self.segment_s)

    def start_segment(self, job: int, now_s: float) -> None:
        """Start ``job``'s next segment: it holds its GPUs (booked per minute on a varying pool)
        until it ends (paper: segments are never preempted). Attributes are read once into
        locals: this runs once per segment, the hottest call of a run."""
        remaining_s, segment_s = self.remaining_s, self.segment_s
        remaining = remaining_s[job]
        duration_s = segment_s if segment_s < remaining else remaining
        milli = self.gpu_milli[job]
        booked_until = 0
        if not self.constant_capacity:
            first, booked_until = minute_span(now_s, duration_s)
            self.booked_milli[first:booked_until] += milli
        remaining -= duration_s
        if remaining < 1e-9:
            remaining = 0.0
        remaining_s[job] = remaining
        end_s = now_s + duration_s
        self.used_milli += milli
        power_w = milli / 1000.0 * self.power_per_gpu_w[job]
        self.batch_power_w += power_w
        slot = -1
        if self.backfill:
            rank = self.rank_list[job]
            self.segment_flat[rank] = self.segment_rank_list[rank] = (
                segment_s if segment_s < remaining else remaining)
            if self.track_ends:
                insort(self.ends_sorted, (end_s, job))
            else:
                slot = self._book_slot(rank, remaining, end_s, milli, booked_until)
        self.running[job] = _new_tuple(RunningSegment, (end_s, milli, booked_until, slot))
        seq = self.seq
        heappush(self.events, (end_s, seq, SEGMENT_END, job))
        self.seq = seq + 1
        first_start_s = self.first_start_s
        if first_start_s[job] != first_start_s[job]:  # NaN: the job's first segment
            first_start_s[job] = now_s
        if self.record:
            self.segment_records.append(SegmentRecord(
                job, self.segment_count[job], now_s, end_s, milli, power_w))
            self.segment_count[job] += 1

    def _book_slot(self, rank: int, remaining_s: float, end_s: float, milli: int,
                   booked_until: int) -> int:
        """Mirror a started segment in the slot arrays (per-minute plan); returns its slot."""
        free_slots = self.free_slots
        slot = free_slots.pop() if free_slots else self._take_slot()
        if slot >= self.slot_high:
            self.slot_high = slot + 1
        self.slot_ahead_rank[slot] = rank if remaining_s > 0 else self.n_jobs
        self.slot_end_s[slot] = end_s
        self.slot_hold_s[slot] = end_s + remaining_s
        self.slot_milli[slot] = milli
        self.slot_until_min[slot] = booked_until
        return slot

    def live_ends(self, now_s: float) -> int:
        """Index of the first live entry of ``ends_sorted`` at ``now_s``: entries ending before
        ``now_s`` have ended (segment ends are events, applied in time order before the pass);
        an entry ending at ``now_s`` may still run (a segment of about 1e-9 s started at it) and
        is checked against ``running``. The dead prefix is dropped once it is half the list."""
        ends = self.ends_sorted
        lo = bisect.bisect_left(ends, (now_s, -1))
        if lo and 2 * lo >= len(ends):
            del ends[:lo]
            lo = 0
        return lo

    def rebuild_queued_segments(self) -> None:
        """Rebuild ``queued_segments`` from the queue (every queued rank's next segment, the
        one just queued included). Called, instead of a push, once stale entries make the heap
        more than twice the queue (+64), so its memory stays in proportion to the queue."""
        segment_of = self.segment_rank_list
        heap = self.queued_segments
        heap[:] = [(segment_of[r], r) for r in self.queue]
        heapq.heapify(heap)

    def shortest_queued_s(self) -> float:
        """The shortest next segment of a queued job, s (inf: none queued): entries of
        ``queued_segments`` for a rank no longer queued, or queued with another next segment,
        are dropped as they reach the top."""
        heap, queued, segment_of = self.queued_segments, self.queued_flags, self.segment_rank_list
        while heap:
            segment_s, rank = heap[0]
            if queued[rank] and segment_of[rank] == segment_s:
                return segment_s
            heapq.heappop(heap)
        return math.inf

    def record_reservation(self, job: int, now_s: float, reservation_s: float) -> None:
        """Keep a reservation record (``record=True`` only)."""
        if self.record:
            self.reservation_records.append(ReservationRecord(job, now_s, reservation_s))

    # --- records --------------------------------------------------------------------------------

    def snapshot(self, now_s: float) -> None:
        """Record the batch state from ``now_s`` on: GPUs in use, batch power, queued jobs
        (inference's share follows from the minute, :meth:`states`)."""
        self.state_times_s.append(now_s)
        self.state_rows.extend((self.used_milli, self.batch_power_w, len(self.queue)))

    def states(self) -> tuple[np.ndarray, np.ndarray]:
        """The recorded states as ``(times_s, states)``: ndarrays of shape (n,) and (n, 6),
        columns :data:`analytics.power.metrics.STATE_COLUMNS`. Inference gets
        ``min(allocation, pool - batch in use)`` of its minute's plan (the last minute after the
        horizon) and draws its full-service power times the served fraction of its demand."""
        times_s = np.asarray(self.state_times_s)
        rows = np.asarray(self.state_rows, float).reshape(-1, 3)
        if self.constant_capacity:  # no inference: none served, none demanded
            states = np.zeros((times_s.size, 6))
            states[:, 0::2] = rows
            return times_s, states
        shown = max(self.n_min, 1)
        minute = np.minimum((times_s // 60.0).astype(np.int64), self.n_min - 1)
        used = rows[:, 0].astype(np.int64)
        served = np.maximum(np.minimum(self.inference_alloc_milli[:shown][minute],
                                       self.capacity_milli - used), 0)
        demand = self.demand_milli[:shown][minute]
        power = np.zeros(times_s.size)
        np.divide(self.inference_power_w[:shown][minute] * served, demand, out=power,
                  where=demand > 0)
        return times_s, np.column_stack([rows[:, 0], served, rows[:, 1], power, rows[:, 2],
                                         demand]).astype(float)

    def result(self) -> SimResult:
        """The run's records as a :class:`SimResult`."""
        jobs = self.jobs
        minutes = per_minute(*self.states(), self.n_min, self.horizon_s)
        job_frame = pd.DataFrame({"job": np.arange(len(jobs)), "submit_s": jobs.submit_s,
                                  "first_start_s": np.asarray(self.first_start_s, float),
                                  "end_s": np.asarray(self.end_s, float),
                                  "gpu_milli": jobs.gpu_milli, "runtime_s": jobs.runtime_s,
                                  "group": jobs.group}, copy=False)
        return SimResult(minutes, job_frame, records_frame(self.segment_records, SegmentRecord),
                         records_frame(self.reservation_records, ReservationRecord),
                         np.asarray(self.event_times_s), self.n_events, self.params.capacity_gpus)


def simulate(jobs: JobArrays, params: SimParams, horizon_s: float,
             inference: InferenceLoad | None = None, record: bool = False) -> SimResult:
    """Run the batch queue beside the inference allocation on one GPU pool over ``[0, horizon_s)``.

    Events ``(time_s, seq, kind, payload)`` sit in a heap; ``seq`` comes from a counter local to
    this call, so ties resolve in insertion order and two runs on equal inputs are identical. All
    events at one instant are applied, then the scheduler runs once.

    * **Inference** (hybrid power paper, Methods, "Batch-inference co-simulation"): it has
      priority and its realised allocation is exogenous to the batch scheduler, which operates
      only on the remaining capacity. Minute ``m`` gives inference ``a(m) = min(demand, cap, C)``
      GPUs and leaves ``C - a(m)`` to batch; a **capacity change** event starts every minute.
    * **Arrival**: the job joins the queue.
    * **Segment end**: the segment's GPUs are released; a checkpointed job with work left
      rejoins the queue at once with its original priority (paper: segment k+1 becomes eligible
      immediately after segment k).
    * **Scheduling**: a started segment holds its GPUs for its whole length (paper: never
      preempted), so a segment may start only if it fits under the batch capacity left by
      inference in every minute it spans, beside the segments already running (the inference
      series is the exogenous plan the scheduler sees). Queue order is FCFS (submit time) or
      SWF (GPU request, then runtime). The head starts while it fits. A blocked head gets a
      reservation: the first minute from which its segment fits throughout, counting running
      segments (a running job ahead of the head in queue order is counted until its whole job
      ends, since its next segment requeues ahead of the head). A later job may backfill only if
      it fits now and its segment ends by the reservation, so it cannot delay the head (paper:
      "Later jobs may then start out of order only if they can complete before that reserved
      time"). Capacity is booked per whole minute, so a segment ending mid-minute frees that
      minute only when it ends (conservative by under a minute).

    Parameters
    ----------
    jobs : the batch jobs (submit times in seconds from 0)
    params : pool size, scheduler, checkpoint length, inference cap
    horizon_s : end of the run, s
    inference : per-minute demand (minute ``m`` covers ``[60 m, 60 m + 60)``); ``None`` = none
    record : keep segments, reservations and event times (tests; costs memory)

    Returns
    -------
    SimResult

    Raises
    ------
    RuntimeError
        If an event would move time backwards (an engine bug, never expected).
    """
    return PowerPoolEngine(jobs, params, horizon_s, inference, record).run()
