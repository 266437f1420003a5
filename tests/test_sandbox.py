"""The Sandbox: scratch left by a sandbox whose process was killed is wiped by the next one."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from judge.box.sandbox import Sandbox, StartingSandbox
from judge.errors import IsolationUnavailable
from sandbox import wire


def test_scratch_of_a_killed_sandbox_is_wiped_by_the_next(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    stale = tmp_path / f"judge-scratch-{dead}-abc123"
    (stale / "j1").mkdir(parents=True)
    (stale / "j1" / "left-behind").write_text("x")
    alive = tmp_path / f"judge-scratch-{os.getpid()}-def456"  # a running sandbox's: untouched
    (alive / "j1").mkdir(parents=True)
    box = Sandbox(scratch_root=str(tmp_path))
    try:
        assert not stale.exists()
        assert (alive / "j1").is_dir()
        assert box.scratch_root.name.startswith(f"judge-scratch-{os.getpid()}-")
    finally:
        box.close()
    assert not box.scratch_root.exists()


def _thp_available() -> bool:
    try:
        mode = open("/sys/kernel/mm/transparent_hugepage/enabled").read()
    except OSError:
        return False
    release = tuple(int(x) for x in os.uname().release.split(".")[:2] if x.isdigit())
    return "[never]" not in mode and release >= (6, 1)


def test_a_spare_keeping_zygote_is_on_huge_pages_where_the_kernel_allows():
    import pytest

    if not _thp_available():
        pytest.skip("no transparent huge pages or no MADV_COLLAPSE (Linux 6.1+) here")
    plain = Sandbox()  # judge local's: one child, no collapse (it would delay the start by ~0.5 s)
    try:
        assert plain.info["huge_pages_mb"] == 0
    finally:
        plain.close()
    box = Sandbox(spares=True)  # the service's: a fork per submission
    try:
        assert box.info["huge_pages_mb"] >= 64, box.info  # torch's import leaves ~200 MB
        rollup = open(f"/proc/{box.proc.pid}/smaps_rollup").read()
        huge_kb = int(next(ln.split()[1] for ln in rollup.splitlines() if ln.startswith("AnonHugePages:")))
        assert huge_kb >= 64 << 10, rollup
    finally:
        box.close()



def test_a_child_is_in_its_own_cgroups_before_it_says_hello():
    """The child warms up while the zygote moves it into its cgroups (10-25 ms of kernel wait),
    but says hello, and so gets a submission, only once it is in them."""
    import pytest

    from judge.exercise import Limits

    box = Sandbox()  # no spares: the zygote's one child is the job's
    try:
        if not box.info.get("cgroups"):
            pytest.skip("no per-job cgroups here (needs root and cgroup v1 memory + pids)")
        for _ in range(3):
            job = box.open_job(Limits())
            # read at once: the zygote's "started" report comes only after the move
            pids = open(f"/proc/{box.proc.pid}/task/{box.proc.pid}/children").read().split()
            assert len(pids) == 1, pids
            groups = dict(line.split(":", 2)[1:] for line in
                          open(f"/proc/{pids[0]}/cgroup").read().splitlines())
            mine = f"/judge-zygote-{box.proc.pid}/job"
            for controller in ("memory", "pids"):
                assert mine in groups.get(controller, ""), groups
            job.close()
            box.drain()
    finally:
        box.close()


def test_no_accelerator_is_visible_to_the_zygote_or_a_submission(sandbox):
    """Submissions compute on the CPU. Were a GPU visible to a CUDA build of torch, the zygote's
    warm-up backward would start autograd's device threads, and every forked child's backward()
    would then raise "Unable to handle autograd's threading in combination with fork-based
    multiprocessing" (seen on a GPU machine before the zygote's environment hid them)."""
    from judge.exercise import Limits
    from sandbox import wire

    environ = open(f"/proc/{sandbox.proc.pid}/environ", "rb").read().split(b"\0")
    assert b"CUDA_VISIBLE_DEVICES=" in environ and b"HIP_VISIBLE_DEVICES=" in environ, environ
    job = sandbox.open_job(Limits(call_seconds=5, total_seconds=30))
    try:
        source = ("import os, torch\n\ndef seen():\n    return [os.environ.get('CUDA_VISIBLE_DEVICES'),"
                  " os.environ.get('HIP_VISIBLE_DEVICES'), torch.cuda.device_count()]\n")
        assert job.request({"op": "load", "source": source, "functions": ["seen"]},
                           during="load").header["ok"]
        msg = job.request({"op": "call", "fn": "seen", "args": {"L": []}, "kwargs": {"D": []},
                           "grad": []}, during="seen")
        assert msg.header["ok"], msg.header
        assert msg.value(msg.header["result"]) == ["", "", 0]
    finally:
        job.close()


def test_torch_compile_and_torchscript_work_in_a_submission(sandbox):
    """A learner's ``@torch.compile`` is graded as the eager code it wraps: inductor would build
    C++ with a compiler in a subprocess, which the lockdown forbids ("InductorError:
    PermissionError" on the first call, before TorchDynamo's switch was set in the zygote,
    whose warm-up imports TorchDynamo and so reads it there). ``@torch.jit.script`` compiles
    from the submission's source, which inspect finds in linecache (there is no file: "Can't get
    source" at import before)."""
    from judge.exercise import Limits

    job = sandbox.open_job(Limits(call_seconds=20, total_seconds=60))
    try:
        source = ("import torch\n\n@torch.compile\ndef double(x):\n    return torch.sin(x) * 2\n\n"
                  "def compiled_is_eager():\n    import torch._dynamo\n    return torch._dynamo.config.disable\n\n"
                  "@torch.jit.script\ndef scripted(x: torch.Tensor) -> torch.Tensor:\n    return x.sum() * 3\n")
        functions = ["double", "compiled_is_eager", "scripted"]
        assert job.request({"op": "load", "source": source, "functions": functions},
                           during="load").header["ok"]
        msg = job.request({"op": "call", "fn": "compiled_is_eager", "args": {"L": []},
                           "kwargs": {"D": []}, "grad": []}, during="compiled_is_eager")
        assert msg.header["ok"], msg.header
        assert msg.value(msg.header["result"]) is True
        blobs: list = []
        x = torch.linspace(-2, 2, 7, dtype=torch.float64)
        args = wire.encode([x], blobs, strides=True)
        msg = job.request({"op": "call", "fn": "double", "args": args, "kwargs": {"D": []},
                           "grad": [False]}, blobs, during="double")
        assert msg.header["ok"], msg.header
        assert torch.equal(msg.value(msg.header["result"]), torch.sin(x) * 2)
        msg = job.request({"op": "call", "fn": "scripted", "args": args, "kwargs": {"D": []},
                           "grad": [False]}, blobs, during="scripted")
        assert msg.header["ok"], msg.header
        assert torch.equal(msg.value(msg.header["result"]), x.sum() * 3)
    finally:
        job.close()


def test_a_verdict_names_every_layer_in_force(sandbox):
    """The verdict's ``sandbox`` field lists what the README's table promises, where it applies:
    as root, the PID namespace and the per-submission cgroup too."""
    from judge.exercise import discover
    from judge.grading import grade

    ex = discover()["glm5_mis"]
    v = grade(ex, ex.solution_path.read_text(), sandbox=sandbox, seed=0, out_dir=None, tiers=["T0"])
    assert v.verdict == "accepted", v
    assert "session" in v.sandbox and "rlimits" in v.sandbox
    assert ("pid-namespace" in v.sandbox) == bool(sandbox.info.get("pid_namespace")), v.sandbox
    assert ("cgroup memory+pids" in v.sandbox) == bool(sandbox.info.get("cgroups")), v.sandbox
    if os.geteuid() == 0:  # this machine, as root: every layer
        assert {"pid-namespace", "net-namespace", "uid 65534", "seccomp",
                "cgroup memory+pids"} <= set(v.sandbox), v.sandbox


def test_a_sandbox_started_in_the_background_raises_what_stopped_it(tmp_path):
    """StartingSandbox (how judge local, validate and the workers start the zygote while they
    load exercises): get() waits and re-raises the start's error; close() after a failed start
    has nothing to close."""
    starting = StartingSandbox(scratch_root=str(tmp_path / "missing" / "dir"))
    with pytest.raises(FileNotFoundError):
        starting.get()
    starting.close()
    ok = StartingSandbox(scratch_root=str(tmp_path))
    box = ok.get()
    try:
        assert box.alive and box.info.get("event") == "ready" and ok.get() is box
    finally:
        ok.close()
    assert not box.scratch_root.exists()


def test_required_isolation_that_is_missing_is_refused(tmp_path, monkeypatch):
    """require_isolation (the service's workers, unless told to allow a weak sandbox): a machine
    without Landlock or seccomp gets IsolationUnavailable, and the zygote started is closed."""
    monkeypatch.setattr(Sandbox, "weaknesses", property(lambda self: ["seccomp (the syscall deny-list)"]))
    started = []
    real_start = Sandbox._start
    monkeypatch.setattr(Sandbox, "_start", lambda self, t: (started.append(self), real_start(self, t)))
    with pytest.raises(IsolationUnavailable, match="without seccomp"):
        Sandbox(scratch_root=str(tmp_path), require_isolation=True)
    (box,) = started
    assert box.proc.poll() is not None and not box.scratch_root.exists()
    weak = Sandbox(scratch_root=str(tmp_path))  # judge local only warns
    weak.close()
