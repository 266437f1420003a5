"""Hosts on one machine: Linux network namespaces joined to a bridge by veth pairs.

The multi-host tests (tests/test_netns_hosts.py) and the throughput bench
(judge.service.bench_hosts) need machines that reach each other only over a network they can cut.
A ``Topology`` is one bridge in the root namespace (address ``.1`` of a private /24: where the
tests and the bench themselves connect from) and any number of ``Host``s, each a namespace of its
own whose ``eth0`` is one end of a veth pair, the other end a port of the bridge. Cutting a
host's link is ``ip link set eth0 down`` inside its namespace, as when a cable is pulled.

Clean-up is unconditional. Every name carries a tag unique to the run and the owner's pid
(namespaces ``judge-<pid>-<tag>-<host>``, the bridge's alias ``judge-netns <pid>``); ``close()``
kills every process of every host (``Host.kill``) and deletes the namespaces (their veths go
with them) and the bridge, and a new ``Topology`` first sweeps away what a run that died without
closing (SIGKILL, a crash) left behind. Needs root and iproute2 (``ip``).
"""

from __future__ import annotations

import ipaddress
import json
import os
import random
import re
import secrets
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from judge.errors import UsageError
from judge.pids import alive

PREFIX = "judge"  # every namespace this module makes is named judge-<owner pid>-<tag>-<host>
ALIAS = "judge-netns"  # the bridge's alias: "judge-netns <owner pid>"
_NS = re.compile(rf"^{PREFIX}-(\d+)-[0-9a-f]+-")


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise UsageError(f"ip {' '.join(args)} failed: {r.stderr.strip()}")
    return r


def available() -> str | None:
    """Why namespaces cannot be made here (not root, no ``ip``), or None when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add)"
    try:
        _ip("-V")
    except FileNotFoundError:
        return "iproute2's `ip` is not installed (Debian: apt-get install iproute2)"
    return None



def _children() -> dict[int, list[int]]:
    """Each process's children, from /proc (the root PID namespace's view)."""
    out: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])  # the name may hold spaces and parentheses
        out.setdefault(ppid, []).append(int(d))
    return out


def namespace_pids(netns: str) -> set[int]:
    """Every process in the namespace, and every descendant of one: a sandboxed child unshares
    its own network namespace but is still the host's."""
    found = {int(p) for p in _ip("netns", "pids", netns, check=False).stdout.split()}
    kids, todo = _children(), list(found)
    while todo:
        for c in kids.get(todo.pop(), ()):
            if c not in found:
                found.add(c)
                todo.append(c)
    return found


def kill_namespace(netns: str, timeout: float = 10.0) -> int:
    """SIGKILL every process of the namespace at once, as when its machine loses power: first
    SIGSTOP them all until no new one appears (a stopped process forks nothing, and a zygote
    killed before its child would orphan it), then SIGKILL. Returns how many were killed."""
    stopped: set[int] = set()
    for _ in range(100):
        new = namespace_pids(netns) - stopped - {os.getpid()}
        if not new:
            break
        for pid in new:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                pass
        stopped |= new
    for pid in stopped:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while any(alive(p) and not _zombie(p) for p in stopped) and time.monotonic() < deadline:
        time.sleep(0.02)
    return len(stopped)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@dataclass
class Host:
    """One machine: a namespace, its address on the bridge's subnet, the processes started in it."""

    name: str  # the role, e.g. "db", "api", "w1"
    netns: str  # the namespace (ip netns exec NETNS …)
    address: str  # eth0's IPv4 address
    veth: str = ""  # the bridge's end of its veth pair (in the root namespace)
    procs: list[subprocess.Popen] = field(default_factory=list)  # what spawn() started here

    def spawn(self, argv: list[str], *, env: dict[str, str], log: Path, cwd: Path | None = None,
              stdin_pipe: bool = False) -> subprocess.Popen:
        """Start ``argv`` inside the namespace (``ip netns exec`` execs it: its pid is the
        process's), in a session of its own, its output appended to ``log``; with
        ``stdin_pipe`` its stdin is a pipe from us (closed when we exit, however we exit)."""
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            proc = subprocess.Popen(["ip", "netns", "exec", self.netns, *argv], env=env, cwd=cwd,
                                    stdin=subprocess.PIPE if stdin_pipe else subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        return proc

    def pids(self) -> set[int]:
        return namespace_pids(self.netns)

    def kill(self) -> int:
        """Every process of this host killed at once (``kill_namespace``); our children reaped."""
        n = kill_namespace(self.netns)
        for p in self.procs:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass
        return n

    def link(self, up: bool) -> None:
        """Plug or pull the host's cable: eth0 up or down inside its namespace."""
        _ip("-n", self.netns, "link", "set", "eth0", "up" if up else "down")


class Topology:
    """A bridge and hosts on it; ``close()`` (or leaving the ``with``) removes every trace."""

    def __init__(self) -> None:
        if (why := available()) is not None:
            raise UsageError(why)
        sweep()
        self.tag = secrets.token_hex(3)
        self.bridge = f"jb{self.tag}"
        self.subnet = _free_subnet()
        self.hosts: dict[str, Host] = {}
        self._closed = False
        _ip("link", "add", self.bridge, "type", "bridge")
        try:
            _ip("link", "set", self.bridge, "alias", f"{ALIAS} {os.getpid()}")
            # bridged frames are not the host firewall's business (br_netfilter may be loaded)
            _ip("link", "set", self.bridge, "type", "bridge", "nf_call_iptables", "0", check=False)
            _ip("addr", "add", f"{self._addr(1)}/{self.subnet.prefixlen}", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
        except BaseException:
            self.close()
            raise

    @property
    def gateway(self) -> str:
        """The root namespace's address on the bridge: where the caller's connections come from."""
        return self._addr(1)

    def _addr(self, n: int) -> str:
        return str(self.subnet.network_address + n)

    def add_host(self, name: str) -> Host:
        if self._closed:
            raise UsageError("this topology is closed")
        netns, veth = f"{PREFIX}-{os.getpid()}-{self.tag}-{name}", f"jv{self.tag}{len(self.hosts)}"
        host = Host(name, netns, self._addr(2 + len(self.hosts)), veth)
        self.hosts[name] = host  # before it exists: close() removes a half-made one too
        _ip("netns", "add", netns)
        _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns)
        _ip("link", "set", veth, "master", self.bridge, "up")
        _ip("-n", netns, "addr", "add", f"{host.address}/{self.subnet.prefixlen}", "dev", "eth0")
        _ip("-n", netns, "link", "set", "eth0", "up")
        _ip("-n", netns, "link", "set", "lo", "up")
        return host

    def close(self) -> None:
        """Kill every host's processes, delete the namespaces and the bridge; safe to repeat."""
        self._closed = True
        for host in self.hosts.values():
            _remove_namespace(host.netns)
            for p in host.procs:
                if p.poll() is None:
                    p.kill()
                p.wait()
            # deleting the namespace frees its veth pair later, from the kernel's clean-up work:
            # deleted here, it is gone when close returns
            _ip("link", "del", host.veth, check=False)
        _ip("link", "del", self.bridge, check=False)
        gone = {self.bridge, *(h.veth for h in self.hosts.values())}
        deadline = time.monotonic() + 10
        while gone & _link_names() and time.monotonic() < deadline:
            time.sleep(0.05)

    def __enter__(self) -> "Topology":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _link_names() -> set[str]:
    """The root namespace's links."""
    return {link["ifname"] for link in json.loads(_ip("-j", "link", "show", check=False).stdout or "[]")}


def _remove_namespace(netns: str) -> None:
    if Path("/run/netns", netns).exists():
        kill_namespace(netns)
        _ip("netns", "del", netns, check=False)


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 in 10.128.0.0/9 that no interface or route here uses."""
    used = []
    for line in (_ip("-4", "-o", "addr").stdout + _ip("-4", "route").stdout).splitlines():
        for word in line.split():
            try:
                used.append(ipaddress.ip_network(word, strict=False))
            except ValueError:
                pass
    for _ in range(1000):
        net = ipaddress.ip_network(f"10.{random.randint(128, 254)}.{random.randint(0, 255)}.0/24")
        if not any(net.overlaps(u) for u in used if u.version == 4 and u.prefixlen > 0):
            return net
    raise UsageError("no free 10.x.y.0/24 for the test network")


def sweep() -> list[str]:
    """Remove the namespaces and bridges of runs whose owner process is gone; their names."""
    gone = []
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.strip() else ""
        if (m := _NS.match(name)) and not alive(int(m.group(1))):
            _remove_namespace(name)
            gone.append(name)
    links = _ip("-j", "link", "show", "type", "bridge", check=False).stdout
    for link in json.loads(links or "[]"):
        alias = link.get("ifalias", "")
        if alias.startswith(ALIAS + " ") and alias.split()[-1].isdigit() and not alive(int(alias.split()[-1])):
            _ip("link", "del", link["ifname"], check=False)
            gone.append(link["ifname"])
    return gone
