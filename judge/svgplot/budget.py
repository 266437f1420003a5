"""A time budget for drawing: the plots of one grading may not take more than it.

The plots are drawn from a submission's metrics, so their size is the submission's choice (a
wrong answer's shape can make a line of millions of points). ``time_budget(seconds)`` sets a
deadline for the drawing inside it; the loops that grow with the data call ``check`` now and
then, which raises ``BudgetExceeded`` past the deadline, and ``save_figures`` saves a figure
saying so instead. Outside a ``time_budget`` there is no deadline (``check`` costs one clock read).
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager
from typing import Iterator

EVERY = 2048  # items between two looks at the clock in a loop over data points

_deadline = math.inf  # time.perf_counter() past which drawing stops
_seconds = math.inf  # the budget in force, for the message


class BudgetExceeded(Exception):
    """The drawing ran past its time budget."""


@contextmanager
def time_budget(seconds: float) -> Iterator[None]:
    """Draw within ``seconds`` from now (nested budgets: the earliest deadline wins)."""
    global _deadline, _seconds
    saved = _deadline, _seconds
    _deadline = min(_deadline, time.perf_counter() + max(0.0, float(seconds)))
    _seconds = min(_seconds, float(seconds))
    try:
        yield
    finally:
        _deadline, _seconds = saved


def check() -> None:
    """Raise ``BudgetExceeded`` when the deadline has passed."""
    if time.perf_counter() > _deadline:
        raise BudgetExceeded(f"drawing took longer than its {_seconds:g} s budget (too much data to plot)")


def left() -> float:
    """Seconds until the deadline (inf without one)."""
    return _deadline - time.perf_counter()
