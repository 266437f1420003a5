"""Messages that teach (issue 19): each rule shown by a submission that breaks it, graded through
the sandbox (as a learner's code is) and rendered as ``judge local`` prints it."""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch

from judge.exercise import Limits, resolve
from judge.grading import grade
from judge.report import render
from judge.testing import Feedback, assert_close, nonfinite_where_finite

GSPO_REF = "reference/gspo/solution.py"


def _edit(path: str, *pairs: tuple[str, str]) -> str:
    """The reference at ``path`` with each (old, new) replaced exactly once."""
    with open(path) as f:
        src = f.read()
    for old, new in pairs:
        assert src.count(old) == 1, old
        src = src.replace(old, new)
    return src


def _messages(v) -> dict[str, str]:
    return {t.name: t.message for tr in v.tiers for t in tr.tests if t.status in ("failed", "error")}


@pytest.fixture(scope="module")
def gspo(exercises):
    return exercises["gspo"] if isinstance(exercises, dict) else resolve("gspo")


def _grade(ex, source, sandbox, **kw):
    kw.setdefault("seed", 1)
    return grade(ex, source, sandbox=sandbox, **kw)


# --- a syntax error -------------------------------------------------------------------------------

BROKEN = _edit(GSPO_REF, ("def sequence_ratio(logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:",
                          "def sequence_ratio(logp, old_logp, mask)"))


@pytest.mark.parametrize("isolated", [True, False])
def test_a_syntax_error_shows_the_line_a_caret_and_one_line_for_the_tiers(gspo, sandbox, isolated):
    v = _grade(gspo, BROKEN, sandbox if isolated else None)
    line = BROKEN.splitlines().index("def sequence_ratio(logp, old_logp, mask)") + 1
    msg = v.error.message
    assert v.error.kind == "syntax_error" and msg.startswith(f"line {line}: expected ':'"), msg
    code, caret = msg.splitlines()[1:3]
    assert code.strip() == "def sequence_ratio(logp, old_logp, mask)"
    assert caret.strip() == "^" and caret.index("^") == code.index(")") + 1  # just past the ")"
    text = render(v)
    assert "T0, T1, T2, T3 not run: the submission could not be loaded (syntax error)" in text
    assert "skipped" not in text and "0.0 ms" not in text


# --- an exception: the learner's own frames -------------------------------------------------------

DEEP = _edit(GSPO_REF,
             ("def _seq_log_ratio(", "def _count(valid, logp):\n    return valid.sum(dim=-1).to(logp.dtype) / undefined_name\n\n\ndef _seq_log_ratio("),
             ("    n = valid.sum(dim=-1).to(logp.dtype)                           # [B]    |y_i|\n",
              "    n = _count(valid, logp)\n"))


def test_an_exception_shows_the_learners_frames_from_the_call_site_down(gspo, sandbox):
    v = _grade(gspo, DEEP, sandbox, tiers=["T0"])
    msg = _messages(v)["test_sequence_ratio_returns_one_ratio_per_response"]
    lines = DEEP.splitlines()
    at = {code: lines.index(code) + 1 for code in (
        "    log_s, _ = _seq_log_ratio(logp, old_logp, mask)", "    n = _count(valid, logp)",
        "    return valid.sum(dim=-1).to(logp.dtype) / undefined_name")}
    assert msg.startswith("sequence_ratio raised NameError: name 'undefined_name' is not defined"), msg
    frames = [ln.strip() for ln in msg.splitlines() if ln.strip().startswith("line ")]
    assert frames == [
        f"line {at['    log_s, _ = _seq_log_ratio(logp, old_logp, mask)']}, in sequence_ratio: log_s, _ = _seq_log_ratio(logp, old_logp, mask)",
        f"line {at['    n = _count(valid, logp)']}, in _seq_log_ratio: n = _count(valid, logp)",
        f"line {at['    return valid.sum(dim=-1).to(logp.dtype) / undefined_name']}, in _count: "
        "return valid.sum(dim=-1).to(logp.dtype) / undefined_name"], msg
    for internal in ("Remote", "judge/", "runner.py", "Traceback", "readonly", "child.py"):
        assert internal not in msg


def test_the_starter_names_no_internal_type_and_says_each_message_once(gspo, sandbox):
    with open(gspo.starter_path) as f:
        v = _grade(gspo, f.read(), sandbox)
    msgs = _messages(v)
    assert not [m for m in msgs.values() if "Remote" in m or "Traceback" in m]
    text = render(v)
    assert "Remote" not in text
    # every failure reads "<fn> is not implemented yet", with context in front or not
    same = {fn: [n for n, m in msgs.items() if m.endswith(f"{fn} is not implemented yet")]
            for fn in ("sequence_ratio", "gspo_loss")}
    assert sum(map(len, same.values())) == len(msgs)
    for fn, names in same.items():
        assert text.count(f"       {fn} is not implemented yet") == 1, text
        assert f"and {len(names) - 1} more tests failed the same way" in text
    assert text.count("✗ test_") == 2  # one per distinct message; the other tests by name only
    assert "failed the same way as above: " in text


# --- never "expected nan, got nan" ---------------------------------------------------------------

def test_both_sides_nan_is_said_so_not_expected_nan_got_nan():
    got = torch.tensor([float("nan"), 0.5, float("nan"), 2.0], dtype=torch.float64)
    with pytest.raises(Feedback) as e:
        assert_close(got, got.clone(), what="s")
    msg = str(e.value)
    assert "expected nan, got nan" not in msg
    assert "s at index (0,): got NaN" in msg and "NaN on both sides at (0,), (2,)" in msg


def test_a_mismatch_names_the_first_real_difference_and_the_nan_side():
    exp = torch.tensor([float("nan"), 1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    got = torch.tensor([float("nan"), 1.0, float("nan"), 3.5, 4.0], dtype=torch.float64)
    with pytest.raises(Feedback) as e:
        assert_close(got, exp, what="s")
    msg = str(e.value)
    assert msg.startswith("s at index (2,): expected 2, got nan (3 of 5 values differ")
    assert "also at (3,): expected 3, got 3.5" in msg
    assert "NaN only in what you returned at (2,)" in msg and "NaN on both sides at (0,)" in msg


MULMASK = _edit(GSPO_REF, (
    "    logp_v = torch.where(valid, logp, zero)                        # [B, L] padding -> 0, grad 0\n"
    "    old_v = torch.where(valid, old_logp.detach(), zero)            # [B, L] sg(π_old)",
    "    logp_v = logp * mask\n    old_v = old_logp.detach() * mask"))


def test_a_graded_nan_failure_never_reads_expected_nan_got_nan_and_shows_small_inputs(gspo, sandbox):
    v = _grade(gspo, MULMASK, sandbox, tiers=["T2"], diagnose=False)
    msgs = _messages(v)
    assert msgs and not [m for m in msgs.values() if "expected nan, got nan" in m]
    dup = msgs["test_duplicating_every_valid_token_changes_nothing"]
    assert "NaN on both sides at" in dup, dup
    # the failing input has 20 values: they are shown, not only its shape
    assert re.search(r"logp = tensor\(shape=\(4, 5\), dtype=float64, values=\[\[", dup), dup


# --- a wrong output shape -------------------------------------------------------------------------

COLUMN = _edit(GSPO_REF, ("    return torch.exp(log_s)                                        # [B]",
                          "    return torch.exp(log_s)[:, None]"))


def test_a_wrong_shape_is_reported_by_the_shape_test_and_t3_shows_no_traceback(gspo, sandbox):
    v = _grade(gspo, COLUMN, sandbox, tiers=["T0", "T3"], diagnose=False)
    msgs = _messages(v)
    assert "returned shape (3, 1), expected (3,)" in msgs["test_sequence_ratio_returns_one_ratio_per_response"]
    t3 = [t for tr in v.tiers if tr.tier == "T3" for t in tr.tests]
    assert t3 and all(t.status == "failed" for t in t3)
    for t in t3:
        assert "shape (3, 1), expected (3,)" in t.message, t.message
        for internal in ("Traceback", "runner.py", "TypeError", "could not complete"):
            assert internal not in t.message


# --- printing -------------------------------------------------------------------------------------

CHATTY = _edit(GSPO_REF, ("    _check_shapes(logp, old_logp, mask)\n    log_s, _ =",
                          "    print('x' * 100_000)\n    _check_shapes(logp, old_logp, mask)\n    log_s, _ ="))


def test_cut_output_says_how_much_was_printed_and_kept(gspo, sandbox):
    v = _grade(gspo, CHATTY, sandbox, tiers=["T0"], diagnose=False)
    dropped = int(re.search(r"\[… (\d+) more bytes of output dropped\]", v.output).group(1))
    kept = len(v.output[:v.output.rindex("\n[…")].encode())
    assert kept == 64 << 10
    text = render(v)
    mb = (kept + dropped) / (1 << 20)
    assert f"your code printed {mb:.1f} MB; the judge kept the first 64 KiB" in text, text
    shown = [ln for ln in text.splitlines() if ln.startswith("    | ")]
    assert shown and all(len(ln) < 250 for ln in shown)  # a 100k-character line is cut for the terminal


# --- selected tiers, and a stop -------------------------------------------------------------------

def test_selected_tiers_end_with_what_was_not_run(gspo, sandbox):
    with open(GSPO_REF) as f:
        v = _grade(gspo, f.read(), sandbox, tiers=["T0", "T1"])
    text = render(v)
    assert text.rstrip().endswith("passed the selected tiers (T2, T3 not run)")
    assert "ACCEPTED" not in text


SPINS = _edit(GSPO_REF, ("    _check_shapes(logp, old_logp, mask)\n    log_s, _ =",
                         "    global CALLS\n    CALLS = globals().get('CALLS', 0) + 1\n"
                         "    while CALLS == 4:\n        pass\n"
                         "    _check_shapes(logp, old_logp, mask)\n    log_s, _ ="))


def test_after_a_time_limit_a_tiers_count_covers_all_its_tests(gspo, sandbox):
    quick = dataclasses.replace(gspo, limits=Limits(call_seconds=0.5, total_seconds=20.0))
    v = _grade(quick, SPINS, sandbox, diagnose=False)
    assert v.error is not None and v.error.kind == "time_limit"
    text = render(v)
    for tr in v.tiers:
        n, not_run = len(tr.tests), sum(t.status == "skipped" for t in tr.tests)
        assert n > 0
        passed = sum(t.status == "passed" for t in tr.tests)
        row = next(ln for ln in text.splitlines() if ln.startswith(f"  {tr.tier} "))
        assert f" {passed}/{n} " in row, row
        assert (f"({not_run} not run)" in row) == (not_run > 0), row
    assert any(t.status == "skipped" for t in v.tiers[0].tests)  # the stop left T0 tests unrun


# --- a hint only where it fits ---------------------------------------------------------------------

TIS_REF = "reference/tis/solution.py"
TIS_PARTIAL_B = _edit(TIS_REF, ("    return (per_token.sum(dim=1) / n_i).sum() / max(1, logp.shape[0])",
                                "    return (per_token.sum(dim=1) / n_i).sum() / valid.any(dim=1).sum().clamp(min=1)"))
TIS_MULMASK = _edit(TIS_REF, ("    log_r = torch.where(valid, logp - old_logp.detach(), zero)             # [B, L]",
                              "    log_r = (logp - old_logp.detach()) * valid"),
                     ("    per_token = torch.where(valid, w * pg, zero)                           # w multiplies the loss",
                      "    per_token = w * pg * valid"))


def test_the_padding_hint_is_given_only_when_padding_is_the_failure(exercises, sandbox):
    tis = exercises["tis"] if isinstance(exercises, dict) else resolve("tis")
    hint = "neutralise padding with torch.where, never x * mask"
    partial = _messages(_grade(tis, TIS_PARTIAL_B, sandbox, tiers=["T2"], diagnose=False))
    assert "tis_ppo_loss with padding" in partial["test_padding_is_neutralised"]
    assert hint not in partial["test_padding_is_neutralised"]  # it does use torch.where: B is wrong
    masked = _messages(_grade(tis, TIS_MULMASK, sandbox, tiers=["T2"], diagnose=False))
    assert hint in masked["test_padding_is_neutralised"]


def test_hint_when_decides_whether_the_hint_is_shown():
    exp = torch.tensor([1.0, 2.0], dtype=torch.float64)
    for got, shown in ((torch.tensor([1.0, float("nan")], dtype=torch.float64), True),
                       (torch.tensor([1.0, 3.0], dtype=torch.float64), False)):
        with pytest.raises(Feedback) as e:
            assert_close(got, exp, what="loss", hint="use torch.where", hint_when=nonfinite_where_finite)
        assert ("use torch.where" in str(e.value)) == shown


def test_an_import_time_exception_shows_the_learners_frames(gspo, sandbox):
    src = _edit(GSPO_REF, ("import torch\n", "import torch\n\n\ndef _table():\n    return {}['ratio']\n\n\n"
                                             "def _setup():\n    return _table()\n\n\nSETUP = _setup()\n"))
    v = _grade(gspo, src, sandbox)
    assert v.error.kind == "import_error"
    msg = v.error.message
    assert msg.startswith("KeyError: 'ratio' (submission.py, line "), msg
    frames = [ln.strip() for ln in msg.splitlines() if ln.strip().startswith("line ")]
    assert [f.split(": ", 1)[1] for f in frames] == ["SETUP = _setup()", "return _table()", "return {}['ratio']"]
    assert "T0, T1, T2, T3 not run: the submission could not be loaded (import error)" in render(v)
