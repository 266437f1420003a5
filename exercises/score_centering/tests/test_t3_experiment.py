"""T3: the drift toy through the submission, compared with the reference's run."""

import math

from judge.testing import Feedback, memo, sibling

guided = sibling(__file__, "_guide")  # the judge's fast path for the toy: same metrics

TOL = dict(rel=1e-6, abs=1e-9)


def _close(a, b):
    return math.isclose(a, b, rel_tol=TOL["rel"], abs_tol=TOL["abs"])


def _metrics(sub, ref, experiment, ctx):
    """The submission's toy metrics: one run per grading, shared by every T3 test (it writes the
    plots), checked along the reference's runs (tests/_guide.py)."""
    guide = memo((ctx.exercise or "score_centering", "t3-guide"),
                 lambda: guided.trajectory(experiment, ref))
    return ctx.once(("score_centering", "t3", "sub"),
                    lambda: guided.run(experiment, sub, ctx.out_dir, guide=guide))


def test_drift_toy(sub, ref, experiment, ctx):
    got = _metrics(sub, ref, experiment, ctx)
    want = memo((ctx.exercise or "score_centering", "t3"), lambda: experiment.run(ref, None))

    for name in ("sc_k6", "sc_k4", "sc_k2"):
        for key in ("drift", "kl_end"):
            k = f"{name}_{key}"
            a, b = got[k], want[k]
            if not (isinstance(a, float) and math.isfinite(a)):
                raise Feedback(f"{k}: the toy produced {a!r} with your sc_policy_loss (expected {b:.6g})")
            if not _close(a, b):
                raise Feedback(f"{k}: expected {b:.6g} (the reference's run), got {a:.6g}. The toy: V = 6, "
                               f"p0 = {[round(x, 4) for x in want['p0']]}, q = {[round(x, 4) for x in want['q']]}, "
                               f"A = 1, 50 steps of lr 1 on the exact expectation over a ~ q, mode 'none'.")
        for key in ("drift_curve", "kl_curve"):
            k = f"{name}_{key}"
            for t, (a, b) in enumerate(zip(got[k], want[k])):
                if not _close(a, b):
                    raise Feedback(f"{k} at step {t}: expected {b:.6g} (the reference's run), got {a:.6g}")

    # The qualitative claims, on the submission's own numbers.
    if not (got["none_drift"] > 0.5 and got["none_kl_end"] < 0.2 * got["none_kl_start"]):
        raise Feedback("without centring the logits should drift and KL(q || p) collapse; the toy's "
                       f"baseline gave ||dz|| = {got['none_drift']:.4g}, KL {got['none_kl_start']:.4g} -> "
                       f"{got['none_kl_end']:.4g}")
    if not (got["sc_k6_drift"] < 1e-10 and abs(got["sc_k6_kl_end"] - got["sc_k6_kl_start"]) < 1e-10):
        raise Feedback("with the head = the whole vocabulary, score centering cancels the constant-advantage "
                       f"gradient exactly: ||dz|| must stay 0, got {got['sc_k6_drift']:.3g}")
    k4, k2, none = got["sc_k4_drift"], got["sc_k2_drift"], got["none_drift"]
    if not (1e-3 < k4 < k2 < none):
        raise Feedback("with a top-k head the drift must shrink but not vanish, more with a larger head: "
                       f"expected 0 < ||dz||(k=4) < ||dz||(k=2) < ||dz||(no centring), got "
                       f"{k4:.4g}, {k2:.4g}, {none:.4g}")
