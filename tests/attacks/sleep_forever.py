# Sleeps, then pauses, inside a call.
import signal
import time


def masked_is_weights(*a, **k):
    time.sleep(3600)


def offpolicy_loss(*a, **k):
    signal.pause()
