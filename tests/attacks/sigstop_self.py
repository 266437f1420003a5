# Stops itself with SIGSTOP inside a call.
import os
import signal


def masked_is_weights(*a, **k):
    os.kill(os.getpid(), signal.SIGSTOP)


def offpolicy_loss(*a, **k):
    os.kill(os.getpid(), signal.SIGSTOP)
