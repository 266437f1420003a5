"""T3: the gradient-descent toy through the submission, against the reference's run."""

import math

from judge.testing import Feedback, memo

SLUG = "__SLUG__"


def _close(a, b, tol=1e-6):
    return math.isfinite(a) and abs(a - b) <= tol * (1.0 + abs(b))


def test_fit_converges_to_the_masked_means(sub, ref, experiment, ctx):
    try:
        got = experiment.run(sub, ctx.out_dir)
    except Exception as e:  # noqa: BLE001 - the toy's crash, as feedback
        raise Feedback(f"experiment.run raised {type(e).__name__}: {e}; run it yourself: "
                       f"python exercises/{SLUG}/experiment.py --impl your_file.py --out figs/") from None
    want = memo((SLUG, "t3"), lambda: experiment.run(ref, None))
    for b, (t, m, n) in enumerate(zip(got["theta"], want["target_means"], want["lengths"])):
        if not _close(t, m):
            raise Feedback(f"row {b} (n = {n} valid targets): theta converged to {t:.6g}, expected the mean of "
                           f"its valid targets {m:.6g}" + (" (an empty row gets no gradient: it stays at 0)"
                                                           if n == 0 else ""))
    for key in ("theta", "losses"):
        for i, (a, b) in enumerate(zip(got[key], want[key])):
            if not _close(a, b):
                raise Feedback(f"experiment metric {key}[{i}]: expected {b:.6g}, got {a:.6g}")
