'''``judge new <slug>``: a new exercise folder with a small working example.

The example is one function, ``masked_mean(x, mask) -> Tensor[B]`` (the mean of each row's valid
entries, 0 for an empty row, padding never read), with a scalar-loop oracle, tests in all four
tiers, a T3 toy that fits one parameter per row by gradient descent through the submission, and
two known-wrong solutions. It passes ``judge validate`` as generated, every automatic mutant of
its reference included; an author replaces it piece by piece and re-runs ``judge validate``.
'''

from __future__ import annotations

import re
from pathlib import Path

from judge.errors import UsageError
from judge.exercise import REPO_ROOT

_SLUG = re.compile(r"^[a-z][a-z0-9_]{0,63}$")

EXERCISE_TOML = '''slug = "__SLUG__"
title = "__TITLE__"
paper = "https://arxiv.org/abs/0000.00000"  # TODO: the paper, and the section the formulas come from
official = []  # TODO: official implementations, pinned to a commit
summary = """TODO: one paragraph shown in the exercise list. (The generated example: the mean of \\
each row's valid entries, with padding that may hold NaN or inf.)"""
run_seed = 0                 # the fixed seed of run mode
hidden_feedback = "message"  # what a failed hidden test shows: "message" or "name"

[[functions]]
name = "masked_mean"
signature = "masked_mean(x, mask) -> Tensor[B]"
returns = "tensor"

[limits]
call_seconds = 10
total_seconds = 60
cpu_seconds = 60
memory_mb = 1024

# Mutants of the reference that no correct test can kill, each with the reason (judge validate
# prints the ids of surviving mutants):
# [[equivalent_mutants]]
# id = "solution.py:42:LtE->Lt"
# reason = "x is an integer count here, so x < 1 and x <= 0 select the same rows"
'''

SPEC_MD = '''# __TITLE__

Paper: TODO (title, link, section and equation numbers).

TODO: two or three sentences on what the learner implements and why it matters. The generated
example is a warm-up: a masked mean over padded rows.

## Inputs

| name | shape | meaning |
|---|---|---|
| `x` | `[B, L]` | values, one row per sequence (gets gradients) |
| `mask` | `[B, L]` | `bool` or 0/1 float; 1 = a valid entry, 0 = padding |

Padded positions (mask 0) may hold **NaN, ±inf or 1e30**.

## `masked_mean(x, mask) -> Tensor[B]`

With n_b = Σ_t m_bt valid entries in row b:

$$
\\bar x_b = \\frac{1}{\\max(n_b, 1)} \\sum_t m_{bt}\\, x_{bt}, \\qquad \\bar x_b = 0 \\text{ if } n_b = 0 .
$$

- Divide by the number of **valid** entries n_b, not by L.
- Padding is never read: select with `torch.where` before summing. `x * mask` turns NaN·0 and
  inf·0 into NaN, in the value and in the gradient.
- Returns shape `[B]`, in `x`'s dtype, differentiable with respect to `x`: ∂x̄_b/∂x_bt = 1/n_b on
  valid entries and exactly 0 on padding.
- Raises `ValueError` unless `x` is 2-D and `mask` has exactly its shape.

Hand-checked: `x = [[1, 2, 3], [4, nan, nan], [nan, nan, nan]]` with
`mask = [[1, 1, 1], [1, 0, 0], [0, 0, 0]]` gives `[2, 4, 0]`.

## The experiment

`experiment.py` fits one parameter θ_b per row by gradient descent on
`masked_mean((θ_b − y_b)², mask).sum()` through your function, with padding holding 1000. θ_b
must converge to the mean of row b's valid targets; an empty row gets no gradient and stays at 0.

    python exercises/__SLUG__/experiment.py --impl my_solution.py --out figs/
'''

STARTER_PY = '''"""__TITLE__.

Read spec.md for the full contract. Shapes: B rows, L positions.
"""

import torch


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The mean of each row's valid entries: sum_t m_bt x_bt / max(n_b, 1), n_b = sum_t m_bt.

    Args:
        x:    [B, L] values (gets gradients).
        mask: [B, L] bool or 0/1 float; 1 marks a valid entry, 0 padding (which may hold NaN,
              inf or 1e30: never read it, never multiply it by 0).

    Returns:
        [B], x's dtype, differentiable w.r.t. x; 0 for a row with no valid entry.

    Raises:
        ValueError: unless x is 2-D and mask has exactly its shape.
    """
    raise NotImplementedError("masked_mean is not implemented yet")
'''

EXPERIMENT_PY = '''"""__TITLE__ toy: fit one parameter per row by gradient descent through YOUR masked_mean.

Six rows of targets y with 1, 2, 3, 5, 8 and 0 valid entries (padding holds 1000). The loss
masked_mean((theta_b - y_b)^2, mask).sum() has its minimum at theta_b = the mean of row b's valid
targets; the empty row gets no gradient and stays at 0.

    python exercises/__SLUG__/experiment.py --impl my_solution.py --out figs/

writes loss.svg, fit.svg and metrics.json into figs/.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import torch

from judge.svgplot import save_figures

LENGTHS = (1, 2, 3, 5, 8, 0)
L = 8
STEPS = 40
LR = 0.25
PAD = 1000.0


def _targets(seed: int):
    g = torch.Generator().manual_seed(seed)
    y = torch.randn(len(LENGTHS), L, generator=g, dtype=torch.float64) + 2.0
    mask = torch.arange(L)[None, :] < torch.tensor(LENGTHS)[:, None]
    return y.masked_fill(~mask, PAD), mask


# The plots are SVG written by judge.svgplot: matplotlib's calls (Figure, subplots, plot, semilogy,
# bar, legend, ...) at ~1 ms a figure instead of tens, which the service pays for every submission
# (AUTHORING.md, "T3"). save_figures draws each figure and, when odd metrics (a wrong solution's)
# break one, saves instead a figure saying what could not be drawn. Same metrics, same bytes.
def plot(m: dict, out_dir) -> list[str]:
    """Draw the plots and write metrics.json from the metrics alone (the judge calls this after
    the verdict); returns the names written."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "metrics.json").write_text(json.dumps(m, indent=1))
    figures = [("loss.svg", (4.5, 3), _draw_loss), ("fit.svg", (4.5, 3), _draw_fit)]
    return ["metrics.json"] + save_figures(out_dir, m, figures)


def _draw_loss(fig, m: dict) -> None:
    ax = fig.subplots()
    ax.semilogy([max(v, 1e-30) for v in m["losses"]])  # ticks at decades, 1-2-5 under two decades
    ax.locator_params(axis="x", nbins=5)
    ax.set_xlabel("step")
    ax.set_ylabel("loss (log scale)")
    ax.set_title("gradient descent through your masked_mean", fontsize=8)
    fig.subplots_adjust(left=0.16, right=0.97, bottom=0.15, top=0.9)


def _draw_fit(fig, m: dict) -> None:
    ax = fig.subplots()
    rows = range(len(m["theta"]))
    ax.bar([r - 0.2 for r in rows], m["theta"], width=0.4, label="fitted theta")
    ax.bar([r + 0.2 for r in rows], m["target_means"], width=0.4, label="mean of valid targets")
    ax.set_xticks(list(rows), [f"n={n}" for n in LENGTHS], fontsize=7)
    ax.locator_params(axis="y", nbins=5)
    ax.legend(fontsize=7)
    fig.subplots_adjust(left=0.12, right=0.97, bottom=0.12, top=0.95)


def run(impl, out_dir=None, seed: int = 0) -> dict:
    """Fit theta through ``impl.masked_mean``; returns the metrics (and writes plots to out_dir)."""
    y, mask = _targets(seed)
    theta = torch.zeros(len(LENGTHS), dtype=torch.float64, requires_grad=True)
    losses = []
    for _ in range(STEPS):
        loss = impl.masked_mean((theta[:, None] - y) ** 2, mask).sum()
        losses.append(float(loss.detach()))
        grad, = torch.autograd.grad(loss, theta)
        with torch.no_grad():
            theta -= LR * grad
    n = mask.sum(dim=1)
    target = torch.where(n > 0, torch.where(mask, y, 0.0).sum(dim=1) / n.clamp(min=1), 0.0)
    metrics = {
        "lengths": list(LENGTHS),
        "theta": [float(v) for v in theta.detach()],
        "target_means": [float(v) for v in target],
        "max_abs_error": float((theta.detach() - target).abs().max()),
        "losses": losses,
        "final_loss": losses[-1],
    }
    if out_dir is not None:
        plot(metrics, out_dir)
    return metrics


def _load(path: str):
    spec = importlib.util.spec_from_file_location("impl", Path(path).resolve())
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\\n")[0])
    ap.add_argument("--impl", required=True, help="your solution file (defines masked_mean)")
    ap.add_argument("--out", default=None, help="folder for the plots and metrics.json")
    args = ap.parse_args()
    print(json.dumps({k: v for k, v in run(_load(args.impl), args.out).items() if k != "losses"}, indent=1))
'''

CASES_PY = '''"""Input builders shared by the __SLUG__ tier tests (loaded with ``sibling(__file__, "_cases")``)."""

import math

import torch

# What padded positions hold in the tests: never read them, never multiply them by 0.
FILLS = (math.nan, math.inf, 1e30, -math.inf)


def random_batch(g: torch.Generator, B: int, L: int, dtype: torch.dtype, *, fill: float = math.nan,
                 empty_row: int | None = None, single_row: int | None = None, float_mask: bool = False):
    """(x, mask): random values, about 70% valid, padding filled with ``fill``; ``empty_row`` has
    no valid entry and ``single_row`` exactly one."""
    x = torch.randn(B, L, generator=g, dtype=torch.float64) * 2.0 + 0.5
    mask = torch.rand(B, L, generator=g) < 0.7
    if empty_row is not None:
        mask[empty_row] = False
    if single_row is not None:
        mask[single_row] = False
        mask[single_row, L - 1] = True
    x = x.masked_fill(~mask, fill).to(dtype)
    return x, (mask.to(dtype) if float_mask else mask)
'''

T0_PY = '''"""T0: what masked_mean returns (type, shape, dtype, graph), what it rejects, empty rows."""

import torch

from judge.testing import Feedback, check_tensor, describe, expect_raises, leaf, visible


def _inputs(B, L, dtype):
    x = torch.linspace(-1.0, 2.0, B * L, dtype=dtype).reshape(B, L)
    mask = torch.ones(B, L, dtype=torch.bool)
    mask[0, -1] = False
    return x, mask


@visible
def test_returns_one_mean_per_row(sub):
    for B, L in ((3, 5), (4, 2), (1, 1)):
        for dtype in (torch.float32, torch.float64):
            x, mask = _inputs(B, L, dtype)
            out = sub.masked_mean(x, mask)
            # shape [B]: one mean per row (not a scalar, not [B, 1]), in x's dtype
            check_tensor(out, what=f"masked_mean on [{B}, {L}] {dtype} inputs", shape=(B,), dtype=dtype)


@visible
def test_bool_and_float_masks_are_accepted(sub):
    for mask_dtype in (torch.bool, torch.float32, torch.float64):
        x, mask = _inputs(3, 4, torch.float64)
        check_tensor(sub.masked_mean(x, mask.to(mask_dtype)), what=f"masked_mean with a {mask_dtype} mask",
                     shape=(3,), dtype=torch.float64)


@visible
def test_output_stays_connected_to_x(sub):
    x, mask = _inputs(3, 4, torch.float64)
    out = sub.masked_mean(leaf(x), mask)
    check_tensor(out, what="masked_mean", shape=(3,))
    if not out.requires_grad:
        raise Feedback("masked_mean returned a tensor without a graph (requires_grad=False) although x "
                       "requires grad: do not detach, do not build a new tensor from the values")


@visible
def test_shape_mismatches_raise_value_error(sub):
    x, mask = _inputs(3, 4, torch.float64)
    bad = [("a 1-D x and mask of shape (4,)", x[0], mask[0]),
           ("a 3-D x and mask of shape (3, 4, 1)", x[..., None], mask[..., None]),
           ("x of shape (3, 4) and mask of shape (3, 3)", x, mask[:, :3]),
           ("x of shape (3, 4) and mask of shape (2, 4)", x, mask[:2])]
    for what, a, m in bad:
        expect_raises(ValueError, sub.masked_mean, a, m, what=f"masked_mean with {what}")


@visible
def test_empty_rows_give_zero(sub):
    x = torch.tensor([[1.0, 2.0], [float("nan"), float("inf")]], dtype=torch.float64)
    mask = torch.tensor([[True, True], [False, False]])
    xl = leaf(x)
    out = sub.masked_mean(xl, mask)
    check_tensor(out, what="masked_mean", shape=(2,), dtype=torch.float64)
    if float(out[1].detach()) != 0.0:
        raise Feedback(f"the mean of a row with no valid entry must be exactly 0, got {describe(out)} for "
                       f"x {describe(x)} and mask {describe(mask)} (divide by max(n, 1), never by 0)")
    out.sum().backward()
    if xl.grad is None or not bool((xl.grad[1] == 0).all()):
        raise Feedback(f"an empty row must get gradient exactly 0, got {describe(xl.grad)}")
'''

T1_PY = '''"""T1: masked means and their gradients against the scalar-loop oracle on fresh random inputs,
from the smallest case to the largest; the first (smallest) mismatch is reported."""

import torch

from judge.testing import Feedback, assert_close, check_tensor, describe_inputs, leaf, sibling, visible

cases = sibling(__file__, "_cases")

SMALL = ((1, 1), (1, 3), (2, 3))
ALL = SMALL + ((3, 2), (3, 4), (4, 4), (5, 3), (4, 7), (8, 8))


def _check_cases(sub, oracle, ctx, sizes, salt):
    g = ctx.generator(salt)
    for k, (B, L) in enumerate(sizes):
        for dtype in (torch.float64, torch.float32):
            x, mask = cases.random_batch(g, B, L, dtype, fill=cases.FILLS[k % len(cases.FILLS)],
                                         empty_row=0 if B >= 2 and k % 2 else None,
                                         single_row=B - 1 if B >= 2 else None, float_mask=k % 3 == 2)
            inputs = {"x": x, "mask": mask}
            xl = leaf(x)
            out = sub.masked_mean(xl, mask)
            check_tensor(out, what="masked_mean", shape=(B,), dtype=dtype)
            assert_close(out, oracle.masked_mean(x, mask), what="masked_mean", inputs=inputs)
            out.sum().backward()
            if xl.grad is None:
                raise Feedback("masked_mean: no gradient reached x" + describe_inputs(inputs))
            assert_close(xl.grad, oracle.masked_mean_grad(x, mask), what="d sum(masked_mean) / d x",
                         inputs=inputs)


@visible
def test_small_random_cases_match_oracle(sub, oracle, ctx):
    _check_cases(sub, oracle, ctx, SMALL, salt=101)


def test_random_cases_match_oracle(sub, oracle, ctx):
    _check_cases(sub, oracle, ctx, ALL, salt=102)
'''

T2_PY = '''"""T2: the hand-checked case, padding that holds anything, inputs left untouched."""

import math

import torch

from judge.testing import Feedback, assert_close, describe, describe_inputs, leaf, sibling, visible

cases = sibling(__file__, "_cases")
NAN = math.nan


@visible
def test_hand_checked(sub):
    for dtype in (torch.float64, torch.float32):
        x = torch.tensor([[1.0, 2.0, 3.0], [4.0, NAN, NAN], [NAN, NAN, NAN]], dtype=dtype)
        mask = torch.tensor([[True, True, True], [True, False, False], [False, False, False]])
        inputs = {"x": x, "mask": mask}
        xl = leaf(x)
        out = sub.masked_mean(xl, mask)
        assert_close(out, torch.tensor([2.0, 4.0, 0.0], dtype=torch.float64),
                     what="masked_mean (hand-checked: [2, 4, 0])", inputs=inputs)
        out.sum().backward()
        expected = torch.tensor([[1 / 3, 1 / 3, 1 / 3], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]], dtype=torch.float64)
        assert_close(xl.grad, expected, what="d sum(masked_mean) / d x (hand-checked: 1/n on valid entries, "
                                             "exactly 0 on padding)", inputs=inputs)


def test_padding_is_never_read(sub, ctx):
    g = ctx.generator(201)
    for dtype in (torch.float64, torch.float32):
        x0, mask = cases.random_batch(g, 4, 5, dtype, fill=0.0, empty_row=1, single_row=2)
        out0 = sub.masked_mean(x0, mask)
        for fill in cases.FILLS:
            x = x0.masked_fill(~mask, fill)
            inputs = {"x": x, "mask": mask}
            xl = leaf(x)
            out = sub.masked_mean(xl, mask)
            assert_close(out, out0, what=f"masked_mean with padding {fill} (must equal the result with "
                                         f"padding 0)", inputs=inputs)
            out.sum().backward()
            bad = (~mask & (xl.grad != 0)) | torch.isnan(xl.grad)
            if bool(bad.any()):
                raise Feedback(f"with padding {fill}, padded positions must get gradient exactly 0 and no "
                               f"position NaN; got {describe(xl.grad)} (select with torch.where, never "
                               f"x * mask){describe_inputs(inputs)}")


def test_inputs_are_not_mutated(sub, ctx):
    g = ctx.generator(202)
    x, mask = cases.random_batch(g, 3, 4, torch.float64, fill=1e30, empty_row=0)
    before = (x.clone(), mask.clone())
    sub.masked_mean(x, mask)
    if not (torch.equal(x, before[0]) and torch.equal(mask, before[1])):
        raise Feedback(f"masked_mean modified its inputs in place: x was {describe(before[0])}, afterwards "
                       f"{describe(x)} (build new tensors; never masked_fill_ or index assignment on an input)")
'''

T3_PY = '''"""T3: the gradient-descent toy through the submission, against the reference's run."""

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
'''

SOLUTION_PY = '''"""__TITLE__: the vectorised reference.

    mean_b = sum_t m_bt x_bt / max(n_b, 1),   n_b = sum_t m_bt   (0 for an empty row)
"""

import torch


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The mean of each row's valid entries. x, mask: [B, L]; returns [B] in x's dtype."""
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D [B, L], got shape {tuple(x.shape)}")
    if tuple(mask.shape) != tuple(x.shape):
        raise ValueError(f"mask has shape {tuple(mask.shape)}, expected x's {tuple(x.shape)}")
    valid = mask.bool()                                                  # [B, L]
    zero = torch.zeros((), dtype=x.dtype, device=x.device)
    total = torch.where(valid, x, zero).sum(dim=-1)                      # [B]  padding never read
    count = valid.sum(dim=-1).clamp(min=1).to(x.dtype)                   # [B]  max(n_b, 1)
    return total / count
'''

ORACLE_PY = '''"""Scalar-loop oracle for __SLUG__: Python floats, loops over (b, t), padding skipped."""

import torch


def masked_mean(x, mask):
    rows, m = x.detach().to(torch.float64).tolist(), mask.bool().tolist()
    out = []
    for b in range(len(rows)):
        total, n = 0.0, 0
        for t in range(len(rows[b])):
            if m[b][t]:
                total += rows[b][t]
                n += 1
        out.append(total / n if n else 0.0)
    return torch.tensor(out, dtype=torch.float64)


def masked_mean_grad(x, mask):
    """d sum_b masked_mean(x, mask)_b / d x: 1/n_b on valid entries, 0 elsewhere."""
    m = mask.bool().tolist()
    grad = []
    for row in m:
        n = sum(row)
        grad.append([(1.0 / n if v else 0.0) for v in row])
    return torch.tensor(grad, dtype=torch.float64).reshape(x.shape)
'''

WRONG_DIVIDE_BY_L = '''"""Divides by the row length L instead of the number of valid entries.

expect: T1
"""

import torch


def masked_mean(x, mask):
    if x.dim() != 2 or tuple(mask.shape) != tuple(x.shape):
        raise ValueError(f"bad shapes {tuple(x.shape)}, {tuple(mask.shape)}")
    valid = mask.bool()
    total = torch.where(valid, x, torch.zeros((), dtype=x.dtype)).sum(dim=-1)
    return total / x.shape[-1]
'''

WRONG_MULTIPLY_BY_MASK = '''"""Multiplies by the mask instead of selecting: NaN or inf padding becomes NaN (NaN * 0 = NaN).

expect: T1
"""


def masked_mean(x, mask):
    if x.dim() != 2 or tuple(mask.shape) != tuple(x.shape):
        raise ValueError(f"bad shapes {tuple(x.shape)}, {tuple(mask.shape)}")
    m = mask.to(x.dtype)
    return (x * m).sum(dim=-1) / m.sum(dim=-1).clamp(min=1)
'''

FILES = {
    "exercises/{slug}/exercise.toml": EXERCISE_TOML,
    "exercises/{slug}/spec.md": SPEC_MD,
    "exercises/{slug}/starter.py": STARTER_PY,
    "exercises/{slug}/experiment.py": EXPERIMENT_PY,
    "exercises/{slug}/tests/_cases.py": CASES_PY,
    "exercises/{slug}/tests/test_t0_contracts.py": T0_PY,
    "exercises/{slug}/tests/test_t1_oracle.py": T1_PY,
    "exercises/{slug}/tests/test_t2_properties.py": T2_PY,
    "exercises/{slug}/tests/test_t3_experiment.py": T3_PY,
    "reference/{slug}/solution.py": SOLUTION_PY,
    "reference/{slug}/oracle.py": ORACLE_PY,
    "reference/{slug}/wrong/divide_by_length.py": WRONG_DIVIDE_BY_L,
    "reference/{slug}/wrong/multiply_by_mask.py": WRONG_MULTIPLY_BY_MASK,
}


def new_exercise(slug: str, *, root: Path = REPO_ROOT, title: str | None = None) -> list[Path]:
    """Write the example exercise ``slug`` under ``root`` (exercises/ and reference/); returns the
    files written. Refuses to touch an existing exercise or reference folder."""
    if not _SLUG.match(slug):
        raise UsageError(f"slug {slug!r} must match {_SLUG.pattern} (lower case, digits, underscores)")
    root = Path(root)
    for part in ("exercises", "reference"):
        if (root / part / slug).exists():
            raise UsageError(f"{root / part / slug} already exists; choose another slug or remove it")
    title = title or f"{slug}: TODO title (generated example: masked mean)"
    if '"' in title or "\\" in title or "\n" in title:
        raise UsageError("the title may not contain quotes, backslashes or newlines")
    written = []
    for rel, text in FILES.items():
        path = root / rel.format(slug=slug)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.replace("__SLUG__", slug).replace("__TITLE__", title))
        written.append(path)
    return written
