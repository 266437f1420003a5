"""A job: requests answered in order, output kept, resources reported without an exit round trip,
and a clean-up that leaves nothing behind."""

from __future__ import annotations

import dataclasses
import os

import pytest

from judge.exercise import Limits
from judge.box.sandbox import Sandbox
from sandbox import wire

SOURCE = '''
import torch

def work(n):
    print("working on", n)
    x = torch.ones(n, n)
    for _ in range(20):
        x = x @ x / n
    return x.sum()
'''


def _loaded(box: Sandbox):
    job = box.open_job(Limits(call_seconds=5, total_seconds=30))
    assert job.request({"op": "load", "source": SOURCE, "functions": ["work"]}, during="load").header["ok"]
    return job


def call(job, n: int):
    blobs: list = []
    return job.request({"op": "call", "fn": "work", "args": wire.encode([n], blobs),
                        "kwargs": {"D": []}, "grad": []}, blobs, during="work")


def test_answers_carry_resources_and_close_keeps_the_output(sandbox):
    job = _loaded(sandbox)
    assert call(job, 64).header["ok"]
    res = job.close()  # no exit round trip: the last answer said what the child had used
    assert res.cpu_ms > 0 and res.maxrss_kb > 0 and res.wall_ms > 0
    assert "working on 64" in job.output  # printed before its answer: kept
    sandbox.drain()
    assert not job.scratch.exists()  # wiped in the background


def test_requests_sent_ahead_are_answered_in_order(sandbox):
    job = _loaded(sandbox)
    for n in (2, 3, 4):
        blobs: list = []
        job.send({"op": "call", "fn": "work", "args": wire.encode([n], blobs), "kwargs": {"D": []},
                  "grad": []}, blobs, during="work", drain=lambda: False)
    got = []
    for _ in range(3):
        msg = job.reply(during="work")
        got.append(float(msg.value(msg.header["result"])))
    job.close()
    assert got == [4.0, 9.0, 16.0]  # x stays the all-ones matrix: its sum is n * n


def test_spares_are_forked_when_a_job_closes():
    import judge.box.sandbox

    box = Sandbox(spares=True)
    try:
        limits = Limits(call_seconds=5, total_seconds=30)
        first = box.open_job(limits)
        assert not box._spare  # not while the first job runs
        first.close()
        spares = list(next(iter(box._spare.values())))
        assert len(spares) == judge.box.sandbox.SPARES_AHEAD
        assert all(sp.ready.wait(30) and sp.job is not None for sp in spares)
        second = box.open_job(limits)
        assert second is spares[0].job and second.pid != first.pid
        third = box.open_job(limits)  # a burst: the other one is ready too
        assert third is spares[1].job and third.pid not in (first.pid, second.pid)
        second.close()
        third.close()
    finally:
        box.close()
    assert not [p for p in (first.pid, second.pid, third.pid) if os.path.exists(f"/proc/{p}/stat")
                and open(f"/proc/{p}/stat").read().split()[2] != "Z"]


def test_a_spare_waits_after_a_close_unless_a_job_is_opened(monkeypatch):
    """The successor spare holds back for a moment after a close (the verdict is being delivered),
    but a job opened meanwhile wants it at once: it must not wait out the delay."""
    import judge.box.sandbox

    monkeypatch.setattr(judge.box.sandbox, "SPARE_DELAY", 60.0)  # far longer than take() would wait
    box = Sandbox(spares=True)
    try:
        limits = Limits(call_seconds=5, total_seconds=30)
        first = box.open_job(limits)
        first.close()
        spare = next(iter(box._spare.values()))[0]
        assert not spare.ready.wait(0.2)  # held back
        second = box.open_job(limits)  # wants it now: forked at once and handed out
        assert second is spare.job and second.pid != first.pid
        second.close()
    finally:
        box.close()


FORGE_AT_IMPORT = '''
import json, os, struct
head = json.dumps({"ok": True, "missing": [], "ru": [1.0, float("nan")]}).encode()
os.write(3, struct.pack("!II", len(head), 0) + head)
'''


def _gone(box: Sandbox, job) -> bool:
    box.drain()
    return not job.scratch.exists() and job.id not in box._jobs and job.sock.fileno() == -1


def test_a_reply_with_a_nan_resource_report_is_refused_and_the_job_still_ends(sandbox):
    from judge.box import replies
    from judge.errors import MalformedReply

    job = sandbox.open_job(Limits(call_seconds=5, total_seconds=30))
    with pytest.raises(MalformedReply, match=r"ru\.1"):
        job.request({"op": "load", "source": FORGE_AT_IMPORT, "functions": []}, during="load",
                    expect=replies.LOAD)
    usage = job.close()  # never int(nan): the report was refused before anything kept it
    assert usage.cpu_ms == 0.0 and usage.maxrss_kb == 0
    assert _gone(sandbox, job)


def test_close_ends_the_job_whatever_goes_wrong_in_it(sandbox, monkeypatch):
    job = _loaded(sandbox)

    def broken() -> None:
        raise OSError("the output pipe broke")

    monkeypatch.setattr(job, "_drain", broken)
    job.close()  # logged, not raised: the verdict stands
    assert _gone(sandbox, job)


def test_every_step_of_the_clean_up_runs_whatever_the_one_before_raised(sandbox, monkeypatch):
    job = _loaded(sandbox)
    job.kill()
    assert job._exited.wait(5)
    job.closed = True
    forgotten = []

    def forget(j) -> None:
        forgotten.append(j)
        raise RuntimeError("forget failed")

    monkeypatch.setattr(job, "_reap", lambda: (_ for _ in ()).throw(OSError("reap failed")))
    monkeypatch.setattr(job, "host", dataclasses.replace(job.host, forget=forget))
    with pytest.raises(OSError, match="reap failed"):  # the first failure, once all have run
        job.finish()
    assert forgotten == [job] and job.sock.fileno() == -1 and not job.scratch.exists()
    sandbox._forget(job)


def test_a_job_takes_the_answer_caps_of_the_limits_it_is_given(sandbox):
    job = sandbox.open_job(Limits(call_seconds=5, total_seconds=30, answer_mb=2))
    assert job.reader.max_payload == 2 << 20 and job.reader.max_header == 1 << 20
    job.limits = Limits(answer_mb=128)  # a spare handed out for another exercise's limits
    assert job.reader.max_payload == 128 << 20 and job.reader.max_header == 1 << 20
    job.close()
    sandbox.drain()
