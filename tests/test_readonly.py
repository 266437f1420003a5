"""judge.readonly: what a test sends stays as sent; a write into a read-only input, or a flip of
its requires_grad, fails the call with the input's name and positions (in-process here; the
sandboxed side is tests/test_proxy.py)."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import torch

from judge import readonly
from judge.exercise import Function, discover
from judge.grading import grade
from judge.testing import Feedback

ATTACKS = Path(__file__).parent / "attacks"


def test_parameter_names_come_from_the_declared_signature():
    assert readonly.param_names("masked_is_weights(logp, rollout_logp, mask, clip_low=0.2, "
                                "clip_high=0.2) -> Tensor[B, L]") == ["logp", "rollout_logp", "mask",
                                                                      "clip_low", "clip_high"]
    assert readonly.param_names("f(x: Tensor, *rest, eps: float = 0.1, **kw) -> Tensor") == ["x", "rest", "eps", "kw"]
    assert readonly.param_names("f") == [] and readonly.param_names("f()") == []


def test_labels_name_every_tensor_in_the_order_the_wire_finds_them():
    t = [torch.zeros(1) for _ in range(5)]
    args = (t[0], [t[1], {"k": t[2]}], 3, t[3])
    names = readonly.labels(args, {"mask": t[4], "eps": 0.2}, ["x", "pairs"])
    assert names == ["x", "pairs[0]", "pairs[1]['k']", "argument 4", "mask"]
    assert readonly.top("pairs[1]['k']") == "pairs"
    # one tensor passed again crosses once (sandbox.wire): it keeps its first name
    assert readonly.labels((t[0], [t[0], t[1]]), {"mask": t[0]}, ["x", "pairs"]) == ["x", "pairs[1]"]


def test_changes_name_the_first_positions_and_count_them():
    before = torch.tensor([[1.0, float("nan"), 3.0], [4.0, 5.0, 6.0]])
    after = before.clone()
    after[0, 2], after[1, 0] = -1.0, 0.0
    assert readonly.changes(before, after) == ("written at 2 of 6 positions: (0, 2): 3 -> -1, (1, 0): 4 -> 0")
    assert "written" not in readonly.changes(before, before.clone())  # NaN stays NaN: no change
    many = torch.arange(10.0)
    assert readonly.changes(many, many + 1).endswith("(and 6 more)")
    assert readonly.changes(many, many[:3]).startswith("resized or retyped in place")


SOURCE = '''
import torch

def writes_logp(logp, mask):
    logp[~mask] = 0.0
    return logp.sum()

def clean(logp, mask):
    return (logp * mask).sum()

def fill(buf, value):
    buf.fill_(value)
    return buf

def flag(logp, mask):
    logp.requires_grad_(True)
    return logp.detach().sum()
'''


def _impl():
    mod = types.ModuleType("impl")
    exec(SOURCE, mod.__dict__)
    return readonly.InProcess(mod, [Function("writes_logp", "writes_logp(logp, mask) -> Tensor"),
                                    Function("clean", "clean(logp, mask) -> Tensor"),
                                    Function("fill", "fill(buf, value) -> Tensor", writes=("buf",)),
                                    Function("flag", "flag(logp, mask) -> Tensor")])


def test_in_process_a_write_fails_the_call_names_the_input_and_leaves_the_callers_tensor():
    impl = _impl()
    logp = torch.tensor([[-1.0, -2.0], [-3.0, -4.0]])
    mask = torch.tensor([[True, False], [True, True]])
    with pytest.raises(Feedback, match=r"writes_logp modified its input\(s\) in place:\n  `logp` written "
                                       r"at 1 of 4 positions: \(0, 1\): -2 -> 0"):
        impl.writes_logp(logp, mask)
    assert logp.tolist() == [[-1.0, -2.0], [-3.0, -4.0]]  # what the test sent, for its expectations
    assert len(impl.__judge_violations__()) == 1 and impl.__judge_violations__() == []


def test_in_process_gradients_reach_the_callers_leaf_through_the_copy():
    impl = _impl()
    logp = torch.tensor([1.0, 2.0], requires_grad=True)
    impl.clean(logp, torch.tensor([1.0, 0.0])).backward()
    assert logp.grad.tolist() == [1.0, 0.0] and impl.__judge_violations__() == []


def test_in_process_a_tensor_passed_twice_is_one_copy_passed_twice():
    impl = _impl()
    logp = torch.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    impl._impl.clean = lambda a, b: seen.append(a is b) or (a * b).sum()
    impl._guarded.clear()
    impl.clean(logp, logp).backward()  # as the sandbox's child sees it: `a is b`
    assert seen == [True] and logp.grad.tolist() == [2.0, 4.0]
    impl.clean(logp, logp.detach().clone())
    assert seen == [True, False]  # equal values, two objects: two copies


def test_in_process_a_declared_output_buffer_is_written_and_a_flip_is_reported():
    impl = _impl()
    buf = torch.zeros(3)
    assert impl.fill(buf, 2.0) is buf and buf.tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(Feedback, match="`logp` had its requires_grad flag changed from False to True"):
        impl.flag(torch.zeros(2), torch.ones(2))
    assert impl.clean is impl.clean  # guarded once per function


def test_in_process_grading_rejects_an_input_rewritten_to_steer_the_expectation():
    ex = discover()["glm5_mis"]
    src = (ATTACKS / "steer_expectations.py").read_text().replace("{{REFERENCE}}", ex.solution_path.read_text())
    v = grade(ex, src, sandbox=None, mode="submit", seed=7, tiers=["T2"])
    extreme = next(t for tier in v.tiers for t in tier.tests if t.name == "test_extreme_log_ratios")
    assert v.verdict == "rejected" and extreme.status == "failed"
    assert "`rollout_logp` written at" in extreme.message
    assert grade(ex, ex.solution_path.read_text(), sandbox=None, mode="submit", seed=7).verdict == "accepted"
