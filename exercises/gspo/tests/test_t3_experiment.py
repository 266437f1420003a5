"""T3: the analytic three-response diagnostic run through the submission, compared with the
reference's run and with the values the paper's algebra gives."""

import math

from judge.testing import Feedback, memo


def _close(a, b, tol):
    return abs(a - b) <= tol * (1.0 + abs(b)) and not math.isnan(a)


def _compare(name, got, want, tol=1e-6):
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            raise Feedback(f"experiment metric {name}: expected {want}, got {got}")
        for i, (g, w) in enumerate(zip(got, want)):
            _compare(f"{name}[{i}]", g, w, tol)
        return
    if isinstance(want, dict):
        for k in want:
            _compare(f"{name}.{k}", got.get(k) if isinstance(got, dict) else None, want[k], tol)
        return
    if not isinstance(got, (int, float)) or not _close(float(got), float(want), tol):
        raise Feedback(f"experiment metric {name}: expected {want}, got {got}")


def test_three_response_diagnostic(sub, ref, experiment, ctx):
    # one run of the submission's toy per grading, shared by every T3 test (its plots go to ctx.out_dir)
    got = ctx.once(("gspo", "t3", "sub"), lambda: experiment.run(sub, ctx.out_dir))
    want = memo(("gspo", "t3"), lambda: experiment.run(ref, None))

    # The claims of the toy, stated first so the message explains what is wrong.
    if not _close(got["clip_fraction"], 2 / 3, 1e-9):
        raise Feedback(f"clip fraction: expected 2/3 (responses 2 and 3 clipped, s = [1, 1.5, 0.5]), got "
                       f"{got['clip_fraction']} with your ratios {got['ratios']}")
    _compare("ratios", got["ratios"], [1.0, 1.5, 0.5])
    _compare("loss", got["loss"], -(1.0 + 2.4 - 0.8) / 3.0)
    g = got["grad"]
    if not (_close(g[0][0], -1 / 6, 1e-6) and _close(g[0][1], -1 / 6, 1e-6)):
        raise Feedback(f"response 1 has token ratios [2, 0.5] but s = 1: GSPO gives BOTH tokens the same gradient "
                       f"-A s/(B n) = -1/6; your gradient row is {g[0]} (token-level clipping would give "
                       f"{want['token_ppo_grad'][0]})")
    if any(v != 0.0 for v in g[1] + g[2]):
        raise Feedback(f"responses 2 and 3 are clipped (A>0, s>1+eps and A<0, s<1-eps): their gradient must be "
                       f"exactly 0, got {g[1]} and {g[2]}")
    _compare("loss_with_empty", got["loss_with_empty"], -0.65)
    _compare("grad_with_empty[0]", got["grad_with_empty"][0], [-1 / 8, -1 / 8])
    sw = got["sweep"]
    for s, jp, jn, gp, gn in zip(sw["s"], sw["objective_pos"], sw["objective_neg"], sw["grad_logp_pos"],
                                 sw["grad_logp_neg"]):
        if s > 1.2 and not (_close(jp, 1.2, 1e-9) and gp == 0.0):
            raise Feedback(f"sweep, A=+1, s={s:.3f} > 1+eps: J must be flat at 1.2 with zero gradient, got "
                           f"J={jp}, dJ/dlogp={gp}")
        if s < 0.8 and not (_close(jn, -0.8, 1e-9) and gn == 0.0):
            raise Feedback(f"sweep, A=-1, s={s:.3f} < 1-eps: J must be flat at -0.8 with zero gradient, got "
                           f"J={jn}, dJ/dlogp={gn}")

    for key in ("ratios", "loss", "grad", "clipped", "clip_fraction", "token_grad_spread_resp1",
                "loss_with_empty", "grad_with_empty", "sweep"):
        _compare(key, got[key], want[key], tol=1e-6)
