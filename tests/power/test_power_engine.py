"""Hybrid power engine (:mod:`analytics.power.engine`, :mod:`analytics.power.scheduler`):
invariants, regressions, closed-form queueing, policy behaviour and determinism."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analytics import power as powersim
from analytics.power import InferenceLoad, JobArrays, SimParams, simulate


def _jobs(submit, gpus, runtime, power=400.0):
    n = len(submit)
    return JobArrays.build(submit, np.asarray(gpus) * 1000, runtime, np.full(n, power))


def _max_occupancy(segments: pd.DataFrame) -> int:
    """Largest sum of gpu_milli over segments running at one instant (ends free before starts)."""
    ev = [(r.start_s, 1, r.gpu_milli) for r in segments.itertuples()]
    ev += [(r.end_s, 0, -r.gpu_milli) for r in segments.itertuples()]
    level = peak = 0
    for _, _, d in sorted(ev):
        level += d
        peak = max(peak, level)
    return peak


# --- engine invariants ---------------------------------------------------------------------------

@pytest.mark.parametrize("checkpoint_min", [None, 20.0])
def test_single_job_energy_is_power_times_time(checkpoint_min):
    jobs = _jobs([30.0], [2], [5400.0], power=400.0)
    res = simulate(jobs, SimParams(4, checkpoint_min=checkpoint_min), 3 * 3600.0, record=True)
    energy_j = float((res.minutes["total_power_w"] * 60.0).sum())
    assert energy_j == pytest.approx(2 * 400.0 * 5400.0, rel=1e-9)
    seg = res.segments
    assert float(((seg["end_s"] - seg["start_s"]) * seg["power_w"]).sum()) == \
        pytest.approx(2 * 400.0 * 5400.0)
    assert len(seg) == (1 if checkpoint_min is None else 5)  # 5400 s in 20-minute segments
    assert res.jobs["end_s"][0] == pytest.approx(30.0 + 5400.0)


job_lists = st.lists(st.tuples(st.floats(0, 20_000), st.integers(1, 8), st.floats(60, 20_000)),
                     min_size=2, max_size=25)


def test_requeued_job_ahead_of_head_is_not_counted_twice_in_its_end_minute():
    """Regression (Hypothesis find): a checkpointed job ahead of the head was subtracted twice in
    the minute its segment ends (booking + hold-on), pushing the head's reservation from 2700 s
    to 3060 s, so a backfilled segment ran to 2701 s and the head started after 2700 s."""
    jobs = [(0.0, 1, 841.0), (0.0, 3, 3001.0), (1.0, 3, 3001.0), (1.0, 1, 2640.0),
            (1.0, 4, 301.0), (1.0, 1, 2700.0)]
    submit, gpus, runtime = zip(*jobs, strict=True)
    zero = InferenceLoad(np.zeros(20_000, np.int64), np.zeros(20_000))
    res = simulate(_jobs(submit, gpus, runtime), SimParams(10, "fcfs", True, 10.0), 1e6, zero,
                   record=True)
    head = res.reservations[res.reservations["job"] == 4]
    assert (head["reservation_s"] == 2700.0).all()
    assert res.segments[res.segments["job"] == 4]["start_s"].min() <= 2700.0


def test_segment_overrunning_a_minute_boundary_by_float_noise_still_holds_its_gpus():
    """Regression (Hypothesis find): an 8-GPU segment from 6e-8 s to 60.00000006 s was booked for
    minute 0 only, so a 1-GPU job started at 60 s beside it on an 8-GPU pool."""
    zero = InferenceLoad(np.zeros(20_000, np.int64), np.zeros(20_000))
    res = simulate(_jobs([1.0, 5.960464477539063e-08], [1, 8], [60.0, 60.0]), SimParams(8),
                   1e6, zero, record=True)
    assert _max_occupancy(res.segments) <= 8 * 1000


@settings(max_examples=60, deadline=None)
@given(jobs=job_lists, capacity=st.integers(8, 16),
       checkpoint=st.sampled_from([None, 10.0, 45.0]), booked=st.booleans())
def test_backfilling_never_delays_the_head_reservation(jobs, capacity, checkpoint, booked):
    submit, gpus, runtime = zip(*jobs, strict=True)
    # booked=True runs the per-minute booking path (an all-zero inference plan), else the
    # constant-capacity fast path
    horizon = 1e6
    zero = InferenceLoad(np.zeros(int(horizon // 60), np.int64), np.zeros(int(horizon // 60)))
    res = simulate(_jobs(submit, gpus, runtime), SimParams(capacity, "fcfs", True, checkpoint),
                   horizon, zero if booked else None, record=True)
    seg = res.segments
    for r in res.reservations.itertuples():
        assert math.isfinite(r.reservation_s)
        mine = seg[(seg["job"] == r.job) & (seg["start_s"] >= r.time_s - 1e-9)]
        # the head's next segment starts no later than the reservation it was given
        assert not mine.empty and mine["start_s"].min() <= r.reservation_s + 1e-6
    # time never runs backwards; every job finishes; occupancy never exceeds the pool
    assert (np.diff(res.event_times_s) >= 0).all()
    assert res.jobs["end_s"].notna().all()
    assert _max_occupancy(seg) <= capacity * 1000
    assert seg.groupby("job").apply(lambda g: (g["end_s"] - g["start_s"]).sum(),
                                    include_groups=False).to_numpy() == \
        pytest.approx(np.asarray(runtime)[np.argsort(submit, kind="stable")])


@settings(max_examples=30, deadline=None)
@given(jobs=job_lists, capacity=st.integers(8, 16), demand=st.lists(st.integers(0, 12),
                                                                     min_size=5, max_size=40),
       scheduler=st.sampled_from(["fcfs", "swf"]), cap=st.sampled_from([None, 4]))
def test_occupancy_never_exceeds_capacity_with_inference(jobs, capacity, demand, scheduler, cap):
    submit, gpus, runtime = zip(*jobs, strict=True)
    n_min = 600
    d = np.resize(np.asarray(demand), n_min)
    load = InferenceLoad(d, d * 500.0)
    res = simulate(_jobs(submit, gpus, runtime), SimParams(capacity, scheduler, True, 30.0, cap),
                   n_min * 60.0, load, record=True)
    m = res.minutes
    assert (m["batch_gpus"] + m["inference_gpus"] <= capacity + 1e-9).all()
    # inference has priority: it always gets min(demand, cap, pool)
    allowed = np.minimum(m["inference_demand_gpus"], min(cap or capacity, capacity))
    assert np.allclose(m["inference_gpus"], allowed)
    assert (np.diff(res.event_times_s) >= 0).all()
    # batch occupancy plus what inference got never passes the pool at any instant
    assert _max_occupancy(res.segments) <= capacity * 1000


def test_inference_has_priority_and_batch_fits_around_it():
    # pool of 10; inference needs 6 GPUs in minutes 5-14. A 6-GPU, 10-minute segment submitted
    # at 130 s would overlap that window with only 4 GPUs left, so it waits for minute 15 (its
    # reservation); a 2-GPU, 5-minute job behind it fits and ends before that, so it backfills.
    jobs = _jobs([0.0, 130.0, 140.0], [8, 6, 2], [120.0, 600.0, 300.0])
    d = np.zeros(30, np.int64)
    d[5:15] = 6
    res = simulate(jobs, SimParams(10, checkpoint_min=None), 30 * 60.0,
                   InferenceLoad(d, d * 600.0), record=True)
    assert res.jobs["first_start_s"].tolist() == [0.0, 900.0, 140.0]
    assert res.reservations["reservation_s"].iloc[0] == 900.0
    m = res.minutes
    assert (m["inference_gpus"] == m["inference_demand_gpus"]).all()  # never short of GPUs
    assert (m["batch_gpus"] + m["inference_gpus"] <= 10 + 1e-9).all()
    assert m.loc[7, "inference_power_w"] == pytest.approx(6 * 600.0)


def test_mmc_utilisation_and_wait_match_closed_form():
    c, mu, rho = 8, 1 / 600.0, 0.7
    lam = rho * c * mu
    rng = np.random.default_rng(7)
    n = 20_000
    submit = np.cumsum(rng.exponential(1 / lam, n))
    runtime = rng.exponential(1 / mu, n)
    horizon = float(submit[-1])
    res = simulate(_jobs(submit, np.ones(n, int), runtime), SimParams(c, checkpoint_min=None),
                   horizon)
    busy = res.minutes["batch_gpus"].iloc[len(res.minutes) // 20:]
    assert busy.mean() / c == pytest.approx(lam / (c * mu), abs=0.02)
    # Erlang C: P(wait) and mean wait in queue of M/M/c (FCFS, one GPU per job)
    a = lam / mu
    tail = a ** c / math.factorial(c) / (1 - rho)
    p_wait = tail / (sum(a ** k / math.factorial(k) for k in range(c)) + tail)
    wq = p_wait / (c * mu - lam)
    jobs = res.jobs.dropna(subset=["first_start_s"]).iloc[n // 20:]
    assert (jobs["first_start_s"] - jobs["submit_s"]).mean() == pytest.approx(wq, rel=0.15)


def test_same_seed_same_records_and_swf_order():
    jobs_df = _synthetic_trace(np.random.default_rng(3))
    inputs = powersim.prepare_inputs(jobs_df, None, np.random.default_rng(0), "synthetic jobs")
    sc = powersim.Scenario(inference_share=0.4, utilization=0.7, n_gpus=32, days=1,
                           warmup_days=0.5, checkpoint_min=30)
    a = powersim.run_scenario(inputs, sc, np.random.default_rng(11))
    b = powersim.run_scenario(inputs, sc, np.random.default_rng(11))
    c = powersim.run_scenario(inputs, sc, np.random.default_rng(12))
    pd.testing.assert_frame_equal(a.frame, b.frame)
    assert a.metrics == b.metrics
    assert not a.frame["total_power_w"].equals(c.frame["total_power_w"])
    assert inputs.synthetic and "SYNTHETIC" in inputs.inference_label
    # SWF starts the smallest waiting job first
    jobs = _jobs([0.0, 1.0, 2.0, 3.0], [4, 4, 2, 1], [100.0, 50.0, 80.0, 90.0])
    res = simulate(jobs, SimParams(4, "swf", checkpoint_min=None), 1000.0)
    # at 100 s the 1- and 2-GPU jobs start (smallest first), the 4-GPU job (submitted first
    # of the three) waits for both
    assert res.jobs["first_start_s"].tolist() == [0.0, 190.0, 100.0, 100.0]


def _synthetic_trace(rng, days=20) -> pd.DataFrame:
    """A job trace for tests that need one without staged data (not used for any figure)."""
    n = 40 * days
    t0 = pd.Timestamp("2024-01-01")
    submit = t0 + pd.to_timedelta(np.sort(rng.uniform(0, days * 86400, n)), unit="s")
    return pd.DataFrame({"submit_ts": submit,
                         "gpu_milli": rng.choice([1000, 2000, 8000], n, p=[.7, .2, .1]),
                         "runtime_s": rng.lognormal(np.log(3600), 1.2, n)})


# --- the engine class: properties the split makes testable -------------------------------------

def _mixed_run(record=True, **params):
    """A small varying-capacity run: 60 jobs of 1-8 GPUs over 6 h on a 16-GPU pool beside a
    0-8 GPU inference demand that changes every minute."""
    rng = np.random.default_rng(21)
    n, n_min = 60, 6 * 60
    jobs = JobArrays.build(np.sort(rng.uniform(0, 4 * 3600, n)), rng.choice([1, 2, 4, 8], n) * 1000,
                           rng.lognormal(np.log(1200), 0.8, n), rng.uniform(150, 700, n))
    demand = rng.integers(0, 9, n_min)
    load = InferenceLoad(demand, demand * 450.0)
    engine = powersim.PowerPoolEngine(jobs, SimParams(16, **params), n_min * 60.0, load, record)
    return engine, engine.run()


@pytest.mark.parametrize("params", [{}, {"scheduler": "swf", "checkpoint_min": 15.0},
                                    {"backfill": False}])
def test_engine_clock_is_monotone_and_every_pushed_event_is_accounted_for(params):
    engine, res = _mixed_run(**params)
    # events leave the heap in (time, seq) order: the clock never runs backwards
    assert (np.diff(res.event_times_s) >= 0).all()
    assert res.n_events == len(res.event_times_s)
    # seq is the per-run event counter: each event pushed was processed or lies past the horizon
    assert engine.seq == res.n_events + len(engine.events)
    assert all(time_s >= engine.horizon_s for time_s, *_ in engine.events)
    # the recorded states are in time order and the pool state is consistent at the end
    assert (np.diff(engine.state_times_s) >= 0).all()
    assert engine.used_milli == sum(seg.gpu_milli for seg in engine.running.values())
    assert set(engine.running) == set(res.segments[res.segments["end_s"] > engine.horizon_s]["job"])


def test_batch_energy_is_the_sum_of_segment_power_times_duration():
    """The per-minute averages integrate the piecewise-constant state exactly: batch energy over
    the horizon equals the sum over segments of power x (time run before the horizon)."""
    engine, res = _mixed_run()
    seg = res.segments
    run_s = np.minimum(seg["end_s"], engine.horizon_s) - seg["start_s"]
    assert float((res.minutes["batch_power_w"] * 60.0).sum()) == \
        pytest.approx(float((seg["power_w"] * run_s).sum()), rel=1e-9)
    busy = float((res.minutes["batch_gpus"] * 60.0).sum())
    assert busy == pytest.approx(float((seg["gpu_milli"] / 1000.0 * run_s).sum()), rel=1e-9)
    # inference never gets more than its demand nor more than the pool leaves it
    m = res.minutes
    assert (m["inference_gpus"] <= m["inference_demand_gpus"] + 1e-9).all()
    assert (m["batch_gpus"] + m["inference_gpus"] <= 16 + 1e-9).all()


def test_same_inputs_same_records_from_fresh_engines():
    (_, first), (_, second) = _mixed_run(), _mixed_run()
    for name in ("minutes", "jobs", "segments", "reservations"):
        pd.testing.assert_frame_equal(getattr(first, name), getattr(second, name))
    assert np.array_equal(first.event_times_s, second.event_times_s)
    assert len(first.reservations) > 0  # the run exercises backfilling


def test_head_first_policy_starts_fcfs_jobs_in_submit_order():
    """Without backfilling (policy ``none``) and without checkpoints, FCFS first starts are
    non-decreasing in submit order, and the registries name the policies the engine uses."""
    engine, res = _mixed_run(backfill=False, checkpoint_min=None)
    assert isinstance(engine.policy, powersim.BACKFILL_POLICIES["none"])
    assert isinstance(engine.order, powersim.QUEUE_ORDERS["fcfs"])
    starts = res.jobs["first_start_s"].dropna().to_numpy()
    assert (np.diff(starts) >= 0).all()
    assert res.reservations.empty
    assert powersim.SCHEDULERS == tuple(powersim.QUEUE_ORDERS) == ("fcfs", "swf")


@pytest.mark.parametrize("params", [{}, {"scheduler": "swf", "checkpoint_min": 15.0},
                                    {"checkpoint_min": None}])
def test_bounded_reservation_search_decides_as_the_full_one(params):
    """Without ``record`` a reservation on the per-minute plan is searched only as far as the
    longest segment reaches, and on a constant pool from a partial sort of the running ends;
    the schedule must be the one of the recorded run (whole plan, exact reservations)."""
    (_, recorded), (_, bounded) = _mixed_run(True, **params), _mixed_run(False, **params)
    pd.testing.assert_frame_equal(recorded.minutes, bounded.minutes)
    pd.testing.assert_frame_equal(recorded.jobs, bounded.jobs)
    assert recorded.n_events == bounded.n_events


def test_kept_head_reservation_and_walked_ends_decide_as_a_fresh_sort(monkeypatch):
    """The head reservation kept across instants (constant pool), worked out by walking the
    running ends in order, and the Python scan of a short queue give, at every pass, the
    reservation of a fresh stable sort of every running segment's held time; a pass that
    skips the queue (the shortest queued segment ends after the reservation) skips only passes
    where no job could backfill, so the run decides as the recorded one (which reads the queue
    at every pass)."""
    from analytics.power import scheduler

    rng = np.random.default_rng(5)
    n = 400
    gpus = rng.choice([1, 2, 4, 8], n, p=[0.85, 0.1, 0.03, 0.02])
    runtime = np.maximum(rng.lognormal(np.log(1800), 1.0, n), 1.0)
    submit = np.sort(rng.uniform(0, 0.4 * n * 1.4 * 3000 / 64, n))  # overloaded
    jobs = _jobs(submit, gpus, runtime)
    checked = []
    kept = scheduler.EasyBackfilling.head_reservation

    def head_reservation(self, engine, now_s, free):
        was_kept = engine.reserved_rank == engine.queue[0]
        reservation = kept(self, engine, now_s, free)
        head = engine.job_of_rank_list[engine.queue[0]]
        head_rank = engine.rank_list[head]
        held = sorted((end_s + engine.remaining_s[job]
                       if engine.remaining_s[job] > 0 and engine.rank_list[job] < head_rank
                       else end_s, milli) for job, (end_s, milli, *_) in engine.running.items())
        freed = free + np.cumsum([milli for _, milli in held])
        enough = np.flatnonzero(freed >= engine.gpu_milli[head])
        assert reservation == (held[enough[0]][0] if enough.size else math.inf)
        checked.append((len(engine.queue) > scheduler.SHORT_QUEUE, was_kept))
        return reservation

    monkeypatch.setattr(scheduler.EasyBackfilling, "head_reservation", head_reservation)
    res = simulate(jobs, SimParams(64, "fcfs", True, 30.0), 40 * 86400.0)
    assert res.jobs["end_s"].notna().all()
    long_queue, was_kept = np.array(checked).T
    # both scans (short / long queue) and both reservations (kept / walked) were exercised
    assert long_queue.any() and not long_queue.all()
    assert was_kept.any() and not was_kept.all()
    recorded = simulate(jobs, SimParams(64, "fcfs", True, 30.0), 40 * 86400.0, record=True)
    pd.testing.assert_frame_equal(res.jobs, recorded.jobs)
    pd.testing.assert_frame_equal(res.minutes, recorded.minutes)
    assert not recorded.reservations.empty


def test_the_shortest_segment_heap_stays_in_proportion_to_the_queue():
    """The lazy heap of queued next segments is rebuilt from the queue when stale entries pile
    up, so over a long overloaded run it never holds more than twice the queue (+66), and the
    run decides as the recorded one (which never reads the heap)."""
    from analytics.power.engine import PowerPoolEngine

    rng = np.random.default_rng(11)
    n = 3000
    runtime = np.maximum(rng.lognormal(np.log(1800), 1.0, n), 1.0)
    jobs = _jobs(np.sort(rng.uniform(0, 20 * 86400.0, n)), rng.choice([1, 2, 4], n), runtime)
    params = SimParams(32, "fcfs", True, 10.0)
    engine = PowerPoolEngine(jobs, params, 80 * 86400.0)
    worst, rebuild = [0], engine.rebuild_queued_segments

    def watched():
        worst[0] = max(worst[0], len(engine.queued_segments) - 2 * len(engine.queue))
        rebuild()
    engine.rebuild_queued_segments = watched
    res = engine.run()
    assert 64 < worst[0] <= 66  # rebuilt as soon as it passed the bound
    assert len(engine.queued_segments) <= 2 * len(engine.queue) + 65
    recorded = simulate(jobs, params, 80 * 86400.0, record=True)
    pd.testing.assert_frame_equal(res.jobs, recorded.jobs)


def test_per_minute_columns_never_share_memory():
    """Columns averaged column by column (idle ones as zeros) are separate arrays, so writing
    one column of a run's minutes leaves the others as they were."""
    from analytics.power.metrics import per_minute

    minutes = per_minute(np.array([0.0, 30.0]), np.zeros((2, 6)), 3, 180.0)
    minutes.loc[0, "inference_power_w"] = 5.0
    assert minutes.loc[0, ["batch_power_w", "inference_power_w", "total_power_w"]].tolist() == [
        0.0, 5.0, 0.0]


def test_long_queue_backfill_never_starts_a_segment_ending_after_the_reservation():
    """Issue 33 (a planted bug lived: the long-queue path dropped the end-by-reservation test;
    the property test's queues stay under ``SHORT_QUEUE``). By hand, a 4-GPU constant pool:
    job 0 (2 GPUs, 100 s) starts at 0; the head, job 1 (4 GPUs), waits for its end: reservation
    100 s. Jobs 2-71 (1 GPU, 1,000 s each) fit now but would end after it; at 80 s job 72
    (1 GPU, 5 s) arrives with 72 jobs queued, past ``SHORT_QUEUE`` = 64, so the numpy path
    decides: only job 72 may backfill (ends at 85 s). The head starts at exactly 100 s, every
    1,000-s job after it."""
    from analytics.power import scheduler

    n_long = 70
    submit = [0.0, 1.0, *np.arange(2.0, 2.0 + n_long), 80.0]
    gpus = [2, 4, *[1] * n_long, 1]
    runtime = [100.0, 100.0, *[1000.0] * n_long, 5.0]
    assert n_long + 2 > scheduler.SHORT_QUEUE
    res = simulate(_jobs(submit, gpus, runtime), SimParams(4, "fcfs", True, None), 1e6)
    first = res.jobs.set_index("job")["first_start_s"]
    assert first[72] == pytest.approx(80.0)  # the short job backfilled at its arrival
    assert first[1] == pytest.approx(100.0)  # the head at its reservation, not delayed
    assert (first[2:72] >= 200.0 - 1e-9).all()  # the long jobs only after the head's 100 s
