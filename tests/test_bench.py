"""The benchmark's arithmetic and its table (the measurements themselves run under ``make bench``)."""

from judge.service.bench import _pct, render


def test_percentiles_pick_measured_values():
    xs = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert _pct(xs, 0.5) == 3.0 and _pct(xs, 0.95) == 5.0 and _pct(xs, 0.0) == 1.0


def test_the_table_shows_ratios_against_the_targets():
    result = {
        "exercises": {"toy": {"floor_ms": 20.0, "service_p50_ms": 41.0, "service_p95_ms": 50.0,
                              "fresh_interpreter_ms": 1640.0, "calls": 120, "round_trips": 30}},
        "throughput": {"1": 10.0, "2": 18.0}, "extra_mb_per_submission": 4.0, "rest_mb": 900.0,
        "throughput_cost": {"1": {"cpu_ms_per_submission": 150.0, "cores_busy": 1.5},
                            "2": {"cpu_ms_per_submission": 105.0, "cores_busy": 1.89}},
        "judge_local": {"startup_ms": 1500.0, "grading_ms": 40.0, "wall_ms": 3000.0},
        "bench_seconds": 200.0,
    }
    table = render(result)
    row = next(line for line in table.splitlines() if line.startswith("toy"))
    # p50 / (1.3 * floor + 15) = 41 / 41 = 1.00; fresh / p50 = 40.0
    assert row.split()[5:] == ["1.00", "40.0", "120", "30"]
    assert "(×1.80)" in table
    assert "1 worker(s): 150 ms of CPU per submission, 1.50 cores busy" in table


def test_cpu_accounting_reads_this_process_and_the_machine():
    from judge.service.bench import _busy_jiffies, _cpu_ms
    import os
    import time

    before, (busy0, total0) = _cpu_ms(os.getpid()), _busy_jiffies()
    end = time.process_time() + 0.2
    while time.process_time() < end:  # burn 200 ms of CPU
        pass
    busy1, total1 = _busy_jiffies()
    assert _cpu_ms(os.getpid()) - before >= 150  # clock ticks: 10 ms each
    assert busy1 - busy0 >= 15 and total1 > total0
    assert _cpu_ms(2**22 + 12345) == 0.0  # no such process


def test_the_table_reports_the_mixed_run():
    result = {
        "exercises": {}, "throughput": {"1": 10.0, "2": 18.0}, "extra_mb_per_submission": 4.0,
        "rest_mb": 900.0, "judge_local": {"startup_ms": 1500.0, "grading_ms": 40.0, "wall_ms": 3000.0},
        "bench_seconds": 200.0,
        "mixed": {"hostile": 160, "honest": 40, "seconds": 118.2, "honest_p50_ms": 411.8,
                  "honest_p95_ms": 702.4, "unexpected": 0, "workers_replaced": 0,
                  "rest_mb": 562.0, "after_mb": 590.1},
    }
    line = next(x for x in render(result).splitlines() if x.startswith("mixed run"))
    assert "160 hostile + 40 honest" in line and "p95 702 ms (target < 1000)" in line
    assert "0 worker(s) replaced" in line and "(x1.05)" in line
    del result["mixed"]
    assert "mixed run" not in render(result)


def test_the_table_reports_the_diagnosis_cost():
    result = {
        "exercises": {}, "throughput": {"1": 10.0, "2": 18.0}, "extra_mb_per_submission": 4.0,
        "rest_mb": 900.0, "judge_local": {"startup_ms": 1500.0, "grading_ms": 40.0, "wall_ms": 3000.0},
        "bench_seconds": 200.0, "diagnosis": {"median_ms": 212.4, "max_ms": 1388.0, "named": 137, "wrong": 140},
    }
    line = next(x for x in render(result).splitlines() if x.startswith("diagnosis"))
    assert line == ("diagnosis (rejected gradings only): median 212 ms, max 1388 ms; "
                    "137/140 known-wrong solutions named as themselves")


def test_the_table_reports_the_watch_loop():
    result = {
        "exercises": {}, "throughput": {"1": 10.0, "2": 18.0}, "extra_mb_per_submission": 4.0,
        "rest_mb": 900.0, "judge_local": {"startup_ms": 1500.0, "grading_ms": 40.0, "wall_ms": 3000.0},
        "bench_seconds": 200.0, "watch": {"median_ms": 96.4, "max_ms": 140.2, "accepted_median_ms": 90.1,
                                          "rejected_median_ms": 101.0, "saves": 6, "exercise": "gspo",
                                          "mode": "run"},
    }
    line = next(x for x in render(result).splitlines() if x.startswith("judge local --watch"))
    assert line == ("judge local --watch (gspo, run mode, 6 saves): save to table median 96 ms, max 140 ms "
                    "(target <= 150); accepted 90 ms, rejected 101 ms")
    del result["watch"]
    assert "--watch" not in render(result)
