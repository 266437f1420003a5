# Attaches to the judge and the zygote with ptrace, and reads their memory with process_vm_readv.
import ctypes
import os
libc = ctypes.CDLL(None, use_errno=True)
for pid in [{{JUDGE_PID}}, {{ZYGOTE_PID}}]:
    if libc.ptrace(16, pid, None, None) == 0:  # PTRACE_ATTACH
        print("attached", pid)
    else:
        print("blocked ptrace", pid, os.strerror(ctypes.get_errno()))
    buf = ctypes.create_string_buffer(16)
    local = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p), 16)
    remote = (ctypes.c_void_p * 2)(0x400000, 16)
    if libc.process_vm_readv(pid, local, 1, remote, 1, 0) > 0:
        print("read memory of", pid)
    else:
        print("blocked process_vm_readv", pid, os.strerror(ctypes.get_errno()))


def masked_is_weights(*a, **k):
    raise NotImplementedError


def offpolicy_loss(*a, **k):
    raise NotImplementedError
