"""T3: the 4-arm bandit trained through the submission, compared with the reference's run."""

from __future__ import annotations

import math

from judge.testing import Feedback, memo, sibling

guided = sibling(__file__, "_guide")  # the judge's fast path for the toy: same metrics

P_ATOL = 1e-5          # probabilities along the run (float64 throughout; ~1e-15 between correct solutions)


def _curve_mismatch(name, got, want, atol):
    for i, (a, b) in enumerate(zip(got, want)):
        if not (math.isfinite(a) and abs(a - b) <= atol):
            return (f"{name} differs from the reference's at index {i}: expected {b:.6f}, got {a:.6f}"
                    f"\n  reference: {' '.join(f'{x:.3f}' for x in want)}"
                    f"\n  yours:     {' '.join(f'{x:.3f}' for x in got)}")
    if len(got) != len(want):
        return f"{name} has {len(got)} entries, expected {len(want)}"
    return None


def _metrics(sub, ref, experiment, ctx):
    """The submission's toy, run once per grading (every T3 test reads this run; it writes the
    plots), checked along the reference's trajectory (tests/_guide.py)."""
    guide = memo(("grpo", "t3-guide"), lambda: guided.trajectory(experiment, ref))
    return ctx.once(("grpo", "t3"), lambda: guided.run(experiment, sub, ctx.out_dir, guide=guide))


def test_bandit(sub, ref, experiment, ctx):
    mine = _metrics(sub, ref, experiment, ctx)
    want = memo(("grpo", "t3"), lambda: experiment.run(ref, None))

    # the qualitative claims of the toy
    if mine["clip_frac_epoch1_max"] != 0.0:
        raise Feedback(f"epoch 1 of each iteration is on-policy (r = 1), so nothing may be clipped; "
                       f"got a clip fraction of {mine['clip_frac_epoch1_max']}")
    if not mine["clip_frac_later_max"] > 0.0:
        raise Feedback("epochs 2-4 never left the clip range: the policy did not move away from "
                       "old_logp (no gradient reached logp?)")
    if not mine["final_p_best"] > 0.9:
        raise Feedback(f"after {mine['iterations']} iterations P(arm 2) should exceed 0.9 "
                       f"(the reference reaches {want['final_p_best']:.3f}); yours ended at "
                       f"{mine['final_p_best']:.3f}\n  P(arm 2): "
                       + " ".join(f"{p:.3f}" for p in mine["p_best"]))
    if not mine["nostd_final_p_best"] > 0.8:
        raise Feedback(f"the no-std variant (normalize_std=False) should learn too: the reference "
                       f"ends at P(arm 2) = {want['nostd_final_p_best']:.3f}, yours at "
                       f"{mine['nostd_final_p_best']:.3f}")

    # the same run as the reference's
    for name in ("p_best", "nostd_p_best"):
        msg = _curve_mismatch(name, mine[name], want[name], P_ATOL)
        if msg:
            raise Feedback(msg)
    got_cf = [f for row in mine["clip_frac"] for f in row]
    want_cf = [f for row in want["clip_frac"] for f in row]
    msg = _curve_mismatch("clip fraction (iteration-major, 4 epochs each)", got_cf, want_cf, 1e-9)
    if msg:
        raise Feedback(msg)
    for key in ("iterations_to_0_9", "nostd_iterations_to_0_9", "zero_grad_epochs",
                "nostd_zero_grad_epochs"):
        if mine[key] != want[key]:
            raise Feedback(f"{key}: expected {want[key]}, got {mine[key]}")
