"""Which idle worker a new submission wakes: the most recently idle one, and never nobody."""

import multiprocessing as mp

from judge.service.idle import IdleWorkers


def make(n: int = 3) -> IdleWorkers:
    return IdleWorkers(mp.get_context("spawn"), n)


def test_the_worker_that_went_idle_last_is_woken_first():
    idle = make()
    for i in (0, 1, 2):
        idle.idle(i)
    assert idle.listed() == [2, 1, 0]
    idle.busy(0)
    idle.idle(0, latest=True)  # it has just finished a grading: on top
    assert idle.listed() == [0, 2, 1]
    assert idle.wake_one() and idle.wait(0, 0) and not idle.wait(1, 0) and not idle.wait(2, 0)
    assert idle.listed() == [2, 1]
    assert idle.wake_one() and idle.wait(2, 0)


def test_polling_again_keeps_a_worker_in_its_place():
    idle = make()
    idle.idle(0)
    idle.idle(1)
    idle.idle(0)  # its poll timed out: still idle, not more recently so
    assert idle.listed() == [1, 0]


def test_nobody_idle_means_nobody_woken():
    idle = make(2)
    assert not idle.wake_one()
    idle.idle(1)
    idle.busy(1)
    assert not idle.wake_one() and idle.listed() == []


def test_a_wakeup_that_reached_a_worker_which_found_work_itself_is_passed_on():
    idle = make()
    idle.idle(0)
    idle.idle(1)
    assert idle.wake_one()  # meant for a new submission: worker 1 is woken ...
    idle.busy(1)  # ... but had just claimed another one by polling: worker 0 must take it
    assert idle.wait(0, 0)
    assert not idle.wait(1, 0)  # its stale wake-up was consumed


def test_a_woken_worker_that_takes_the_work_passes_nothing_on():
    idle = make()
    idle.idle(0)
    idle.idle(1)
    assert idle.wake_one() and idle.wait(1, 0)  # woken, and it consumed the wake-up
    idle.busy(1)
    assert not idle.wait(0, 0) and idle.listed() == [0]
