"""Malicious submissions: each is rejected with its kind of verdict, leaves nothing behind, and
the judge grades the next (correct) submission normally.

Each attack prints what happened (captured output is evidence for this test, never parsed by
the judge) and, if the attack succeeded, would make itself accepted by exec-ing the reference.
"""

from __future__ import annotations

import dataclasses
import os
import re
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from judge.errors import FAILURE_KINDS, RemoteException
from judge.exercise import REPO_ROOT, Limits, discover, load_exercise
from judge.grading import grade
from judge.models import Verdict
from sandbox import wire

ATTACKS = Path(__file__).parent / "attacks"
EX = discover()["glm5_mis"]
# Tight limits keep the time and memory attacks quick.
FAST = dataclasses.replace(EX, limits=Limits(call_seconds=2, total_seconds=20, cpu_seconds=5,
                                             memory_mb=1024))


def run_attack(name: str, sandbox, alone: bool = True, **subst) -> Verdict:
    """Grade the attack ``name``; when it is the only grading (``alone``), also check that the
    judge's memory stayed bounded and that nothing of it outlives the grading (see ``graded``)."""
    src = (ATTACKS / f"{name}.py").read_text()
    subst.setdefault("REPO", str(REPO_ROOT))
    for k, v in subst.items():
        src = src.replace("{{" + k + "}}", str(v))
    if not alone:
        return grade(FAST, src, sandbox=sandbox, mode="submit", seed=7)
    o = graded(sandbox, src, None)  # no artifact folder, as before: T3 writes nothing
    assert o.peak_mb < PEAK_MB and o.document_bytes < DOCUMENT_BYTES, (o.peak_mb, o.document_bytes)
    return o.verdict


@pytest.fixture
def then_reference_is_graded(sandbox):
    yield
    v = grade(EX, EX.solution_path.read_text(), sandbox=sandbox, mode="run")
    assert v.verdict == "accepted", "the judge did not grade the next submission normally"
    assert sandbox.proc.poll() is None, "the zygote died"


@pytest.mark.usefixtures("then_reference_is_graded")
class TestAttacks:
    def test_read_reference(self, sandbox):
        v = run_attack("read_reference", sandbox)
        assert v.verdict == "rejected" and v.error.kind == "import_error"
        assert "blocked" in v.output and "PermissionError" in v.output
        assert "def masked_is_weights" not in v.model_dump_json()

    def test_read_secrets_of_the_host(self, sandbox, tmp_path):
        db = tmp_path / "judge.db"
        db.write_text("SQLite format 3 secret rows")
        os.chmod(tmp_path, 0o755)
        os.chmod(db, 0o644)  # readable by anyone: only the sandbox's own confinement protects it
        v = run_attack("read_host_files", sandbox, JUDGE_PID=os.getpid(), DATABASE=db)
        assert v.verdict == "rejected"
        assert "leaked" not in v.output, v.output
        assert v.output.count("blocked") == 6, v.output

    def test_write_outside_scratch(self, sandbox, tmp_path):
        target = tmp_path / "pwned.txt"
        os.chmod(tmp_path, 0o777)
        v = run_attack("write_outside", sandbox, TARGET=target)
        assert v.verdict == "rejected" and v.error.kind == "import_error"
        assert not target.exists()
        assert not (REPO_ROOT / "pwned.txt").exists()

    def test_tcp_connect_to_localhost(self, sandbox):
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(0.2)
        accepted = []

        def accept():
            try:
                accepted.append(listener.accept())
            except OSError:
                pass

        t = threading.Thread(target=accept)
        t.start()
        v = run_attack("tcp_connect", sandbox, PORT=listener.getsockname()[1])
        t.join()
        listener.close()
        assert v.verdict == "rejected" and v.error.kind == "import_error"
        assert not accepted, "the submission reached a TCP listener on 127.0.0.1"

    def test_fork(self, sandbox):
        v = run_attack("fork", sandbox)
        assert v.verdict == "rejected" and v.error.kind == "import_error"
        assert "PermissionError" in v.error.message

    def test_infinite_loop(self, sandbox):
        v = run_attack("infinite_loop", sandbox)
        assert v.verdict == "rejected" and v.error.kind == "time_limit"
        assert v.exit_code == 3

    def test_huge_allocation(self, sandbox):
        v = run_attack("allocate_20gb", sandbox)
        assert v.verdict == "rejected" and v.error.kind == "memory_limit"
        assert v.exit_code == 3

    def test_kill_the_parent(self, sandbox):
        v = run_attack("kill_parent", sandbox, ZYGOTE_PID=sandbox.proc.pid, JUDGE_PID=os.getpid())
        assert v.verdict == "rejected"
        assert v.output.count("blocked") == 3, v.output

    def test_fake_results_on_stdout(self, sandbox):
        v = run_attack("fake_stdout", sandbox)
        assert v.verdict == "rejected"
        assert '"verdict": "accepted"' in v.output  # printed, captured, ignored

    def test_sys_exit_inside_a_call(self, sandbox):
        v = run_attack("sys_exit", sandbox)
        assert v.verdict == "rejected" and v.error.kind == "runtime_error"
        assert "SystemExit" in v.error.message

    def test_os_exit_inside_a_call(self, sandbox):
        v = run_attack("os_exit", sandbox)
        assert v.verdict == "rejected" and v.error.kind == "runtime_error"

    def test_tensor_subclass_that_always_compares_equal(self, sandbox):
        v = run_attack("lying_tensor", sandbox)
        assert v.verdict == "rejected"
        t0 = next(t for t in v.tiers if t.tier == "T0")
        assert t0.status == "failed"
        assert any("subclass" in r.message for r in t0.tests)

    def test_monkeypatching_comparisons_has_no_effect(self, sandbox):
        v = run_attack("monkeypatch_allclose", sandbox)
        assert v.verdict == "rejected"

    def test_syntax_error_is_reported_with_its_line(self, sandbox):
        v = grade(FAST, "def masked_is_weights(:\n  pass\n", sandbox=sandbox)
        assert v.verdict == "rejected" and v.error.kind == "syntax_error" and "line 1" in v.error.message
        assert v.exit_code == 3

    def test_nul_bytes_are_a_syntax_error(self, sandbox):
        v = grade(FAST, "def masked_is_weights():\n    return 1\x00\n", sandbox=sandbox)
        assert v.error.kind == "syntax_error" and "null" in v.error.message

    def test_missing_function_is_named(self, sandbox):
        v = grade(FAST, "def masked_is_weights(*a, **k):\n    raise NotImplementedError\n", sandbox=sandbox)
        assert v.error.kind == "missing_function" and "offpolicy_loss" in v.error.message


def sandbox_processes(zygote_pid: int) -> list[int]:
    """Processes of the sandbox uid (as root) still alive below this zygote (other sandboxes,
    e.g. a service's spare children, are not ours to count)."""
    parent, uid = {}, {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                status = (d / "status").read_text()
                parent[int(d.name)] = int(status.split("PPid:")[1].split()[0])
                uid[int(d.name)] = status.split("Uid:")[1].split()[0]
            except (OSError, IndexError, ValueError):
                pass

    def below(pid: int) -> bool:
        while pid > 1:
            pid = parent.get(pid, 0)
            if pid == zygote_pid:
                return True
        return False

    return [p for p, u in uid.items() if u == "65534" and below(p)]


@pytest.mark.usefixtures("then_reference_is_graded")
class TestMoreAttacks:
    def test_thread_bomb_is_capped(self, sandbox):
        v = run_attack("thread_bomb", sandbox)
        assert v.verdict == "rejected"
        started = int(v.output.split("threads started:")[1].split()[0])
        assert started < 5000

    def test_sparse_file_is_refused(self, sandbox):
        v = run_attack("sparse_file", sandbox)
        assert v.verdict == "rejected" and v.error.kind == "import_error"
        assert "File too large" in v.error.message or "No space" in v.error.message

    def test_a_gigabyte_of_stdout_is_capped(self, sandbox):
        v = run_attack("flood_stdout", sandbox)
        assert v.verdict == "rejected"
        assert len(v.output) < 70_000 and "dropped" in v.output

    def test_sigstop_to_itself_is_a_time_limit(self, sandbox):
        v = run_attack("sigstop_self", sandbox)
        # As PID 1 of its namespace the child cannot stop itself (the signal is dropped) and the
        # call returns None; without a PID namespace it stops and the call runs out of time.
        assert v.verdict == "rejected"
        assert v.error is None or v.error.kind == "time_limit"

    def test_sleep_and_pause_are_a_time_limit(self, sandbox):
        v = run_attack("sleep_forever", sandbox)
        assert v.verdict == "rejected" and v.error.kind == "time_limit"

    def test_nothing_persists_into_the_next_submission(self, sandbox):
        nonce = f"judge-nonce-{os.getpid()}"
        v = run_attack("persist_state", sandbox, NONCE=nonce)
        assert "wrote" not in v.output, v.output
        assert not Path(f"/tmp/{nonce}").exists() and not Path(f"/dev/shm/{nonce}").exists()
        w = run_attack("observe_state", sandbox)
        assert "files: []" in w.output and "json poisoned: False" in w.output
        assert "allclose patched: False" in w.output

    def test_forged_frames_on_inherited_descriptors(self, sandbox):
        v = run_attack("inherited_fds", sandbox)
        assert v.verdict == "rejected"

    def test_half_a_frame_then_silence_is_a_stopped_process(self, sandbox):
        v = run_attack("half_frame", sandbox)
        assert v.verdict == "rejected" and v.error is not None
        assert v.error.kind == "time_limit" and "answer began but never ended" in v.error.message, v.error
        assert v.timings.total_ms < 1000 * FAST.limits.total_seconds  # never waited past it

    def test_a_forged_reply_with_bad_tensor_nodes_is_a_malformed_reply(self, sandbox):
        v = run_attack("forged_reply", sandbox)
        assert v.verdict == "rejected" and v.error is not None, v.error
        assert v.error.kind == "runtime_error" and "malformed reply" in v.error.message, v.error
        assert "forged a reply" in v.output

    def test_udp_and_dns_are_blocked(self, sandbox):
        v = run_attack("udp_dns", sandbox)
        assert v.verdict == "rejected" and "reached" not in v.output
        assert v.output.count("blocked") == 2

    def test_planted_links_are_never_followed(self, sandbox, tmp_path):
        target = tmp_path / "victim.txt"
        target.write_text("original")
        os.chmod(tmp_path, 0o755)
        v = run_attack("plant_symlink", sandbox, TARGET=target)
        assert v.verdict == "rejected"
        assert target.read_text() == "original"
        assert "hardlinked" not in v.output
        assert not any(a.name in ("metrics.json", "verdict.json") for a in v.artifacts)

    def test_nan_and_constant_outputs_are_rejected(self, sandbox):
        v = run_attack("nan_constants", sandbox)
        assert v.verdict == "rejected"
        assert next(t for t in v.tiers if t.tier == "T1").status == "failed"

    def test_numpy_arrays_and_python_floats_are_rejected(self, sandbox):
        v = run_attack("wrong_types", sandbox)
        t0 = next(t for t in v.tiers if t.tier == "T0")
        assert v.verdict == "rejected" and t0.status == "failed"
        messages = " ".join(r.message for r in t0.tests)
        assert "numpy.ndarray" in messages and "Python float" in messages

    def test_keyboard_interrupt_is_never_accepted(self, sandbox):
        v = run_attack("keyboard_interrupt", sandbox)
        assert v.verdict == "rejected" and v.error.kind == "runtime_error"

    def test_site_hooks_and_conftest_cannot_be_planted(self, sandbox):
        v = run_attack("site_hooks", sandbox)
        assert v.verdict == "rejected" and "planted" not in v.output, v.output
        assert v.output.count("blocked") == 4
        assert not Path("/tmp/pwned").exists()

    def test_ptrace_and_process_vm_readv_are_blocked(self, sandbox):
        v = run_attack("ptrace_judge", sandbox, JUDGE_PID=os.getpid(), ZYGOTE_PID=sandbox.proc.pid)
        assert v.verdict == "rejected"
        assert "attached" not in v.output and "read memory" not in v.output, v.output
        assert v.output.count("blocked") == 4

    def test_behaving_for_the_first_calls_then_cheating_is_caught(self, sandbox):
        v = run_attack("cheat_after_n", sandbox, REFERENCE=EX.solution_path.read_text())
        assert v.verdict == "rejected"

    def test_introspection_finds_no_judge(self, sandbox):
        v = run_attack("introspect", sandbox)
        assert "judge-like modules: []" in v.output and "oracle objects: False" in v.output
        assert "JUDGE" not in v.output.split("env:")[1].split("\n")[0]
        assert "test_" not in v.output.split("frames:")[1]

    @pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox uid exists only as root")
    def test_no_process_survives_a_grading(self, sandbox):
        run_attack("thread_bomb", sandbox)
        run_attack("sleep_forever", sandbox)
        import time
        for _ in range(50):
            if not sandbox_processes(sandbox.proc.pid):
                break
            time.sleep(0.1)
        assert sandbox_processes(sandbox.proc.pid) == []


SECRET = "judge-test-secret-7f3a9c"


@pytest.mark.usefixtures("then_reference_is_graded")
class TestSecrets:
    def test_the_judges_environment_never_reaches_the_sandbox(self, sandbox, monkeypatch):
        monkeypatch.setenv("JUDGE_API_KEYS", SECRET)
        v = run_attack("read_env", sandbox, JUDGE_PID=os.getpid(), ZYGOTE_PID=sandbox.proc.pid)
        assert SECRET not in v.model_dump_json()
        assert "JUDGE_API_KEYS" not in v.output
        assert f"blocked {os.getpid()} environ" in v.output

    def test_another_submissions_code_is_out_of_reach(self, sandbox):
        marker = f"judge-marker-{os.getpid()}-b71"
        # A slow submission holding the marker runs while another one looks for it.
        holder = f"# {marker}\n" + (ATTACKS / "sleep_forever.py").read_text()
        results = {}
        t = threading.Thread(target=lambda: results.update(
            held=grade(FAST, holder, sandbox=sandbox, seed=1)))
        t.start()
        v = run_attack("find_other_submission", sandbox, alone=False, MARKER=marker)
        t.join()
        assert "hits: []" in v.output, v.output
        assert results["held"].error.kind == "time_limit"


def repo_digest() -> str:
    import hashlib
    import subprocess
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True).stdout
    h = hashlib.sha256()
    for name in sorted(files.split(b"\0")):
        p = REPO_ROOT / name.decode()
        if name and p.is_file():
            h.update(name + p.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module", autouse=True)
def checkout_is_unchanged():
    before = repo_digest()
    yield
    assert repo_digest() == before, "an attack changed a file of the checkout"


# --- the trust boundary (issue 16): what the child sends is data, checked; the judge's work is
# bounded; nothing outlives a grading. Each attack is checked for its verdict and exit code, the
# judge's peak memory during the grading, the size of what it wrote, and what it left behind.


PEAK_MB = 1500  # the judge's peak resident memory during one hostile grading, at most
ARTIFACTS_BYTES = 2 << 20  # what one grading may write to its artifact folder, at most
DOCUMENT_BYTES = 300_000  # the verdict document's JSON, at most


@dataclasses.dataclass
class Outcome:
    verdict: Verdict  # what grade() returned
    peak_mb: float  # the judge process's peak RSS during the grading (VmHWM, reset before it)
    artifacts_bytes: int  # bytes written to the artifact folder
    document_bytes: int  # bytes of the verdict's JSON


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:  # "5": reset VmHWM to the current RSS
        f.write("5")


def _peak_mb() -> float:
    with open("/proc/self/status") as f:
        return int(re.search(r"VmHWM:\s+(\d+)", f.read()).group(1)) / 1024


def _descriptors() -> set[str]:
    """This process's pipes and sockets (what a job holds: its socket and its output pipe)."""
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(("socket:", "pipe:")):
            out.add(f"{fd}:{target}")
    return out


def _mounts(sandbox) -> int:
    with open("/proc/self/mountinfo") as f:
        return sum(str(sandbox.scratch_root) in line for line in f)


def _descendants(pid: int) -> list[int]:
    parent = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    out, frontier = [], {pid}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier}
        out += frontier
    return sorted(out)


def assert_nothing_survives(sandbox, descriptors: set[str], mounts: int) -> None:
    """No child below the zygote, no job, mount, scratch folder or descriptor left."""
    sandbox.drain()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (_descendants(sandbox.proc.pid) or sandbox._jobs):
        time.sleep(0.05)
    assert _descendants(sandbox.proc.pid) == [], "a sandboxed process outlived its grading"
    assert not sandbox._jobs, "a job was never cleaned up"
    assert _mounts(sandbox) == mounts, "a scratch tmpfs outlived its grading"
    assert not any(sandbox.scratch_root.iterdir()), "a scratch folder outlived its grading"
    assert _descriptors() - descriptors == set(), "a descriptor outlived its grading"


def graded(sandbox, source: str, tmp_path: Path | None, exercise=FAST, tiers=None) -> Outcome:
    """Grade ``source`` as a hostile submission (its artifacts under ``tmp_path``, if given) and
    check that nothing outlives it."""
    sandbox.drain()
    descriptors, mounts = _descriptors(), _mounts(sandbox)
    out = tmp_path / "out" if tmp_path is not None else None
    _reset_peak()
    v = grade(exercise, source, sandbox=sandbox, mode="submit", seed=7, out_dir=out, tiers=tiers)
    peak = _peak_mb()
    assert_nothing_survives(sandbox, descriptors, mounts)
    written = sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) if out and out.exists() else 0
    return Outcome(v, peak, written, len(v.model_dump_json()))


def attack_source(name: str, **subst) -> str:
    src = (ATTACKS / f"{name}.py").read_text()
    for k, v in {"REPO": str(REPO_ROOT), **subst}.items():
        src = src.replace("{{" + k + "}}", str(v))
    return src


def assert_bounded(o: Outcome, kind: str | None, exit_code: int = 3) -> None:
    v = o.verdict
    assert v.verdict == "rejected", (v.verdict, v.error)
    assert (v.error.kind if v.error else None) == kind, v.error
    assert v.exit_code == exit_code
    assert o.peak_mb < PEAK_MB, f"the judge's memory peaked at {o.peak_mb:.0f} MB"
    assert o.artifacts_bytes < ARTIFACTS_BYTES and o.document_bytes < DOCUMENT_BYTES, \
        (o.artifacts_bytes, o.document_bytes)


# Frames the forged_frame attack writes (Python expressions over its ``frame`` helper), each
# with the verdict's error kind it must give.
FORGED = {
    "resources_nan": ("call", 'frame({"ok": True, "handle": 0, "result": {"f": 0.0}, '
                              '"ru": [1.0, float("nan")]})', "runtime_error"),
    "resources_huge": ("call", 'frame({"ok": True, "result": {"f": 0.0}, "ru": [1e300, 10**30]})',
                       "runtime_error"),
    "ok_as_int": ("call", 'frame({"ok": 1, "result": {"f": 0.0}, "ru": [0.0, 0]})', "runtime_error"),
    "unknown_field": ("call", 'frame({"ok": True, "result": {"f": 0.0}, "ru": [0.0, 0], "x": 1})',
                      "runtime_error"),
    "load_missing_count": ("import", 'frame({"ok": True, "missing": 5, "ru": [0.0, 0]})',
                           "runtime_error"),
    "load_huge_names": ("import", 'frame({"ok": True, "missing": ["x" * 40_000] * 20, '
                                  '"ru": [0.0, 0]})', "runtime_error"),
    "load_undeclared_name": ("import", 'frame({"ok": True, "missing": ["system"], "ru": [0.0, 0]})',
                             "runtime_error"),
    "load_internal_kind": ("import", 'frame({"ok": False, "kind": "internal", "message": "judge '
                                     'bug", "ru": [0.0, 0]})', "runtime_error"),
    "exception_forged": ("call", 'frame({"ok": False, "exc": {"type": "Value Error\\n" * 50, '
                                 '"message": "x" * 100_000}, "ru": [0.0, 0]})', "runtime_error"),
    "shape_absurd": ("call", 'frame({"ok": True, "result": {"T": 0, "dtype": "float64", '
                             '"shape": [0] + [1 << 28] * 7}, "nb": [0], "ru": [0.0, 0]})',
                     "runtime_error"),
    "float_overflow": ("call", 'frame(None, head=b\'{"ok": true, "result": {"f": 1\' + b"0" * 400 '
                               '+ b\'}, "ru": [0.0, 0]}\')', "runtime_error"),
    "tensor_claimed_twice": ("call", 'frame({"ok": True, "result": {"L": [{"T": 0, "dtype": '
                                     '"float64", "shape": [1]}] * 2}, "nb": [8], "ru": [0.0, 0]}, '
                                     'b"\\0" * 8)', "runtime_error"),
    "header_over_cap": ("call", 'frame({"ok": True, "result": {"f": 0.0}, "ru": [0.0, 0], '
                                '"pad": "x" * (2 << 20)})', "memory_limit"),
    "payload_over_cap": ("call", 'struct.pack("!II", 2, 200 << 20) + b"{}"', "memory_limit"),
}


@pytest.mark.usefixtures("then_reference_is_graded")
class TestBoundary:
    @pytest.mark.parametrize("case", sorted(FORGED))
    def test_a_forged_frame_is_the_submissions_fault(self, sandbox, tmp_path, case):
        phase, expr, kind = FORGED[case]
        o = graded(sandbox, attack_source("forged_frame", FRAME=expr, PHASE=phase, WHAT=case), tmp_path)
        assert_bounded(o, kind)
        assert "forging a frame" in o.verdict.output

    def test_fresh_exception_types_add_nothing_to_the_judge(self, sandbox, tmp_path):
        def remote_classes(cls=RemoteException) -> int:
            return sum(1 + remote_classes(c) for c in cls.__subclasses__())

        before = remote_classes()
        o = graded(sandbox, attack_source("exception_names"), tmp_path)
        assert_bounded(o, None, exit_code=1)  # failed tests, each naming what was raised
        assert remote_classes() == before, "a class was made per exception name"
        messages = [r.message for t in o.verdict.tiers for r in t.tests if r.status == "failed"]
        assert messages and all(len(m) <= 4100 for m in messages)
        # named as raised, made an identifier (the spaces and the newline of the name are _)
        assert any("raised Fresh0_xxx" in m for m in messages), messages[:1]
        assert any("__not_an_identifier: mmm" in m for m in messages), messages[:1]

    def test_an_answer_over_the_cap_is_refused_unread(self, sandbox, tmp_path):
        o = graded(sandbox, attack_source("huge_answers", MB=200), tmp_path)
        assert_bounded(o, "memory_limit")
        assert "64 MB" in o.verdict.error.message

    def test_answers_over_the_gradings_budget_stop_it(self, sandbox, tmp_path):
        o = graded(sandbox, attack_source("huge_answers", MB=40), tmp_path)
        assert_bounded(o, "memory_limit")
        assert "256 MB" in o.verdict.error.message


UNREAD_TEST = '''
import torch
from judge.testing import batch


def test_leaves_its_answer_unread(sub):
    with batch(sub) as b:
        b.f(torch.ones(1))
'''


def tiny_exercise(pack: Path, slug: str, tests: str, limits: str):
    """A one-function exercise, ``f(x) -> Tensor`` (reference: 2 x), with one T0 test file."""
    folder, ref = pack / "exercises" / slug, pack / "reference" / slug
    (folder / "tests").mkdir(parents=True)
    ref.mkdir(parents=True)
    (folder / "exercise.toml").write_text(f'title = "{slug}"\n[[functions]]\nname = "f"\n'
                                          f'signature = "f(x) -> Tensor"\n[limits]\n{limits}\n')
    (folder / "spec.md").write_text(f"# {slug}\n")
    (folder / "starter.py").write_text("def f(x):\n    raise NotImplementedError\n")
    (folder / "experiment.py").write_text("def run(impl, out_dir=None):\n    return {}\n")
    (folder / "tests" / f"test_t0_{slug}.py").write_text(tests)
    for name in ("solution.py", "oracle.py"):
        (ref / name).write_text("def f(x):\n    return 2 * x\n")
    return load_exercise(folder)


@pytest.fixture(scope="module")
def unread_exercise(tmp_path_factory):
    """An exercise whose only test sends a call and never reads its answer: the judge reads it
    while it ends the job, after the tests."""
    return tiny_exercise(tmp_path_factory.mktemp("pack"), "unread", UNREAD_TEST,
                         "call_seconds = 2\ntotal_seconds = 20\ncpu_seconds = 5\nmemory_mb = 512")


@pytest.mark.parametrize("how,kind", [("exit", "runtime_error"), ("os_exit", "runtime_error"),
                                      ("interrupt", "runtime_error"), ("sleep", "time_limit")])
def test_an_unread_answer_that_ends_the_process_still_ends_the_job(sandbox, tmp_path,
                                                                   unread_exercise, how, kind):
    o = graded(sandbox, attack_source("exit_in_unread_answer", HOW=how), tmp_path,
               exercise=unread_exercise)
    assert_bounded(o, kind)
    ok = grade(unread_exercise, "def f(x):\n    return 2 * x\n", sandbox=sandbox)
    assert ok.verdict == "accepted", ok.error


def peak_rss_mb() -> float:
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.usefixtures("then_reference_is_graded")
class TestInputsAndAnswers:
    """What a test sends stays as sent (judge.readonly); an answer's shape is checked before the
    trusted side converts or copies it (T3)."""

    def test_rewriting_an_input_to_steer_the_expectation_is_caught_in_every_test(self, sandbox):
        v = run_attack("steer_expectations", sandbox, REFERENCE=EX.solution_path.read_text())
        assert v.verdict == "rejected" and v.error is None and v.exit_code == 1, v.error
        extreme = next(t for tier in v.tiers for t in tier.tests if t.name == "test_extreme_log_ratios")
        assert extreme.status == "failed"
        assert "modified its input(s) in place" in extreme.message and "`rollout_logp` written at" in extreme.message
        # only the tests whose inputs overflow a ratio see a write; the others pass as for the reference
        assert any(t.status == "passed" for tier in v.tiers for t in tier.tests)

    def test_flipping_an_inputs_requires_grad_is_reported(self, sandbox):
        v = run_attack("flip_requires_grad", sandbox, REFERENCE=EX.solution_path.read_text())
        assert v.verdict == "rejected" and v.error is None and v.exit_code == 1, v.error
        messages = [t.message for tier in v.tiers for t in tier.tests if t.status == "failed"]
        assert any("`rollout_logp` had its requires_grad flag changed from False to True" in m
                   for m in messages), messages

    @pytest.mark.parametrize("shape", [(1, 3000, 100), (1, 335544, 100)])
    def test_a_t3_answer_of_the_wrong_shape_is_feedback_bounded_in_time_and_memory(self, sandbox, shape,
                                                                                 tmp_path):
        gspo = discover()["gspo"]
        src = (ATTACKS / "huge_t3_answer.py").read_text().replace("{{REFERENCE}}", gspo.solution_path.read_text())
        v = grade(gspo, src.replace("{{SHAPE}}", repr(shape)), sandbox=sandbox, mode="submit", seed=7,
                  out_dir=tmp_path)
        assert v.verdict == "rejected"
        assert peak_rss_mb() < 1536, f"the judge's peak memory: {peak_rss_mb():.0f} MB"
        assert sum(a.size for a in v.artifacts) < 1 << 20
        if v.error is not None:  # refused as too large an answer before anything was decoded
            assert v.error.kind != "internal" and v.exit_code != 4, v.error
            return
        t3 = next(t for t in v.tiers if t.tier == "T3")
        assert t3.status == "failed", [(t.status, t.message) for t in t3.tests]
        assert f"sequence_ratio returned shape {shape}, expected (3,)" in t3.tests[0].message


# --- the fuzzer: raw bytes of hypothesis's choosing, written by the child on its job socket
# (at import, or at the start of a direct, batched or differentiated call). Each example checks a
# sane verdict (never the judge's failure), bounded judge memory and document, and that nothing
# outlives it. A few seconds in the normal suite; `make fuzz` runs JUDGE_FUZZ_EXAMPLES of them.


FUZZ_EXAMPLES = int(os.environ.get("JUDGE_FUZZ_EXAMPLES", "12"))  # make fuzz: many more, random
FUZZ_TESTS = '''
import torch
from judge.testing import assert_close, batch


def test_direct_and_backward(sub):
    x = torch.ones(3, requires_grad=True)
    y = sub.f(x)
    assert_close(y, torch.full((3,), 2.0), what="f")
    y.sum().backward()
    assert_close(x.grad, torch.full((3,), 2.0), what="its gradient")


def test_batched(sub):
    with batch(sub) as b:
        pending = [b.f(torch.full((2,), float(k), dtype=torch.float64)) for k in range(3)]
    for k, p in enumerate(pending):
        assert_close(p.value, torch.full((2,), 2.0 * k, dtype=torch.float64), what="f")
'''

_json = st.recursive(st.none() | st.booleans() | st.integers(-(2**70), 2**70)
                     | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=12)


def _tensor_node():
    return st.fixed_dictionaries(
        {"T": st.integers(-1, 3), "dtype": st.sampled_from(list(wire.DTYPES) + ["complex64", 7]),
         "shape": st.lists(st.integers(-1, 1 << 30) | st.just(0), max_size=9)},
        optional={"rg": st.booleans() | st.integers(), "sub": st.text(max_size=8),
                  "st": st.lists(st.integers(-2, 1 << 20), max_size=9)})


_value = st.recursive(
    _json | _tensor_node() | st.fixed_dictionaries({"f": _json}) | st.fixed_dictionaries({"I": _json})
    | st.fixed_dictionaries({"O": _json}, optional={"r": _json}),
    lambda inner: st.fixed_dictionaries({"L": st.lists(inner, max_size=4)})
    | st.fixed_dictionaries({"U": st.lists(inner, max_size=4)})
    | st.fixed_dictionaries({"D": st.lists(st.tuples(st.text(max_size=4), inner).map(list), max_size=3)}),
    max_leaves=8)
_number = (st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(2**66), 2**66)
           | st.sampled_from(["1", None, True]))
_reply = st.fixed_dictionaries({}, optional={
    "ok": st.sampled_from([True, False, 1, 0, None, "true"]),
    "handle": st.integers(-5, 2**64) | st.booleans(),
    "result": _value, "mutated": _value, "eager": _value, "grads": _value, "flipped": _value,
    "nb": st.lists(st.integers(-8, 1 << 20), max_size=4) | _json,
    "ru": st.lists(_number, min_size=0, max_size=3) | _json,
    "exc": st.fixed_dictionaries({}, optional={"type": st.text(max_size=30) | _json,
                                               "message": st.text(max_size=50) | _json,
                                               "where": _json, "kind": _json}) | _json,
    "missing": st.lists(st.sampled_from(["f", "g", "f" * 200]) | _json, max_size=3) | _json,
    "kind": st.sampled_from(["syntax_error", "import_error", "internal", "time_limit"]) | _json,
    "message": st.text(max_size=40), "line": _json, "event": st.sampled_from(["hello", "exited"]),
    "x": _json})


# Well-formed replies of each kind, which the fuzzer mostly mutates a field or two of (a
# nearly-right frame reaches further into the judge than noise does).
_VALID = [
    ({"ok": True, "missing": [], "ru": [1.0, 1000]}, b""),
    ({"ok": False, "kind": "import_error", "message": "E: m", "ru": [1.0, 1000]}, b""),
    ({"ok": True, "handle": 0, "result": {"T": 0, "dtype": "float32", "shape": [3]}, "nb": [12],
      "ru": [1.0, 1000]}, b"\0" * 16),
    ({"ok": True, "handle": 1, "result": {"T": 0, "dtype": "float32", "shape": [3], "rg": True},
      "eager": {"L": [{"T": 1, "dtype": "float32", "shape": [3]}]}, "nb": [12, 12],
      "ru": [1.0, 1000]}, b"\0" * 32),
    ({"ok": True, "result": {"T": 0, "dtype": "float64", "shape": [2]},
      "mutated": {"D": [["0", {"T": 1, "dtype": "float64", "shape": [2]}]]}, "nb": [16, 16],
      "ru": [1.0, 1000]}, b"\0" * 32),
    ({"ok": False, "exc": {"type": "ValueError", "message": "m", "where": "", "kind": None},
      "ru": [1.0, 1000]}, b""),
]
_extreme = (_number | _json | _value | st.lists(_number, max_size=3)
            | st.text(min_size=0, max_size=300) | st.sampled_from(["x" * 5000, 10**400]))


@st.composite
def _reply_frame(draw, load: bool) -> tuple[Any, bytes]:
    import copy as _c
    header, payload = _c.deepcopy(draw(st.sampled_from(_VALID[:2] if load else _VALID[2:])))
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["set", "set", "set", "nested", "drop", "add"]))
        key = draw(st.sampled_from(sorted(header) or ["ok"]))
        if op == "set":
            header[key] = draw(_extreme)
        elif op == "nested" and isinstance(header.get(key), (dict, list)) and header[key]:
            inner = header[key]
            k = draw(st.sampled_from(sorted(inner) if isinstance(inner, dict) else range(len(inner))))
            inner[k] = draw(_extreme)
        elif op == "drop":
            header.pop(key, None)
        else:
            header[draw(st.sampled_from(["x", "nb", "ru", "result", "eager", "grads"]))] = draw(_extreme)
    if draw(st.booleans()):
        payload = draw(st.binary(max_size=48))
    return header, payload


@st.composite
def frames(draw, load: bool = False) -> bytes:
    """A frame, mostly well-formed in its framing, with a header from the reply space above
    (nearly-right replies, any reply-like object, raw JSON) or raw bytes, a payload, and
    sometimes lies in its length prefix; now and then two frames back to back."""
    import json as _j
    import struct as _s
    kind = draw(st.sampled_from(["near", "near", "near", "reply", "json", "raw"]))
    if kind == "raw":
        return draw(st.binary(max_size=64))
    if kind == "near":
        header, payload = draw(_reply_frame(load))
    else:
        header = draw(_reply if kind == "reply" else _json)
        payload = draw(st.binary(max_size=48) | st.integers(0, 64).map(lambda n: b"\0" * n))
    try:
        head = _j.dumps(header, allow_nan=True).encode(errors="surrogatepass")
    except ValueError:  # an int json will not write: the digits by hand
        head = b"{}"
    head_len, size = len(head), len(payload)
    lie = draw(st.sampled_from(["none"] * 6 + ["short", "long", "huge", "header_huge"]))
    if lie == "short":
        size = max(size - 1, 0)
    elif lie == "long":
        size += 1
    elif lie == "huge":
        size = draw(st.integers(1 << 20, (1 << 32) - 1))
    elif lie == "header_huge":
        head_len = draw(st.integers(1 << 20, (1 << 32) - 1))
    out = _s.pack("!II", head_len, size) + head + payload
    return out + (draw(frames(load)) if draw(st.integers(0, 9)) == 0 else b"")


@pytest.fixture(scope="module")
def fuzz_exercise(tmp_path_factory):
    return tiny_exercise(tmp_path_factory.mktemp("pack"), "fuzzed", FUZZ_TESTS,
                         "call_seconds = 0.5\ntotal_seconds = 10\ncpu_seconds = 5\nmemory_mb = 512")


@pytest.mark.usefixtures("then_reference_is_graded")
class TestFuzz:
    def test_frames_from_inside_the_child_give_a_sane_verdict(self, sandbox, fuzz_exercise,
                                                             tmp_path_factory):
        @settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=os.environ.get("JUDGE_FUZZ_RANDOM") != "1",
                  suppress_health_check=list(HealthCheck), database=None)
        @given(data=st.data())
        def one(data) -> None:
            at = data.draw(st.sampled_from([0, 1, 2, 3]), label="at")  # 0: the import's reply
            frame = data.draw(frames(load=at == 0), label="frame")
            src = attack_source("fuzz_frames", FRAME_HEX=frame.hex(), AT=at)
            o = graded(sandbox, src, tmp_path_factory.mktemp("fuzz"), exercise=fuzz_exercise)
            v = o.verdict
            assert v.verdict in ("accepted", "rejected"), (v.verdict, v.error, frame)
            assert v.error is None or v.error.kind in FAILURE_KINDS, v.error
            assert v.exit_code in (0, 1, 3)
            assert o.peak_mb < PEAK_MB and o.document_bytes < DOCUMENT_BYTES
        one()
        honest = grade(fuzz_exercise, "def f(x):\n    return 2 * x\n", sandbox=sandbox)
        assert honest.verdict == "accepted", honest.error


def test_hostile_submissions_leave_every_service_worker_alive(service):
    """Through the service: forged frames, fresh exception names, oversized answers; each is
    graded (rejected, the submission's fault), every worker stays up and the next honest
    submission is accepted."""
    import httpx

    hostile = [attack_source("forged_frame", FRAME=FORGED[case][1], PHASE=FORGED[case][0], WHAT=case)
               for case in ("resources_nan", "load_missing_count", "tensor_claimed_twice")]
    hostile += [attack_source("exception_names"), attack_source("huge_answers", MB=200)]
    with service.client() as c:
        for code in hostile:
            r = c.post("/submit", params={"wait": 60},
                       json={"exercise": "glm5_mis", "code": code, "mode": "submit"})
            assert r.status_code == 200, r.text[:300]
            doc = r.json()
            assert doc["status"] == "done" and doc["verdict"]["verdict"] == "rejected", doc
            assert httpx.get(service.url + "/readyz").json()["workers_ready"] == service.workers
        r = c.post("/submit", params={"wait": 60}, json={
            "exercise": "glm5_mis", "code": EX.solution_path.read_text(), "mode": "submit"})
        assert r.json()["verdict"]["verdict"] == "accepted"
    assert "restarting it" not in service.log(), service.log()  # no worker died and came back
