"""The worker host's Procrastinate side (judge/service/worker_host.py), without worker processes:
what a ticket does with each answer of its slot, and the wake-up Procrastinate's worker would
lose. (With real hosts and PostgreSQL: tests/test_pg_hosts.py.)"""

from __future__ import annotations

import asyncio

import procrastinate
from procrastinate.testing import InMemoryConnector

from judge.service.config import Config
from judge.service.worker_host import DispatchHost, _worker_class


class Slots:
    """A dispatched pool's stand-in: answers ``ask`` from a script, records the calls."""

    dispatched = True

    def __init__(self, answers):
        self.answers, self.asked = list(answers), []

    def ask(self, index, mode):
        self.asked.append((index, mode))
        return self.answers.pop(0)


class Tickets:
    """A store's stand-in for ``return_ticket``."""

    def __init__(self):
        self.returned = []

    def return_ticket(self, mode):
        self.returned.append(mode)


def run_ticket(run_async, answers, mode="submit", *, stopping=False):
    host = DispatchHost(Config(database_url="postgresql://unused/db", workers=2, poll_interval=0.001),
                        Tickets(), Slots(answers))
    host.stopping = stopping

    async def go():
        host._free = asyncio.Queue()
        for i in range(2):
            host._free.put_nowait(i)
        out = await host.ticket(mode)
        assert host._free.qsize() == 2  # its slot is free again
        return out

    return run_async(go()), host


def test_a_ticket_waits_while_the_fair_share_passes_over_then_grades(run_async):
    out, host = run_ticket(run_async, [("wait", None), ("wait", None), ("graded", "s1")])
    assert out == "graded" and host.pool.asked == [(0, "submit")] * 3 and host.store.returned == []


def test_a_ticket_that_finds_nothing_ends(run_async):
    out, host = run_ticket(run_async, [("empty", None)], "run")
    assert out == "empty" and host.store.returned == [] and host.tickets["empty"] == 1


def test_a_ticket_whose_worker_died_or_stopped_is_given_back(run_async):
    """None: the worker died mid-order (the pool takes its grading back) or the pool stops: the
    ticket goes back to the queue (a surplus one claims nothing), never lost."""
    out, host = run_ticket(run_async, [None])
    assert out == "returned" and host.store.returned == ["submit"]
    out, host = run_ticket(run_async, [], "run", stopping=True)  # a stopping host asks no worker
    assert out == "returned" and host.store.returned == ["run"] and host.pool.asked == []


def test_a_notification_heard_while_the_fetch_found_nothing_is_not_lost(run_async):
    """Procrastinate's fetch loop clears its new-job event after a fetch that found nothing; a
    notification that lands during that fetch (its job committed just after the fetch's
    snapshot) would wait for the next poll. The host's worker fetches again."""
    app = procrastinate.App(connector=InMemoryConnector())
    worker = _worker_class()(app, queues=["submit"], concurrency=1, install_signal_handlers=False)
    worker.worker_id = 1
    fetches = []

    async def fetch_job(queues, worker_id):
        fetches.append(queues)
        if len(fetches) == 1:  # the ticket's notification arrives while this fetch runs
            await worker._handle_notification(channel="procrastinate_any_queue_v1",
                                              notification={"type": "job_inserted", "job_id": 7})
        return None

    app.job_manager.fetch_job = fetch_job
    run_async(worker._fetch_and_process_jobs())
    assert len(fetches) == 2  # Procrastinate's own worker stops after the first
