"""Issue 31 item 4, "show work from its first second": the local pool reports each second no
task finishes, saying what runs, so a bar shows the elapsed time and Cancel is heard before the
first task ends (the envelope atlas sat at "0 of 51" for 40 s)."""

from __future__ import annotations

import time

from analytics.sweep import SweepCancelled, Task, run_sweep


def test_the_local_pool_reports_while_its_first_tasks_run():
    tasks = [Task("test.sleepy", "analytics.sweep.worker:sleepy", {"x": i, "sleep_s": 2.5}, i)
             for i in range(2)]
    seen = []
    t0 = time.monotonic()
    res = run_sweep(tasks, backend="local",
                    progress=lambda done, total, label="": seen.append(
                        (round(time.monotonic() - t0, 1), done, total, label)))
    assert res.computed == 2 and [r["twice"] for r in res.results] == [0, 2]
    beats = [s for s in seen if s[3]]
    assert beats and beats[0][1] == 0 and beats[0][0] < 2.5  # before the first task ended
    assert "2 running on 2 worker(s)" in beats[0][3] or "running on 1 worker(s)" in beats[0][3]
    assert seen[-1][1:3] == (2, 2)


def test_cancel_is_heard_at_a_heartbeat():
    tasks = [Task("test.sleepy", "analytics.sweep.worker:sleepy", {"x": i, "sleep_s": 30}, i)
             for i in range(2)]
    t0 = time.monotonic()
    beats = []
    try:
        run_sweep(tasks, backend="local", progress=lambda *a: beats.append(a),
                  cancel=lambda: len(beats) >= 2)
    except SweepCancelled as exc:
        assert exc.partial.computed == 0
    else:
        raise AssertionError("the sweep was not cancelled")
    assert time.monotonic() - t0 < 15  # not the 30 s a task sleeps
