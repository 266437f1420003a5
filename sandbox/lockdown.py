"""The layers a forked child applies to itself before it imports a submission.

Order matters: own session → namespaces → rlimits → unprivileged uid → Landlock → seccomp
(seccomp last, since it forbids the syscalls the earlier steps use). What each layer costs and
blocks on this kind of machine, measured, is in docs/security.md ("What each layer costs and
blocks").
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import socket
import sys
import sysconfig
from dataclasses import dataclass, field

from sandbox import landlock

_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
CLONE_THREAD = 0x00010000
SANDBOX_UID = 65534  # nobody
# No accelerator for submissions, which compute on the CPU: in the zygote's environment (with one
# visible, a CUDA build of torch starts autograd's device threads at the zygote's warm-up
# backward, and every forked child's backward() then raises "Unable to handle autograd's
# threading in combination with fork-based multiprocessing"; seen on a GPU machine) and in each
# child's, which is rebuilt from scratch.
NO_ACCELERATORS = {"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""}
# torch.compile runs as the eager code it wraps (a no-op decorator, TorchDynamo's own switch): its
# inductor backend builds C++ with a compiler in a subprocess, which the lockdown forbids, and a
# learner's @torch.compile then failed with "InductorError: PermissionError". The verdict is about
# the function's values and gradients, which compilation must not change.
EAGER_COMPILE = {"TORCH_COMPILE_DISABLE": "1"}


@dataclass
class Report:
    """Which layers are in force in this child (sent to the judge with the load reply)."""

    layers: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


def unshare(flags: int) -> None:
    if _libc.unshare(ctypes.c_int(flags)) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def setns(fd: int, nstype: int) -> None:
    if _libc.setns(ctypes.c_int(fd), ctypes.c_int(nstype)) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def python_paths() -> list[str]:
    """What the interpreter may need to read after lockdown: stdlib, extensions, site-packages."""
    paths = {sysconfig.get_path(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    paths |= {p for p in sys.path if p and os.path.isdir(p) and "site-packages" in p}
    paths |= {os.path.join(sysconfig.get_path("stdlib"), "lib-dynload"),
              "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib/x86_64-linux-gnu",
              "/usr/share/zoneinfo"}
    return sorted(p for p in paths if p and os.path.exists(p))


def set_rlimits(*, cpu_seconds: int, address_space: int, file_size: int, open_files: int) -> None:
    # A child that is PID 1 of its namespace ignores SIGXCPU: the hard limit one second later kills.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
    resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def drop_privileges(uid: int = SANDBOX_UID) -> None:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


def build_seccomp_filter():
    """The deny-list, built once in the zygote (the per-pid rules are added in the child)."""
    import pyseccomp as sc

    f = sc.SyscallFilter(defaction=sc.ALLOW)
    eperm = sc.ERRNO(errno.EPERM)
    for name in ("fork", "vfork", "execve", "execveat", "ptrace", "process_vm_readv",
                 "process_vm_writev", "pidfd_open", "pidfd_send_signal", "pidfd_getfd", "unshare",
                 "setns", "mount", "umount2", "pivot_root", "chroot", "io_uring_setup",
                 "io_uring_enter", "io_uring_register", "bpf", "setsid", "setpgid", "kexec_load",
                 "init_module", "finit_module", "delete_module", "keyctl", "add_key", "request_key",
                 "userfaultfd", "perf_event_open", "open_by_handle_at", "name_to_handle_at",
                 "personality", "acct", "swapon", "swapoff", "reboot", "settimeofday",
                 "clock_settime", "mknod", "mknodat", "setuid", "setgid", "setreuid", "setregid",
                 "setresuid", "setresgid", "setgroups", "capset", "tkill", "move_pages",
                 "migrate_pages", "kcmp", "fanotify_init", "quotactl"):
        try:
            f.add_rule(eperm, name)
        except Exception:  # noqa: BLE001 - a syscall this architecture lacks
            pass
    # Threads only: clone without CLONE_THREAD is a fork.
    f.add_rule(eperm, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_THREAD, 0))
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")  # libc falls back to clone, filtered above
    # Sockets: AF_UNIX only (IP, netlink, packet, … are refused).
    f.add_rule(sc.ERRNO(errno.EAFNOSUPPORT), "socket", sc.Arg(0, sc.NE, socket.AF_UNIX))
    f.add_rule(sc.ERRNO(errno.EAFNOSUPPORT), "socketpair", sc.Arg(0, sc.NE, socket.AF_UNIX))
    return f


def _signal_rules(f, own_pid: int) -> None:
    """Signals only to ourselves."""
    import pyseccomp as sc

    eperm = sc.ERRNO(errno.EPERM)
    f.add_rule(eperm, "kill", sc.Arg(0, sc.NE, own_pid))
    f.add_rule(eperm, "tgkill", sc.Arg(0, sc.NE, own_pid))
    f.add_rule(eperm, "rt_sigqueueinfo", sc.Arg(0, sc.NE, own_pid))
    f.add_rule(eperm, "rt_tgsigqueueinfo", sc.Arg(0, sc.NE, own_pid))


def load_seccomp(f, own_pid: int) -> None:
    """Signals only to ourselves, then load the filter into this process and its threads."""
    _signal_rules(f, own_pid)
    f.load()


def compile_seccomp(own_pid: int) -> bytes:
    """The whole filter for a child whose pid is ``own_pid``, as the BPF program libseccomp
    would load. A zygote whose children are each PID 1 of a fresh PID namespace compiles it
    once; each child then loads it as it is (~0.05 ms instead of ~0.7 ms of compiling)."""
    f = build_seccomp_filter()
    _signal_rules(f, own_pid)
    fd = os.memfd_create("seccomp-bpf", os.MFD_CLOEXEC)
    try:
        with os.fdopen(os.dup(fd), "rb") as out:
            f.export_bpf(out)
        program = os.pread(fd, 1 << 20, 0)
    finally:
        os.close(fd)
    if not program or len(program) % 8:
        raise OSError(errno.EINVAL, "libseccomp exported no BPF program")
    return program


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                ("k", ctypes.c_uint)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2


def load_seccomp_program(program: bytes) -> None:
    """Load a BPF program from ``compile_seccomp``, as libseccomp's load does (no_new_privs,
    then the filter; this process is single-threaded right after fork)."""
    n = len(program) // 8
    insns = (_SockFilter * n).from_buffer_copy(program)
    prog = _SockFprog(n, insns)
    zero = ctypes.c_ulong(0)
    if _libc.prctl(ctypes.c_int(PR_SET_NO_NEW_PRIVS), ctypes.c_ulong(1), zero, zero, zero) != 0 or \
            _libc.prctl(ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER),
                        ctypes.byref(prog), zero, zero) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"could not load the seccomp filter: {os.strerror(e)}")


def isolate(*, scratch: str, root: bool, seccomp_filter, limits: dict,
            read_paths: list[str] | None = None, seccomp_program: bytes | None = None) -> Report:
    """Apply every layer this machine allows; return which ones are in force. ``read_paths``:
    what Landlock lets the child read (``python_paths()``, which a zygote computes once);
    ``seccomp_program``: the filter compiled for PID 1 (``compile_seccomp(1)``), used when this
    child is PID 1 of its own PID namespace."""
    rep = Report()
    os.setsid()
    rep.layers.append("session")
    if os.getpid() == 1:  # forked into a fresh PID namespace by the zygote (as root)
        rep.layers.append("pid-namespace")
    ns = CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS if root else CLONE_NEWUSER | CLONE_NEWNET
    try:
        unshare(ns)
        rep.layers.append("net-namespace")
    except OSError as e:
        rep.missing.append(f"namespaces ({e.strerror})")
    set_rlimits(cpu_seconds=int(limits["cpu_seconds"]), address_space=int(limits["address_space"]),
                file_size=int(limits.get("file_size", 64 << 20)), open_files=64)
    rep.layers.append("rlimits")
    os.chdir(scratch)
    if root:
        drop_privileges()
        rep.layers.append(f"uid {SANDBOX_UID}")
    try:
        abi = landlock.restrict(python_paths() if read_paths is None else read_paths, [scratch],
                                ["/dev/null", "/dev/urandom", "/dev/zero"])
        rep.layers.append(f"landlock abi {abi}")
    except OSError as e:
        rep.missing.append(f"landlock ({e})")
    if seccomp_program is not None and os.getpid() == 1:
        load_seccomp_program(seccomp_program)
        rep.layers.append("seccomp")
    elif seccomp_filter is not None:
        load_seccomp(seccomp_filter, os.getpid())
        rep.layers.append("seccomp")
    else:
        rep.missing.append("seccomp (pyseccomp/libseccomp unavailable)")
    return rep
