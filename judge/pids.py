"""Whether a process id is in use: the sweeps of what a dead process left behind (the sandbox's
scratch, a worker's artifact scratch, a test network's namespaces) look before they touch."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """True while ``pid`` names a process, ours or not (another user's counts: not ours to
    sweep); a reused pid reads as alive, so a sweep errs on the side of leaving things."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
