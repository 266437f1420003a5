# Signals its parent, the zygote and the judge.
import os
import signal
for pid in [os.getppid(), {{ZYGOTE_PID}}, {{JUDGE_PID}}]:
    try:
        os.kill(pid, signal.SIGKILL)
        print("killed", pid)
    except Exception as e:
        print("blocked", pid, type(e).__name__)


def masked_is_weights(*a, **k):
    raise NotImplementedError


def offpolicy_loss(*a, **k):
    raise NotImplementedError
