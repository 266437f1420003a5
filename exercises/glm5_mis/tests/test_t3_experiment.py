"""T3: the ratio sweep and the stale two-action bandit, run through the submission and compared
with the reference's run (and with the numbers spec.md states)."""

import math

from judge.testing import Feedback, memo, sibling

guided = sibling(__file__, "_guide")  # the judge's fast path for the toy: same metrics

SLUG = "glm5_mis"


def _run(experiment, sub, out_dir=None, guide=None):
    try:
        return guided.run(experiment, sub, out_dir, guide=guide)
    except Feedback:
        raise
    except Exception as e:  # noqa: BLE001 - report the toy's crash as feedback
        raise Feedback(f"experiment.run raised {type(e).__name__}: {e}. Run it yourself: "
                       f"python exercises/{SLUG}/experiment.py --impl your_file.py --out figs/") from None


def _sub_metrics(experiment, sub, ref, ctx):
    """The submission's toy, run once per grading and shared by every T3 test (the shared run is the
    one whose plots go to ctx.out_dir); its bandit is checked along the reference's (see
    tests/_guide.py)."""
    guide = memo((SLUG, "t3-guide"), lambda: guided.trajectory(experiment, ref))
    return ctx.once((SLUG, "t3", "sub"), lambda: _run(experiment, sub, ctx.out_dir, guide))


def _ref_metrics(experiment, ref):
    return memo((SLUG, "t3"), lambda: experiment.run(ref, None))


def _close_lists(got, want, tol, what):
    if len(got) != len(want):
        raise Feedback(f"{what}: expected {len(want)} values, got {len(got)}")
    for i, (a, b) in enumerate(zip(got, want)):
        a_flat = a if isinstance(a, list) else [a]
        b_flat = b if isinstance(b, list) else [b]
        for x, y in zip(a_flat, b_flat):
            if not (math.isfinite(x) and abs(x - y) <= tol * max(1.0, abs(y))):
                return i, a, b
    return None


def test_ratio_sweep_matches_reference(sub, ref, experiment, ctx):
    got = _sub_metrics(experiment, sub, ref, ctx)
    want = _ref_metrics(experiment, ref)
    for key, name in (("sweep_weights", "weight"), ("sweep_grad", "-N dL/dlogp (A = 1)")):
        bad = _close_lists(got[key], want[key], 1e-9, key)
        if bad:
            i, a, b = bad
            r = want["sweep_ratios"][i]
            raise Feedback(
                f"ratio sweep (clip 0.2/0.2): at ratio {r:.3f} your {name} is {a:.6g}, expected {b:.6g}. "
                f"Inside (0.8, 1.2) both equal the ratio; outside they are exactly 0 (masking, not "
                f"clamping). {got['sweep_retained']} of {len(want['sweep_ratios'])} ratios kept, expected "
                f"{want['sweep_retained']}. See sweep.svg.")


def test_stale_bandit_matches_reference(sub, ref, experiment, ctx):
    got = _sub_metrics(experiment, sub, ref, ctx)
    want = _ref_metrics(experiment, ref)
    story = (f"The correct rule ends at P(best) = {want['bandit_final_p_best']:.4f} with "
             f"{want['bandit_zero_grad_updates']} updates of exactly zero gradient (steps "
             f"{want['bandit_zero_grad_steps']}): once the snapshot has gone stale both ratios leave (0.8, 1.2), "
             f"every token is rejected and learning pauses until the snapshot is refreshed. Clamping instead "
             f"of zeroing keeps pushing (P(best) = {want['clamp_final_p_best']:.4f}, no zero update).")
    if got["bandit_zero_grad_steps"] != want["bandit_zero_grad_steps"]:
        raise Feedback(f"stale bandit: your run had {got['bandit_zero_grad_updates']} updates with exactly zero "
                       f"gradient (steps {got['bandit_zero_grad_steps']}), final P(best) = "
                       f"{got['bandit_final_p_best']:.4f}. {story} See bandit.svg.")
    bad = _close_lists(got["bandit_p_best"], want["bandit_p_best"], 1e-7, "P(best)")
    if bad:
        i, a, b = bad
        raise Feedback(f"stale bandit: after {i} updates your P(best) is {a:.6f}, expected {b:.6f} "
                       f"(final {got['bandit_final_p_best']:.4f} versus {want['bandit_final_p_best']:.4f}). {story}")
    bad = _close_lists(got["bandit_retained_mass"], want["bandit_retained_mass"], 1e-9, "retained mass")
    if bad:
        i, a, b = bad
        raise Feedback(f"stale bandit: at update {i} your weights keep rollout mass {a:.6f}, expected {b:.6f} "
                       f"(masked_is_weights must agree with the weights the loss uses).")

    # The claims spec.md states (they also guard the reference itself).
    final, steps = got["bandit_final_p_best"], got["bandit_zero_grad_steps"]
    if abs(final - 0.948) > 2e-3 or len(steps) != 6:
        raise Feedback(f"stale bandit: expected P(best) about 0.948 after 20 updates with 6 updates of exactly "
                       f"zero gradient; got {final:.4f} with {len(steps)} ({steps}). {story}")
    fresh = [k for k in steps if k % 5 == 0]
    if fresh:
        raise Feedback(f"stale bandit: updates {fresh} had zero gradient although the snapshot had just been "
                       f"refreshed (every ratio is exactly 1 there, inside the interval)")
    if any(got["bandit_retained_mass"][k] != 0 for k in steps):
        raise Feedback("stale bandit: an update with zero gradient kept nonzero weights: the loss and "
                       "masked_is_weights disagree")
