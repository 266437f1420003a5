# Prints 1 GB to stdout inside a call.
import sys
line = "x" * (1 << 20)


def masked_is_weights(*a, **k):
    for _ in range(1024):
        sys.stdout.write(line)
    raise NotImplementedError


def offpolicy_loss(*a, **k):
    raise NotImplementedError
