"""The warm zygote: torch imported and warmed once, one forked child per submission.

Started by the judge as ``python -m sandbox.zygote CTRL_FD [--huge-pages]`` with a scrubbed
environment (``--huge-pages``: for a zygote that will fork many children, see
``collapse_to_huge_pages``). It never imports the judge, ``reference/`` or any test, and never
reads job payloads: the judge passes each job's socket and output pipe over the SOCK_SEQPACKET
control socket (``socket.send_fds``), the zygote forks, and the child locks itself down and talks
to the judge directly. The zygote reports each child's start and exit (status and resource use),
and kills a child on request.

Control messages (JSON, one per packet):
  judge → zygote  {"op": "start", "id", "scratch", "limits"} + fds [job socket, output pipe]
                  {"op": "kill", "id"}
  zygote → judge  {"event": "ready", "pid", "root", "seccomp", "pid_namespace", "cgroups",
                   "landlock_abi", "huge_pages_mb"}
                  {"event": "started", "id", "pid"} | {"event": "failed", "id", "message"}
                  {"event": "exited", "id", "status", "signal", "cpu_ms", "maxrss_kb"}
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import socket
import sys
import traceback


def warm() -> None:
    """Import and exercise what submissions use, so children start in milliseconds."""
    import torch

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    x = torch.randn(8, 8, dtype=torch.float64, requires_grad=True)
    loss = (torch.where(x > 0, x.exp(), x) * torch.ones(8, 8)).logsumexp(-1).clamp(-1, 1).mean()
    loss.backward()
    opt = torch.optim.SGD([x], lr=0.1)
    opt.step()
    torch.nn.functional.softmax(x.float(), -1).topk(2, -1)
    for dtype in (torch.float64, torch.float32):
        _warm_ops(dtype)
    import numpy  # noqa: F401
    import math, typing, dataclasses, functools, itertools, collections  # noqa: E401,F401


def _warm_ops(dtype) -> None:
    """One forward and backward through the tensor operations policy losses are written with.

    A process pays on its first call of each operation (argument parsing tables, dispatch and
    autograd caches: 0.1-0.3 ms per submission function's first call); done here once, every
    child inherits the result instead of paying it in its first tier."""
    import torch
    import torch.nn.functional as F

    x = torch.linspace(-1, 1, 12, dtype=dtype).reshape(4, 3).requires_grad_(True)
    y = (x.detach() * 0.9).clone()
    m = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1], [0, 0, 0]], dtype=torch.bool)
    w = m.to(dtype)
    r = torch.exp(x - y)
    r2 = (x - y).exp().clamp(0.8, 1.2).clamp_min(1e-3).clamp_max(10.0)
    terms = [
        torch.where(m, r, torch.zeros_like(r)).sum(-1) / m.sum(-1).clamp(min=1),
        torch.minimum(r * w, r2 * w).mean(dim=-1, keepdim=True).squeeze(-1),
        torch.maximum(r, r2).min(dim=-1).values + r.max(-1).values,
        torch.clamp(r, min=torch.full_like(r, 0.5), max=torch.ones_like(r) * 2).sum(1),
        (x.square() + 1).sqrt().reciprocal().log().sum(-1) + x.abs().log1p().sum(-1),
        torch.sigmoid(x).sum(-1) + F.logsigmoid(x).sum(-1) + F.softplus(x).sum(-1),
        torch.softmax(x, -1).gather(-1, torch.zeros(4, 1, dtype=torch.long)).squeeze(-1),
        torch.log_softmax(x, -1)[:, 0] + torch.logsumexp(x, -1) + x.tanh().sum(-1),
        torch.std(x, -1) + x.var(-1, unbiased=False) + x.masked_fill(~m, 0).sum(-1),
        torch.einsum("ij,ij->i", x, w) + (x * w).cumsum(-1)[:, -1] + x.pow(2).prod(-1),
        torch.stack([x[:, 0], x[:, 1]], 0).sum(0) + torch.cat([x, y], -1).sum(-1),
        x.unsqueeze(0).expand(2, 4, 3).reshape(8, 3).view(2, 12).t().sum(1)[:4],
        (x.sign() * x).sum(-1) + x.neg().flatten().reshape(4, 3).sum(-1),
    ]
    loss = torch.stack(terms).nan_to_num().sum() / w.sum().clamp(min=1)
    torch.autograd.grad(loss, [x], retain_graph=True)
    loss.backward()
    with torch.no_grad():
        v = x.detach()
        _ = (v.isfinite().all(), v.isnan().any(), (v > 0) & (v < 1) | ~(v == 0), v.ne(0).logical_and(m),
             v.count_nonzero(), v.sort(-1), torch.topk(v, 2, -1), v.argmax(-1), v.norm(), v.long(),
             v.double().float().bool(), v.tolist(), float(v.sum()), v.mean().item(), torch.arange(4),
             torch.ones(2, 3, dtype=dtype), torch.full((2,), 1.0), torch.tensor([1.0, 2.0], dtype=dtype),
             torch.isclose(v, v), torch.allclose(v, v), torch.equal(v, v), v.numel(), v.expand_as(v))


class Zygote:
    def __init__(self, ctrl: socket.socket, huge_pages_mb: int = 0):
        from sandbox import lockdown

        self.ctrl = ctrl
        self.huge_pages_mb = huge_pages_mb  # of its memory on 2 MB pages (cheaper forks)
        self.root = os.geteuid() == 0
        self.read_paths = lockdown.python_paths()  # ~1.3 ms: once here, not in every child
        self.children: dict[int, str] = {}  # pid → job id
        self.by_id: dict[str, int] = {}
        try:
            self.seccomp = lockdown.build_seccomp_filter()
        except Exception as e:  # noqa: BLE001 - pyseccomp or libseccomp missing
            print(f"zygote: seccomp unavailable: {e}", file=sys.stderr)
            self.seccomp = None
        self.pidns_fd = -1
        if self.root:
            try:
                self.pidns_fd = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                self.pidns_fd = -1
        # Each child is PID 1 of its own PID namespace: the same filter fits them all, compiled once.
        self.seccomp_program = None
        if self.seccomp is not None and self.pidns_fd >= 0:
            try:
                self.seccomp_program = lockdown.compile_seccomp(1)
            except Exception as e:  # noqa: BLE001 - children compile their own, as without a PID namespace
                print(f"zygote: could not precompile the seccomp filter: {e}", file=sys.stderr)
        self.cgroups = None
        self.groups: dict[int, str] = {}  # pid → its cgroup
        if self.root:
            from sandbox import cgroups
            try:
                self.cgroups = cgroups.Pool(f"judge-zygote-{os.getpid()}")
            except OSError as e:
                print(f"zygote: no per-job cgroups: {e}", file=sys.stderr)
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)

    def send(self, msg: dict) -> None:
        try:
            self.ctrl.send(json.dumps(msg).encode())
        except OSError:
            pass

    def run(self) -> None:
        from sandbox import landlock
        self.send({"event": "ready", "pid": os.getpid(), "root": self.root,
                   "seccomp": self.seccomp is not None, "pid_namespace": self.pidns_fd >= 0,
                   "cgroups": self.cgroups is not None, "landlock_abi": landlock.abi_version(),
                   "huge_pages_mb": self.huge_pages_mb})
        while True:
            try:
                ready, _, _ = select.select([self.ctrl, self.wake_r], [], [])
            except InterruptedError:
                continue
            if self.wake_r in ready:
                try:
                    while os.read(self.wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
                self.reap()
            if self.ctrl in ready:
                try:
                    data, fds, _, _ = socket.recv_fds(self.ctrl, 65536, 4)
                except OSError:
                    data, fds = b"", []
                if not data:
                    self.shutdown()
                    return
                self.handle(data, fds)

    def handle(self, data: bytes, fds: list[int]) -> None:
        try:
            req = json.loads(data)
            op = req["op"]
        except (ValueError, KeyError, TypeError):
            for fd in fds:
                os.close(fd)
            return
        if op == "start" and len(fds) == 2:
            self.start(req, fds)
        elif op == "kill":
            pid = self.by_id.get(req.get("id"))
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        else:
            for fd in fds:
                os.close(fd)

    def start(self, req: dict, fds: list[int]) -> None:
        from sandbox import lockdown

        job_id = str(req["id"])
        use_pidns = self.pidns_fd >= 0
        go_r, go_w = os.pipe2(os.O_CLOEXEC)  # the child says hello only once it is in its cgroup
        fds = fds + [go_r]
        try:
            if use_pidns:  # the child becomes PID 1 of a fresh PID namespace
                lockdown.unshare(lockdown.CLONE_NEWPID)
            pid = os.fork()
        except OSError as e:
            pid = -1
            self.send({"event": "failed", "id": job_id, "message": f"fork failed: {e}"})
        if pid == 0:
            self.become_child(req, fds)  # never returns
        if use_pidns:  # the zygote's next children start from its own namespace again
            lockdown.setns(self.pidns_fd, lockdown.CLONE_NEWPID)
        for fd in fds:
            os.close(fd)
        if pid > 0 and self.cgroups is not None:
            limits = req["limits"]
            try:
                self.groups[pid] = self.cgroups.enter(
                    pid, (int(limits["memory_mb"]) + 256) << 20, int(limits.get("max_pids", 64)))
            except OSError as e:
                print(f"zygote: could not enter a cgroup: {e}", file=sys.stderr)
                os.kill(pid, signal.SIGKILL)
        os.write(go_w, b"g") if pid > 0 else None
        os.close(go_w)
        if pid < 0:
            return
        self.children[pid] = job_id
        self.by_id[job_id] = pid
        self.send({"event": "started", "id": job_id, "pid": pid})

    def become_child(self, req: dict, fds: list[int]) -> None:
        code = 70
        try:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            job_fd, out_fd, go_fd = fds
            os.dup2(out_fd, 1)
            os.dup2(out_fd, 2)
            null = os.open("/dev/null", os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(job_fd, 3)
            os.dup2(go_fd, 4)
            os.closerange(5, 65536)
            from sandbox import child, lockdown, wire

            limits = req["limits"]
            limits["address_space"] = _vm_size() + int(limits["memory_mb"]) * (1 << 20)
            env = {"PATH": "/usr/bin:/bin", "HOME": req["scratch"], "TMPDIR": req["scratch"],
                   "TORCHINDUCTOR_CACHE_DIR": req["scratch"], "OMP_NUM_THREADS": "1",
                   "MPLCONFIGDIR": req["scratch"], "LANG": "C.UTF-8", **lockdown.NO_ACCELERATORS,
                   **lockdown.EAGER_COMPILE}
            os.environ.clear()
            os.environ.update(env)
            rep = lockdown.isolate(scratch=req["scratch"], root=self.root, seccomp_filter=self.seccomp,
                                   limits=limits, read_paths=self.read_paths,
                                   seccomp_program=self.seccomp_program)
            sock = socket.socket(fileno=3)
            if req.get("prewarm"):
                try:
                    child.prewarm()
                except Exception:  # noqa: BLE001 - a cold first call is slower, not wrong
                    pass
            # Only now wait until the zygote has placed us in our cgroup, before any submission
            # code can run: moving a process into a cgroup (v1) takes the kernel 10-25 ms of
            # waiting, without CPU, and the lockdown and warm-up above run meanwhile instead of
            # after it, which kept a spare's CPU out of the window after a verdict and put it in
            # the next grading. (What the lockdown and warm-up allocate is charged to the
            # zygote's group, not the job's: a few MB, the same for every job.)
            if os.read(4, 1) != b"g":  # the zygote could not place us in a cgroup
                os._exit(71)
            os.close(4)
            wire.send(sock, {"event": "hello", "layers": rep.layers, "missing": rep.missing})
            child.Session(sock).serve()
            code = 0
        except BaseException:  # noqa: BLE001
            try:
                traceback.print_exc()
            except BaseException:  # noqa: BLE001
                pass
        finally:
            os._exit(code)

    def reap(self) -> None:
        while self.children:
            try:
                pid, status, ru = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            job_id = self.children.pop(pid, None)
            if job_id is None:
                continue
            self.by_id.pop(job_id, None)
            leaf = self.groups.pop(pid, None)
            oom = False
            if leaf is not None:
                oom = self.cgroups.oom_killed(leaf)
                self.cgroups.release(leaf)
            self.send({
                "oom": oom,
                "event": "exited", "id": job_id,
                "status": os.waitstatus_to_exitcode(status),
                "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0,
                "cpu_ms": round((ru.ru_utime + ru.ru_stime) * 1000, 1),
                "maxrss_kb": ru.ru_maxrss,
            })
        if self.cgroups is not None:
            self.cgroups.refill()

    def shutdown(self) -> None:
        for pid in list(self.children):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in list(self.children):
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
            if pid in self.groups:
                self.cgroups.release(self.groups.pop(pid))
        if self.cgroups is not None:
            self.cgroups.close()


def _vm_size() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


MADV_COLLAPSE = 25  # Linux 6.1+
HUGE = 2 << 20


def collapse_to_huge_pages() -> int:
    """Back the zygote's private memory (~200 MB after torch's import) with 2 MB pages, once.

    ``fork`` copies one page-table entry per 4 kB page a process has written, and the child's
    exit tears them down: ~5 ms each way for this zygote, on every submission. With huge pages
    it copies one entry per 2 MB (measured: fork 5.4 -> 2.5 ms, a spare's CPU 12 -> 9 ms). The
    collapse itself takes ~0.5 s once, so only a zygote that forks many children does it (the
    service's, not ``judge local``'s, which forks one). Only the existing memory is collapsed
    (MADV_COLLAPSE, regardless of the system's THP mode; no MADV_HUGEPAGE, so later faults still
    get 4 kB pages); a child's first write to a huge page splits the mapping and copies 4 kB, as
    before. Returns the MB collapsed (0 where the kernel cannot: older than 6.1, or THP
    unavailable).
    """
    import ctypes
    import re

    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return 0
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    done = 0
    with open("/proc/self/maps") as f:
        regions = f.read().splitlines()
    for line in regions:  # private anonymous read-write memory: the heap and malloc's arenas
        m = re.match(r"([0-9a-f]+)-([0-9a-f]+) rw-p 00000000 00:00 0\s*(\[heap\])?\s*$", line)
        if not m:
            continue
        start = (int(m.group(1), 16) + HUGE - 1) & ~(HUGE - 1)
        end = int(m.group(2), 16) & ~(HUGE - 1)
        if end - start >= HUGE and madvise(start, end - start, MADV_COLLAPSE) == 0:
            done += end - start
    return done >> 20


def main() -> None:
    ctrl = socket.socket(fileno=int(sys.argv[1]))
    from sandbox import child, lockdown, wire  # noqa: F401 - imported before any fork
    warm()
    gc.collect()
    gc.freeze()
    huge_mb = collapse_to_huge_pages() if "--huge-pages" in sys.argv[2:] else 0
    Zygote(ctrl, huge_mb).run()


if __name__ == "__main__":
    main()
