"""``make bench``: how fast a verdict arrives, measured against the alternatives in one run.

Prints a table and writes ``bench-results.json``:

- ``floor_ms``: the tiers in-process against the reference, no sandbox, no HTTP (the design's limit),
  measured in turns with the service's submissions (``service_latency``)
- ``service_p50_ms`` / ``service_p95_ms``: ``POST /submit?wait`` end to end on a warm service,
  to the verdict; the next submission goes once the previous one's plots are drawn
- ``fresh_interpreter_ms``: a fresh interpreter per submission that imports torch and grades
  (what a subprocess- or container-per-submission judge pays)
- ``throughput``: submissions per second with 1 and 2 workers
- ``extra_mb_per_submission``: the service's extra memory (sum of PSS) per running submission
  (its child, forked ahead as a spare, included), and ``rest_mb``, its memory at rest
- ``judge_local``: the start-up / grading split of ``judge local``
- ``calls`` / ``round_trips`` per exercise: the calls a grading makes into the sandbox, and the
  waits they take (``judge.testing.batch`` sends calls without waiting for each answer)
- ``mixed``: 200 submissions from two clients on a 2-worker service (``judge.service.mixed``): a
  hostile burst of every attack, correct and wrong solutions, and an honest client submitting
  one at a time: the honest client's p50/p95, unexpected verdicts, workers replaced, and the
  trusted side's RSS at rest and after

Targets (2 cores): service p50 ≤ 1.3 × floor + 15 ms; fresh ≥ 20 × service p50; 2 workers ≥ 1.7 ×
one; ≤ 40 MB per concurrent submission; mixed run: honest p95 < 1 s, every worker alive, RSS
after within 10% of rest. Ratios are computed from numbers of the same run. The latest results,
dated, and what was tried to improve them are in docs/performance.md: add each new run's there.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from judge.exercise import REPO_ROOT, discover

KEY = "bench-key"
QUIET_S = 0.1  # the pause before each in-process floor grading (see service_latency)


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def _floor_once(ex, src: str, seed: int, out_dir: Path) -> float:
    """One grading in-process, to its verdict (the plots, written after the verdict, are not
    counted, exactly as the service answers before drawing them)."""
    from judge.grading import grade

    at: list[float] = []
    t = time.perf_counter()
    v = grade(ex, src, sandbox=None, seed=seed, out_dir=out_dir, on_verdict=lambda _: at.append(time.perf_counter()))
    took = ((at[0] if at else time.perf_counter()) - t) * 1000
    assert v.verdict == "accepted", (ex.slug, v.error)
    return took


FRESH = """
import sys, time
t = time.perf_counter()
import torch
from judge.exercise import resolve
from judge.grading import grade
ex = resolve(sys.argv[1])
v = grade(ex, ex.solution_path.read_text(), sandbox=None, out_dir=__import__("pathlib").Path(sys.argv[2]))
assert v.verdict == "accepted"
"""


def fresh_interpreter_ms(exercises, reps: int) -> dict[str, float]:
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for slug in exercises:
            times = []
            for i in range(reps):
                t = time.perf_counter()
                subprocess.run([sys.executable, "-c", FRESH, slug, f"{tmp}/{slug}{i}"], check=True,
                               cwd=REPO_ROOT, capture_output=True)
                times.append((time.perf_counter() - t) * 1000)
            out[slug] = round(statistics.median(times), 1)
    return out


class Service:
    """A real ``judge serve`` on a free loopback port, with its own database; ``data_dir`` may
    be shared so that the exercises' previews are built once per bench, not per service."""

    def __init__(self, workers: int, data_dir: str | None = None, keys: tuple[str, ...] = (KEY,)):
        self.tmp = tempfile.TemporaryDirectory()
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        env = dict(os.environ, JUDGE_API_KEYS=",".join(keys), JUDGE_WORKERS=str(workers),
                   JUDGE_DATABASE_URL=f"sqlite:///{self.tmp.name}/judge.db",
                   JUDGE_DATA_DIR=data_dir or f"{self.tmp.name}/data", JUDGE_RATE_LIMIT="100000",
                   JUDGE_QUEUE_MAX="100000", JUDGE_CLIENT_QUEUE_MAX="100000")
        self.proc = subprocess.Popen([sys.executable, "-m", "judge.cli", "serve", "--host",
                                      "127.0.0.1", "--port", str(self.port)], env=env, cwd=REPO_ROOT,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        self.url = f"http://127.0.0.1:{self.port}"
        self.client = httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {KEY}"},
                                   timeout=120)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if self.client.get("/readyz").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.close()
        raise RuntimeError("the service did not become ready")

    def submit(self, slug: str, code: str) -> dict:
        r = self.client.post("/submit", params={"wait": 60}, json={"exercise": slug, "code": code,
                                                                    "mode": "submit"})
        r.raise_for_status()
        return r.json()

    def settle(self, sid: str) -> None:
        """Wait until the submission's plots, drawn after its verdict, are there."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            doc = self.client.get(f"/submissions/{sid}").json()
            if not (doc.get("verdict") or {}).get("artifacts_pending"):
                return
            time.sleep(0.005)

    def pids(self) -> list[int]:
        """The service's process tree."""
        children: dict[int, list[int]] = {}
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                children.setdefault(_ppid(int(d.name)), []).append(int(d.name))
        out, todo = [], [self.proc.pid]
        while todo:
            p = todo.pop()
            out.append(p)
            todo += children.get(p, [])
        return out

    def pss_mb(self, pids: list[int] | None = None, fields: tuple[str, ...] = ("Pss:",)) -> float:
        """Memory of ``pids`` (the whole service by default): PSS, or other smaps fields."""
        total = 0
        for pid in self.pids() if pids is None else pids:
            try:
                for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                    if line.startswith(fields):
                        total += int(line.split()[1])
            except OSError:
                pass
        return total / 1024

    def spare_pids(self) -> list[int]:
        """The children the zygotes forked ahead (at rest, every one is a spare)."""
        pids, zygotes = self.pids(), []
        for pid in pids:
            try:
                if b"sandbox.zygote" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    zygotes.append(pid)
            except OSError:
                pass
        return [p for p in pids if _ppid(p) in zygotes]

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, 15)
            self.proc.wait(10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, 9)
        self.tmp.cleanup()


def wait_for_previews(data_dir: str, exercises, timeout: float = 120.0) -> None:
    """Idle workers build each exercise's preview plots once; measure after they are done."""
    from judge.service.catalog import preview_digest

    want = [Path(data_dir) / "previews" / slug / preview_digest(ex) for slug, ex in exercises.items()]
    deadline = time.monotonic() + timeout
    while not all(p.is_dir() for p in want) and time.monotonic() < deadline:
        time.sleep(0.1)


def _stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (state first); [] if it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _ppid(pid: int) -> int:
    f = _stat(pid)
    return int(f[1]) if len(f) > 1 else -1


def service_latency(svc: Service, exercises, n: int) -> dict[str, dict[str, float]]:
    """Each exercise's p50/p95 on the service and its floor, measured in turns: a grading
    in-process, then a submission, ``n`` times. This machine's speed drifts by a quarter over
    minutes (other tenants); measured in turns, a ratio compares numbers of the same moments."""
    from judge.grading import warm

    warm(exercises.values())
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for slug, ex in exercises.items():
            code = ex.solution_path.read_text()
            _floor_once(ex, code, 0, Path(tmp) / f"{slug}-warm")  # not counted: its first grading
            for _ in range(3):
                svc.submit(slug, code)  # warm this exercise's paths
            times, floors = [], []
            for i in range(n):
                # the service idle first: a closed job's successor is forked and warmed, and its
                # files wiped, just after the plots (judge.tuning.SPARE_DELAY), not the floor's cost
                time.sleep(QUIET_S)
                floors.append(_floor_once(ex, code, i, Path(tmp) / f"{slug}{i}"))
                t = time.perf_counter()
                doc = svc.submit(slug, code)
                times.append((time.perf_counter() - t) * 1000)
                assert doc["verdict"]["verdict"] == "accepted", doc
                svc.settle(doc["id"])  # like a learner, take the plots before submitting again
            res = doc["verdict"]["resources"]
            out[slug] = {"p50": round(_pct(times, 0.5), 1), "p95": round(_pct(times, 0.95), 1),
                         "floor": round(statistics.median(floors), 1),
                         "calls": res.get("calls", 0), "round_trips": res.get("round_trips", 0)}
    return out


def _cpu_ms(pid: int) -> float:
    """CPU time of ``pid`` and of its children it has reaped (the zygote reaps each sandbox)."""
    f = _stat(pid)
    return sum(int(x) for x in f[11:15]) * 1000 / os.sysconf("SC_CLK_TCK")


def _busy_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine so far."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields) - fields[3] - fields[4], sum(fields)


def throughput(svc: Service, workers: int, slug: str, code: str, n: int) -> dict[str, float]:
    """Submissions per second with ``2 × workers`` clients, and what they cost: the service's CPU
    per submission (its sandboxes included) and how many of the machine's cores were busy."""
    for _ in range(2 * workers):
        svc.submit(slug, code)
    errors: list = []
    pids = svc.pids()
    cpu0, (busy0, total0) = sum(_cpu_ms(p) for p in pids), _busy_jiffies()

    def client(k: int) -> None:
        try:
            for _ in range(k):
                svc.submit(slug, code)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=client, args=(n // (2 * workers),)) for _ in range(2 * workers)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    elapsed = time.perf_counter() - t
    if errors:
        raise errors[0]
    done = (n // (2 * workers)) * 2 * workers
    cpu = sum(_cpu_ms(p) for p in pids) - cpu0
    busy, total = _busy_jiffies()
    return {"per_second": round(done / elapsed, 2), "cpu_ms_per_submission": round(cpu / done, 1),
            "cores_busy": round((os.cpu_count() or 1) * (busy - busy0) / max(total - total0, 1), 2)}


SLOW = "\nimport time as _t\n_t.sleep({secs})\n"


def memory(svc: Service, slug: str, code: str, concurrent: int = 2) -> tuple[float, float]:
    """(memory at rest, extra MB per running submission) of a ``concurrent``-worker service."""
    for _ in range(2 * concurrent):
        svc.submit(slug, code)
    time.sleep(1.0)
    rest = svc.pss_mb()
    spares = svc.spare_pids()
    # A running submission's child was forked ahead as a spare, so the memory at rest holds it
    # already: count its own pages (the rest it shares with its zygote), plus what grading adds.
    spare_mb = (svc.pss_mb(spares, ("Private_Clean:", "Private_Dirty:")) / len(spares)
                if spares else 0.0)
    slow = code + SLOW.format(secs=3)  # holds its sandbox open while we measure
    threads = [threading.Thread(target=svc.submit, args=(slug, slow)) for _ in range(concurrent)]
    for th in threads:
        th.start()
    time.sleep(1.5)
    busy = max(svc.pss_mb() for _ in range(3))
    for th in threads:
        th.join()
    return round(rest, 1), round((busy - rest) / concurrent + spare_mb, 1)


def mixed_run(svc: Service, ex, n: int) -> dict:
    """The mixed run of ``n`` submissions (a fifth of them the honest client's), on ``svc``
    (started with two keys), after a warm-up; see ``judge.service.mixed``."""
    from judge.service import mixed

    warm = [mixed.Submission("hostile", "correct", ex.solution_path.read_text(), "accepted")
            for _ in range(4)]
    mixed.run(svc.url, MIXED_KEYS, ex.slug, warm, [])
    time.sleep(1.0)
    server = svc.proc.pid
    workers = mixed.workers(server)
    rest = mixed.trusted_rss_mb(server)
    zygote = next((z for w in workers for z in mixed.children(w)), 0)
    subst = {"REPO": REPO_ROOT, "JUDGE_PID": server, "ZYGOTE_PID": zygote,
             "DATABASE": f"{svc.tmp.name}/judge.db", "TARGET": f"{svc.tmp.name}/pwned.txt",
             "NONCE": f"bench-{server}", "MARKER": "honest-marker", "PORT": 9,
             "REFERENCE": ex.solution_path.read_text()}
    hostile, honest = mixed.workload(ex, subst, hostile=n - n // 5, honest=n // 5, slow=True)
    t = time.perf_counter()
    mixed.run(svc.url, MIXED_KEYS, ex.slug, hostile, honest, timeout=1800)
    took = time.perf_counter() - t
    time.sleep(1.0)
    out = mixed.summary(hostile, honest)
    out.update({"workers_replaced": len(set(workers) - set(mixed.workers(server))),
                "rest_mb": round(rest, 1), "after_mb": round(mixed.trusted_rss_mb(server), 1),
                "max_claims_ahead": max(mixed.claims_ahead(Path(svc.tmp.name) / "judge.db", honest)),
                "seconds": round(took, 1), "unexpected": len(out["unexpected"])})
    return out


MIXED_KEYS = ("bench-hostile-key", "bench-honest-key")


def diagnosis_cost(exercises) -> dict:
    """What naming the misconception adds to a rejected grading (judge.diagnose, on the trusted
    side): every known-wrong solution graded in this process, with the run seed; the diagnosis'
    milliseconds (median, max) and how many were named as themselves. Accepted gradings pay 0."""
    from judge.grading import grade

    costs, named, total = [], 0, 0
    for ex in exercises.values():
        for w in ex.wrong_solutions():
            v = grade(ex, w.source, sandbox=None, mode="submit", seed=ex.run_seed, tiers=[w.expect_tier])
            costs.append(v.timings.diagnosis_ms)
            total += 1
            named += any(r.misconception is not None and r.misconception.name == w.name
                         for t in v.tiers for r in t.tests)
    return {"median_ms": round(_pct(costs, 0.5), 1) if costs else 0.0,
            "max_ms": round(max(costs), 1) if costs else 0.0, "named": named, "wrong": total}


def judge_local_split() -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "judge.cli", "local", "exercises/glm5_mis",
                            "--reference", "--json", "--out", tmp], cwd=REPO_ROOT,
                           capture_output=True, text=True, check=True)
        wall = (time.perf_counter() - t) * 1000
    timings = json.loads(r.stdout)["timings"]
    return {"startup_ms": timings["startup_ms"], "load_ms": timings["load_ms"],
            "grading_ms": timings["grading_ms"], "wall_ms": round(wall, 1)}


def watch_latency(saves: int = 6, slug: str = "gspo", mode: str = "submit") -> dict:
    """``judge local --watch``: from a save to the whole table on stdout (the poll's delay
    included), for saves after the first grading, alternating the reference (accepted) and the
    starter (rejected; its known mistakes are named after the table). Each save waits for the
    previous grading's after-work (diagnosis, plots). Median and max, ms."""
    import queue

    ex = discover()[slug]
    texts = [ex.starter_path.read_text(), ex.solution_path.read_text()]
    with tempfile.TemporaryDirectory() as tmp:
        sol = Path(tmp) / "sol.py"
        sol.write_text(texts[1])
        proc = subprocess.Popen([sys.executable, "-m", "judge.cli", "local", "--watch", f"exercises/{slug}",
                                 str(sol), "--mode", mode, "--out", str(Path(tmp) / "out")], cwd=REPO_ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines: queue.Queue = queue.Queue()
        for stream in (proc.stdout, proc.stderr):
            threading.Thread(target=lambda s=stream: [lines.put(x) for x in s], daemon=True).start()

        def seen(prefix: str, timeout: float) -> float:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
                if line.startswith(prefix):
                    return time.perf_counter()
            raise TimeoutError(f"judge local --watch printed no {prefix!r}")

        took: dict[str, list[float]] = {"accepted": [], "rejected": []}
        try:
            seen("[watch] waiting", 300)
            for i in range(saves):
                time.sleep(0.1)
                t = time.perf_counter()
                sol.write_text(texts[i % 2])
                took["rejected" if i % 2 == 0 else "accepted"].append((seen("  replay with:", 60) - t) * 1000)
                seen("[watch] waiting", 60)  # the diagnosis and the plots come after the table
        finally:
            proc.terminate()
            proc.wait(30)
    every = took["accepted"] + took["rejected"]
    return {"median_ms": round(statistics.median(every), 1), "max_ms": round(max(every), 1),
            "accepted_median_ms": round(statistics.median(took["accepted"]), 1),
            "rejected_median_ms": round(statistics.median(took["rejected"]), 1), "saves": saves,
            "exercise": slug, "mode": mode}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="judge-bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--submissions", type=int, default=100, help="per exercise, for the service")
    p.add_argument("--fresh-reps", type=int, default=2)
    p.add_argument("--throughput-n", type=int, default=48)
    p.add_argument("--mixed-n", type=int, default=200, help="submissions of the mixed run (0: skip it)")
    p.add_argument("--out", type=Path, default=REPO_ROOT / "bench-results.json")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    exercises = discover()
    glm = exercises["glm5_mis"]
    code = glm.solution_path.read_text()

    with tempfile.TemporaryDirectory() as shared:
        svc = Service(workers=2, data_dir=shared)
        try:
            wait_for_previews(shared, exercises)
            print("service latency and floor, in turns …", file=sys.stderr)
            service = service_latency(svc, exercises, args.submissions)
            floor = {slug: e["floor"] for slug, e in service.items()}
            print("throughput …", file=sys.stderr)
            tput = {"2": throughput(svc, 2, "glm5_mis", code, args.throughput_n)}
            print("memory …", file=sys.stderr)
            rest, extra = memory(svc, "glm5_mis", code)
        finally:
            svc.close()
        one = Service(workers=1, data_dir=shared)
        try:
            tput = {"1": throughput(one, 1, "glm5_mis", code, args.throughput_n), **tput}
        finally:
            one.close()
        mixed = None
        if args.mixed_n:
            print("mixed run …", file=sys.stderr)
            two = Service(workers=2, data_dir=shared, keys=MIXED_KEYS)
            try:
                mixed = mixed_run(two, glm, args.mixed_n)
            finally:
                two.close()
    print("fresh interpreter …", file=sys.stderr)
    fresh = fresh_interpreter_ms(exercises, args.fresh_reps)
    print("judge local …", file=sys.stderr)
    local = judge_local_split()
    print("diagnosis …", file=sys.stderr)
    diagnosis = diagnosis_cost(exercises)
    print("judge local --watch …", file=sys.stderr)
    watch = watch_latency()

    result = {
        "exercises": {slug: {"floor_ms": floor[slug], "service_p50_ms": service[slug]["p50"],
                             "service_p95_ms": service[slug]["p95"],
                             "fresh_interpreter_ms": fresh[slug], "calls": service[slug]["calls"],
                             "round_trips": service[slug]["round_trips"]} for slug in exercises},
        "throughput": {k: v["per_second"] for k, v in tput.items()},
        # what a submission costs, measured during the throughput runs: the service's CPU time per
        # submission (API, workers, zygotes and their sandboxes) and the machine's busy cores
        "throughput_cost": {k: {"cpu_ms_per_submission": v["cpu_ms_per_submission"],
                                "cores_busy": v["cores_busy"]} for k, v in tput.items()},
        "extra_mb_per_submission": extra,
        "rest_mb": rest,
        "judge_local": local,
        "mixed": mixed,
        "diagnosis": diagnosis,
        "watch": watch,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(), "torch": __import__("torch").__version__},
        "bench_seconds": round(time.perf_counter() - t0, 1),
    }
    args.out.write_text(json.dumps(result, indent=2))
    print(render(result))
    return 0


def render(r: dict) -> str:
    lines = [f"{'exercise':<16} {'floor':>8} {'p50':>8} {'p95':>8} {'fresh':>9} "
             f"{'p50/target':>11} {'fresh/p50':>10} {'calls':>6} {'trips':>6}"]
    for slug, e in r["exercises"].items():
        target = 1.3 * e["floor_ms"] + 15
        lines.append(f"{slug:<16} {e['floor_ms']:>8.1f} {e['service_p50_ms']:>8.1f} "
                     f"{e['service_p95_ms']:>8.1f} {e['fresh_interpreter_ms']:>9.1f} "
                     f"{e['service_p50_ms'] / target:>11.2f} "
                     f"{e['fresh_interpreter_ms'] / e['service_p50_ms']:>10.1f} "
                     f"{e.get('calls', 0):>6} {e.get('round_trips', 0):>6}")
    t = r["throughput"]
    lines += ["", f"throughput: 1 worker {t['1']}/s, 2 workers {t['2']}/s "
                  f"(×{t['2'] / t['1']:.2f})"]
    for k, c in sorted(r.get("throughput_cost", {}).items()):
        lines.append(f"  {k} worker(s): {c['cpu_ms_per_submission']:.0f} ms of CPU per submission, "
                     f"{c['cores_busy']:.2f} cores busy")
    lines += [f"memory: {r['rest_mb']:.0f} MB at rest, {r['extra_mb_per_submission']:.1f} MB extra "
              f"per running submission",
              *([] if not r.get("mixed") else [
                  f"mixed run: {r['mixed']['hostile']} hostile + {r['mixed']['honest']} honest submissions "
                  f"in {r['mixed']['seconds']:.0f} s; honest p50 {r['mixed']['honest_p50_ms']:.0f} ms, "
                  f"p95 {r['mixed']['honest_p95_ms']:.0f} ms (target < 1000); "
                  f"{r['mixed']['unexpected']} unexpected verdict(s), {r['mixed']['workers_replaced']} "
                  f"worker(s) replaced, RSS {r['mixed']['rest_mb']:.0f} MB at rest, "
                  f"{r['mixed']['after_mb']:.0f} MB after (x{r['mixed']['after_mb'] / r['mixed']['rest_mb']:.2f})"]),
              *([] if not r.get("diagnosis") else [
                  f"diagnosis (rejected gradings only): median {r['diagnosis']['median_ms']:.0f} ms, "
                  f"max {r['diagnosis']['max_ms']:.0f} ms; {r['diagnosis']['named']}/{r['diagnosis']['wrong']} "
                  f"known-wrong solutions named as themselves"]),
              *([] if not r.get("watch") else [
                  f"judge local --watch ({r['watch']['exercise']}, {r['watch'].get('mode', 'submit')} mode, "
                  f"{r['watch']['saves']} saves): save to table "
                  f"median {r['watch']['median_ms']:.0f} ms, max {r['watch']['max_ms']:.0f} ms (target <= 150); "
                  f"accepted {r['watch']['accepted_median_ms']:.0f} ms, rejected {r['watch']['rejected_median_ms']:.0f} ms"]),
              f"judge local: start-up {r['judge_local']['startup_ms']:.0f} ms, grading "
              f"{r['judge_local']['grading_ms']:.0f} ms (wall {r['judge_local']['wall_ms']:.0f} ms)",
              f"bench took {r['bench_seconds']:.0f} s; all times in ms"]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
