"""T3: the async-staleness toy through the submission, against the reference's run."""

import math

from judge.testing import Feedback, memo, sibling

guided = sibling(__file__, "_guide")  # the judge's fast path for the toy: same metrics

RTOL, ATOL = 1e-6, 1e-9


def _close(a, b) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=RTOL, abs_tol=ATOL)
    return a == b


def _fmt(v):
    if isinstance(v, list):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    return f"{v:.4g}" if isinstance(v, float) else repr(v)


def test_async_staleness_toy(sub, ref, experiment, ctx):
    # one run of the submission's toy per grading, shared by every T3 test (it draws the plots),
    # checked along the reference's lanes (tests/_guide.py)
    guide = memo((ctx.exercise or "cispo", "t3-guide"), lambda: guided.trajectory(experiment, ref))
    got = ctx.once(("cispo", "t3", "sub"), lambda: guided.run(experiment, sub, ctx.out_dir, guide=guide))
    want = memo(("cispo", "t3"), lambda: experiment.run(ref, None))
    ks = want["staleness"]

    # --- the qualitative claims -----------------------------------------------------------
    old, roll = got["old"], got["rollout"]
    lo, hi = want["band"]
    if any(c != 0 for c in old["clip_frac"]) or max(old["max_abs_ratio_minus_1"]) > 1e-12:
        raise Feedback(f'anchor "old": the trainer recomputes old_logp before its single step, so '
                       f"r = pi_theta / pi_old is exactly 1 and nothing is clipped; got clip fractions "
                       f"{_fmt(old['clip_frac'])} for staleness {ks}")
    if old["max_abs_loss_minus_reinforce"] > 1e-9:
        raise Feedback(f'anchor "old" at r = 1 must equal the REINFORCE loss -sum A logp / N (the clamp is '
                       f"inert), but differed by up to {old['max_abs_loss_minus_reinforce']:.3g}")
    cf = roll["clip_frac"]
    if cf[0] != 0:
        raise Feedback(f'anchor "rollout" with staleness 0 (sampler == trainer) must clip nothing, got clip '
                       f"fraction {cf[0]:.4g}")
    if not all(b > a for a, b in zip(cf, cf[1:])):
        raise Feedback(f'anchor "rollout": the clip fraction must rise with staleness {ks}, got {_fmt(cf)} '
                       f"(reference {_fmt(want['rollout']['clip_frac'])})")
    for anchor in ("old", "rollout"):
        m = got[anchor]
        if min(m["weight_min"]) < lo - 1e-12 or max(m["weight_max"]) > hi + 1e-12:
            raise Feedback(f'anchor "{anchor}": weights must stay inside the band [{lo:g}, {hi:g}], got '
                           f"minima {_fmt(m['weight_min'])} and maxima {_fmt(m['weight_max'])}")

    # --- the numbers, against the reference's run -----------------------------------------
    for anchor in ("old", "rollout"):
        for key, ref_val in want[anchor].items():
            val = got[anchor].get(key)
            if not _close(val, ref_val):
                raise Feedback(f'experiment metric {anchor}.{key} for staleness {ks}: expected '
                               f"{_fmt(ref_val)}, got {_fmt(val)}")
