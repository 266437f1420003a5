"""Malicious submissions: each is rejected with its kind of verdict, leaves nothing behind, and
the judge grades the next (correct) submission normally.

Each attack prints what happened (captured output is evidence for this test, never parsed by
the judge) and, if the attack succeeded, would make itself accepted by exec-ing the reference.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import threading
from pathlib import Path

import pytest

from judge.exercise import REPO_ROOT, Limits, discover
from judge.grading import grade
from judge.models import Verdict

ATTACKS = Path(__file__).parent / "attacks"
EX = discover()["glm5_mis"]
# Tight limits keep the time and memory attacks quick.
FAST = dataclasses.replace(EX, limits=Limits(call_seconds=2, total_seconds=20, cpu_seconds=5,
                                             memory_mb=1024))


def run_attack(name: str, sandbox, **subst) -> Verdict:
    src = (ATTACKS / f"{name}.py").read_text()
    subst.setdefault("REPO", str(REPO_ROOT))
    for k, v in subst.items():
        src = src.replace("{{" + k + "}}", str(v))
    return grade(FAST, src, sandbox=sandbox, mode="submit", seed=7)


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
        v = run_attack("find_other_submission", sandbox, MARKER=marker)
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
