"""T3: the exact bias/variance toy through the submission, against the reference's own run."""

import math

from judge.testing import Feedback, memo

# The toy's expected values, by exact enumeration over its 6 actions (spec.md, "The toy (T3)";
# first computed for the exercise's design brief): ||bias|| and trace Cov_q(w f).
TABLE_BIAS = {"none": 0.04832, "tis": 0.00972, "icepop": 0.03161, "is": 0.0}
TABLE_VAR = {"none": 0.0979, "tis": 0.1204, "icepop": 0.0913, "is": 0.1644}
HINTS = {
    "weights": "the IcePop weights of the toy's actions differ",
    "bias_norm": "the bias of the corrected gradient differs",
    "variance": "the variance of the corrected gradient differs",
    "grad_vs_weight_times_f": "the gradient of icepop_ppo_loss is not w times the plain PPO gradient",
    "contrast": "the contrast-table weights differ",
    "denominator": "the loss's denominator differs (divide by the original number of valid "
                   "tokens, rejected ones included)",
}


def _run(sub, experiment, out_dir):
    """experiment.run(sub, out_dir), with a crash turned into feedback that says how to replay it."""
    try:
        return experiment.run(sub, out_dir)
    except AssertionError:  # Feedback from the proxy (e.g. a Python float returned)
        raise
    except Exception as e:  # noqa: BLE001
        if type(e).__name__ == "SubmissionFailure":  # time/memory limits stop the grading
            raise
        raise Feedback(f"the toy crashed: {type(e).__name__}: {e}\n  run it yourself: "
                       f"python exercises/icepop/experiment.py --impl my_solution.py --out figs/") from None


def _flatten(x, prefix=""):
    if isinstance(x, dict):
        out = {}
        for k, v in x.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    if isinstance(x, (list, tuple)):
        out = {}
        for i, v in enumerate(x):
            out.update(_flatten(v, f"{prefix}{i}."))
        return out
    return {prefix.rstrip("."): x}


def _compare_with_reference(got, want, hints):
    g, w = _flatten(got), _flatten(want)
    if set(g) != set(w):
        raise Feedback(f"the experiment returned metrics {sorted(set(g) ^ set(w))} that the "
                       f"reference run does not have (or the reverse)")
    for key in w:
        a, b = g[key], w[key]
        if not isinstance(a, (int, float)) or isinstance(a, bool) or not math.isfinite(a):
            raise Feedback(f"metric {key}: expected a finite number close to {b:.6g}, got {a!r}")
        if not math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9):
            raise Feedback(f"metric {key}: expected {b:.8g} (the reference's run), got {a:.8g}. "
                           f"{hints.get(key.split('.')[0], '')}")


def test_bias_variance_toy(sub, ref, experiment, ctx):
    # one run of the submission's toy per grading, shared by every T3 test (it draws the plots)
    m = ctx.once(("icepop", "t3", "sub"), lambda: _run(sub, experiment, ctx.out_dir))
    want = memo(("icepop", "t3"), lambda: experiment.run(ref, None))

    # the toy's claims
    bias, var = m["bias_norm"], m["variance"]
    w = m["weights"]["icepop"]
    for a, (rho, wa) in enumerate(zip(m["rho"], w)):
        expected = rho if 0.5 <= rho <= 2.0 else 0.0
        if not math.isclose(wa, expected, rel_tol=1e-9, abs_tol=1e-12):
            raise Feedback(f"action {a}: rho = {rho:.4f} must get IcePop weight {expected:.4f}, "
                           f"got {wa!r}")
    if not bias["is"] < 1e-9:
        raise Feedback(f"full importance sampling (band [0, 1e6]) must be unbiased: "
                       f"||bias|| = {bias['is']:.3g}")
    if not (bias["is"] < bias["icepop"] < bias["none"]):
        raise Feedback(f"expected bias_IS = 0 < bias_IcePop < bias_none, got IS {bias['is']:.5f}, "
                       f"IcePop {bias['icepop']:.5f}, none {bias['none']:.5f}")
    if not (var["icepop"] < var["none"] < var["is"]):
        raise Feedback(f"discarding the far-off-policy tokens must give the lowest variance: "
                       f"IcePop {var['icepop']:.4f}, none {var['none']:.4f}, IS {var['is']:.4f}")
    for name in ("icepop", "is"):
        if abs(bias[name] - TABLE_BIAS[name]) > 6e-5 or abs(var[name] - TABLE_VAR[name]) > 6e-4:
            raise Feedback(f"{name}: ||bias|| {bias[name]:.5f} and variance {var[name]:.4f}, "
                           f"expected {TABLE_BIAS[name]} and {TABLE_VAR[name]} (the spec's table)")

    # renormalising by the kept tokens would inflate the loss by N / N_kept
    d = m["denominator"]
    if d["n_kept"] != 4 or d["n_valid"] != 6:
        raise Feedback(f"the toy batch must keep 4 of its 6 tokens (rho = 2.74 and 4.52 are outside "
                       f"[.5, 2]), got n_kept = {d['n_kept']}, n_valid = {d['n_valid']}")
    if not math.isclose(d["loss"], d["loss_expected"], rel_tol=1e-9, abs_tol=1e-12):
        raise Feedback(f"the toy batch's loss is {d['loss']:.6g}; dividing sum w*l by all "
                       f"{d['n_valid']} valid tokens (the 2 rejected ones included) gives "
                       f"{d['loss_expected']:.6g}, renormalising by the {d['n_kept']} kept tokens "
                       f"gives {d['loss_if_renormalised']:.6g}")
    inflation = d["loss_if_renormalised"] / d["loss"]
    if not math.isclose(inflation, d["n_valid"] / d["n_kept"], rel_tol=1e-9):
        raise Feedback(f"renormalising by the kept tokens must inflate the loss by N / N_kept = "
                       f"{d['n_valid'] / d['n_kept']:.4g}, got a factor {inflation:.6g}")

    # the same numbers as the reference's run
    _compare_with_reference(m, want, HINTS)
