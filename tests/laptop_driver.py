"""Grades attacks as an ordinary user (laptop mode) and prints one JSON line of outcomes.

Run by tests/test_laptop_mode.py under an unprivileged uid; not a test module itself.
"""

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from judge.grading import grade  # noqa: E402
from judge.box.sandbox import Sandbox  # noqa: E402
import test_attacks as T  # noqa: E402

ATTACKS = ["read_reference", "read_host_files", "write_outside", "tcp_connect", "fork",
           "infinite_loop", "allocate_20gb", "kill_parent", "sys_exit", "lying_tensor",
           "udp_dns", "persist_state", "observe_state", "sigstop_self", "thread_bomb",
           "site_hooks", "ptrace_judge", "introspect"]

with Sandbox() as box:
    out = {"uid": os.getuid(), "info": box.info}
    subst = {"JUDGE_PID": os.getpid(), "ZYGOTE_PID": box.proc.pid, "PORT": int(sys.argv[1]),
             "TARGET": sys.argv[2], "NONCE": f"laptop-{os.getpid()}",
             "DATABASE": str(Path(sys.argv[2]).with_name("judge.db"))}
    for name in ATTACKS:
        v = T.run_attack(name, box, **subst)
        out[name] = {"verdict": v.verdict, "kind": v.error.kind if v.error else None,
                     "output": v.output[-2000:], "sandbox": v.sandbox}
    ref = grade(T.EX, T.EX.solution_path.read_text(), sandbox=box, mode="run")
    out["reference"] = {"verdict": ref.verdict, "sandbox": ref.sandbox}
print(json.dumps(out))
