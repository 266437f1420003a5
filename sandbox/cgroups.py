"""A memory + pids cgroup (v1) per child, when the zygote runs as root and the hierarchy exists.

Memory shared with the zygote is not charged to the child; its own allocations are, and the OOM
killer lands exactly at the limit. ``pids.max`` caps thread explosions and, with the PID
namespace, lets nothing outlive the job. Groups are pre-created in a small pool: a mkdir when
jobs are spaced out costs 5–20 ms, taking one from the pool does not.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")


def _own(controller: str) -> Path | None:
    """The cgroup directory this process lives in for ``controller`` (v1 only)."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controller in controllers.split(","):
                d = ROOT / controller / path.lstrip("/")
                return d if d.is_dir() else None
    except OSError:
        return None
    return None


class Pool:
    def __init__(self, name: str, size: int = 4):
        mem, pids = _own("memory"), _own("pids")
        if mem is None or pids is None:
            raise OSError("cgroup v1 memory and pids controllers are not available")
        self.bases = [mem / name, pids / name]
        for b in self.bases:
            b.mkdir(exist_ok=True)
        self.size = size
        self.free: list[str] = []
        self.counter = 0
        self.refill()

    def refill(self) -> None:
        while len(self.free) < self.size:
            self.counter += 1
            leaf = f"job{self.counter}"
            for b in self.bases:
                (b / leaf).mkdir(exist_ok=True)
            self.free.append(leaf)

    def enter(self, pid: int, memory_bytes: int, max_pids: int) -> str:
        """Move ``pid`` into a fresh group with these limits; returns the group's name."""
        leaf = self.free.pop() if self.free else None
        if leaf is None:
            self.refill()
            leaf = self.free.pop()
        mem, pids = (b / leaf for b in self.bases)
        (mem / "memory.limit_in_bytes").write_text(str(memory_bytes))
        try:
            (mem / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
        except OSError:
            pass  # no swap accounting on this kernel
        (pids / "pids.max").write_text(str(max_pids))
        for d in (mem, pids):
            (d / "cgroup.procs").write_text(str(pid))
        return leaf

    def oom_killed(self, leaf: str) -> bool:
        try:
            text = (self.bases[0] / leaf / "memory.oom_control").read_text()
            kills = dict(line.split() for line in text.splitlines()).get("oom_kill", "0")
            failcnt = int((self.bases[0] / leaf / "memory.failcnt").read_text())
            return int(kills) > 0 or failcnt > 0
        except (OSError, ValueError):
            return False

    def release(self, leaf: str) -> None:
        """Kill anything left in the group, then remove it."""
        for b in self.bases:
            d = b / leaf
            try:
                for pid in (d / "cgroup.procs").read_text().split():
                    try:
                        os.kill(int(pid), 9)
                    except ProcessLookupError:
                        pass
                d.rmdir()
            except OSError:
                pass

    def close(self) -> None:
        for leaf in self.free:
            self.release(leaf)
        for b in self.bases:
            try:
                b.rmdir()
            except OSError:
                pass
