"""The judge's performance settings, in one place, each with the measurement that set it.

These change how fast a verdict comes back, never what it says. The measurements, dated, and
what was tried instead are in docs/performance.md ("What made it fast", "Tried and left out");
the modules that use a setting import it from here (``judge.box.sandbox``,
``judge.service.worker``, ``judge.service.progress``, ``judge.service.app``). The sandboxed
child cannot import the judge: ``sandbox/child.py``'s own poll time is only its default until
the load request brings ``SPIN_SECONDS`` (or 0) from here.
"""

from __future__ import annotations

# --- the sandbox (judge.box.sandbox) ---------------------------------------------------------

# How long both sides poll for the other's next message before sleeping in select() (the
# worker sets 0 while other gradings need the cores). 2 ms covers the judge's work between
# most calls: with 0.5 ms a child slept, and woke cold, 13 times in a cispo grading and 5 in a
# score_centering one. A/B on a 1-worker service, p50 per alternation: cispo -1.9 to -6.6 ms in
# four of five (+1.4 in one), score_centering -1.5 to -5.6 in four of five (+1.5), glm5_mis
# -2.0 and -3.0 in two of three (+0.9). (docs/performance.md, "Polling 2 ms, not 0.5")
SPIN_SECONDS = 0.002

# After a job closes, its successor spare waits this long before it is forked, unless a job is
# opened first: the closed job's verdict is on its way to the learner, and the API process and
# the client need the cores for about a millisecond (measured: the last byte of the response
# comes 3.1 ms after the verdict is stored with the fork at once, 1.4 ms with it 3 ms later;
# forking at once, or 8 ms later, was measured equal or worse). (docs/performance.md, "The child")
SPARE_DELAY = 0.004

# Children kept forked ahead, per kind of limits: with two, a submission that arrives while the
# previous one's successor is still being forked (a burst, or a worker taking its queue's next
# one at once) finds one ready.
SPARES_AHEAD = 2

# --- the service's workers (judge.service.worker, judge.service.progress) --------------------

# After storing a verdict, a worker with no submission waiting pauses this long before it draws
# the plots, so the API (just woken) answers first; under a backlog it draws at once. Measured
# on a 1-worker service: time outside grading 4.7-5.3 -> 3.3-4.4 ms, p50 glm5_mis -1.5 ms, tis
# -2 to -4 ms (sched_yield alone let the plots, the child's exit and the answer share the
# cores). (docs/performance.md, "The service")
ANSWER_FIRST_S = 0.0015

# The longest a test's result waits before it is written to the events table (the worker
# writes them in batches; all of them before the verdict). Writing every 100 ms instead made no
# difference (none is written during a fast grading); 25 ms keeps event streams live.
FLUSH_DELAY = 0.025

# --- the API process (judge.service.app) ------------------------------------------------------

# A verdict document larger than this is parsed and serialized off the event loop (in a
# thread), so one large document does not stall every other request the loop is serving.
INLINE_DOCUMENT_BYTES = 64 << 10
