"""Inputs are read-only: what a test sends stays as it was, and a write into it fails the test.

A test computes its expectations from the tensors it sent, so those must be what it sent, not
what the submission left in them. Both ways of running a submission keep them pristine:

- sandboxed (``judge.proxy``): the child works on its own copy and reports the inputs it
  changed (values, shape, strides) or whose ``requires_grad`` it flipped; nothing is copied back
  into the test's tensors, unless the exercise declares that the function writes that input
  (``writes = ["buf"]`` under the function in exercise.toml);
- in-process (``InProcess``: ``judge local --reference``, ``judge validate``, plain pytest): the
  function gets a copy of each read-only tensor, and the copy is compared after the call.

Either way the call raises ``Feedback`` naming the input and the positions it changed, and the
run records it (``take``), so the test that made the call fails even if it read no answer.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable

import torch

from judge.testing import Feedback, describe

MAX_SHOWN = 4  # positions named per input


def param_names(signature: str) -> list[str]:
    """The parameter names of a declared signature, e.g. ``"f(x, mask, eps=0.2) -> Tensor"``."""
    m = re.match(r"\s*[A-Za-z_]\w*\s*\((.*?)\)", signature)
    if not m:
        return []
    names = []
    for part in m.group(1).split(","):
        name = re.split(r"[:=]", part.strip().lstrip("*"), maxsplit=1)[0].strip()
        if name.isidentifier():
            names.append(name)
    return names


def labels(args: tuple | list, kwargs: dict, names: list[str]) -> list[str]:
    """A name for each tensor of a call, in the order ``sandbox.wire.tensors_in`` finds them
    (positional arguments, then keyword arguments): ``logp``, ``pairs[1]``, ``argument 3``. A
    tensor passed again (the same object) crosses once, as ``sandbox.wire`` sends it: it keeps
    its first name."""
    return [label for _, label in _labelled(args, kwargs, names)]


def _labelled(args: tuple | list, kwargs: dict, names: list[str]) -> list[tuple[torch.Tensor, str]]:
    """(tensor, name) for each tensor of a call, in ``labels``' order."""
    out: list[tuple[torch.Tensor, str]] = []

    def walk(v: Any, label: str) -> None:
        if isinstance(v, torch.Tensor):
            if not (type(v) is torch.Tensor and any(v is t for t, _ in out)):
                out.append((v, label))
        elif type(v) is list or type(v) is tuple:  # exactly these, as the wire sends them
            for j, x in enumerate(v):
                walk(x, f"{label}[{j}]")
        elif type(v) is dict:
            for k, x in v.items():
                walk(x, f"{label}[{k!r}]")

    for i, a in enumerate(args):
        walk(a, names[i] if i < len(names) else f"argument {i + 1}")
    for k, v in kwargs.items():
        walk(v, str(k))
    return out


def top(label: str) -> str:
    """The parameter a label belongs to (``pairs[1]`` -> ``pairs``)."""
    return label.split("[", 1)[0]


def changes(before: torch.Tensor, after: torch.Tensor) -> str:
    """How ``after`` differs from ``before``: the first positions that changed, and how many."""
    if after.shape != before.shape or after.dtype != before.dtype:
        return (f"resized or retyped in place: {describe(before)} became "
                f"shape {tuple(after.shape)}, dtype {str(after.dtype).replace('torch.', '')}")
    a, b = after.detach(), before.detach()
    same = (a == b) | (a.isnan() & b.isnan()) if a.is_floating_point() else a == b
    bad = (~same).nonzero()
    if not len(bad):
        return "changed in place (its layout or storage; the values read the same)"
    shown = []
    for idx in bad[:MAX_SHOWN].tolist():
        pos = tuple(idx)
        shown.append(f"{pos if len(pos) != 1 else pos[0]}: {_scalar(b[pos])} -> {_scalar(a[pos])}")
    more = f" (and {len(bad) - MAX_SHOWN} more)" if len(bad) > MAX_SHOWN else ""
    return f"written at {len(bad)} of {a.numel()} positions: " + ", ".join(shown) + more


def _scalar(t: torch.Tensor) -> str:
    return describe(t.item())


def violation(fn: str, problems: Iterable[tuple[str, str]]) -> str:
    """The message of a call that changed read-only inputs: (input, what happened) pairs."""
    lines = "\n  ".join(f"`{name}` {what}" for name, what in problems)
    return (f"{fn} modified its input(s) in place:\n  {lines}\n  The inputs are read-only (spec.md): "
            f"compute on new tensors (torch.where, .clone(), out-of-place ops) instead.")


def flip(label: str, was: bool) -> tuple[str, str]:
    """A problem entry for an input whose ``requires_grad`` the call changed."""
    return label, (f"had its requires_grad flag changed from {was} to {not was} "
                   f"(requires_grad_ on an input changes what the caller's autograd sees)")


class Recorder:
    """The read-only violations seen since the runner last looked (one list per submission)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def report(self, message: str) -> Feedback:
        self.seen.append(message)
        return Feedback(message)

    def take(self) -> list[str]:
        out, self.seen = self.seen, []
        return out


class InProcess:
    """An in-process implementation (a module) as the tests see it: each declared function gets
    copies of its read-only tensor inputs, so the caller's stay pristine; a write into a copy, or
    a flip of its requires_grad, raises ``Feedback`` and is recorded. Gradients still flow: the
    copy of an input that requires grad is a differentiable clone of it."""

    def __init__(self, impl: Any, functions: Iterable[Any]):
        self._impl = impl
        self._functions = {f.name: f for f in functions}
        self._guarded: dict[str, Callable] = {}
        self.violations = Recorder()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        guarded = self.__dict__["_guarded"].get(name)
        if guarded is not None:
            return guarded
        value = getattr(self.__dict__["_impl"], name)
        spec = self.__dict__["_functions"].get(name)
        if spec is None or not callable(value):
            return value
        guarded = self._guard(name, value, param_names(spec.signature),
                              set(getattr(spec, "writes", ()) or ()))
        self._guarded[name] = guarded
        return guarded

    def __judge_violations__(self) -> list[str]:
        return self.violations.take()

    def _guard(self, name: str, fn: Callable, names: list[str], writes: set[str]) -> Callable:
        written = {i for i, n in enumerate(names) if n in writes}  # positions of declared buffers

        def call(*args: Any, **kwargs: Any) -> Any:
            kept: list[tuple[torch.Tensor, torch.Tensor, int, bool]] = []
            a = [v if i in written else _copied(v, kept) for i, v in enumerate(args)]
            k = {key: v if key in writes else _copied(v, kept) for key, v in kwargs.items()}
            out = fn(*a, **k)
            for c, original, version, rg in kept:
                if c._version != version or c.requires_grad != rg or c.shape != original.shape:
                    raise self.violations.report(violation(name, _problems(kept, args, kwargs, names)))
            return out

        call.__name__ = name
        return call


def _copied(v: Any, kept: list) -> Any:
    """``v`` with each plain tensor in it replaced by a copy (recorded in ``kept`` with its
    original, version counter and requires_grad flag); a tensor passed twice gets one copy,
    passed twice, as the sandbox's child sees it."""
    if type(v) is torch.Tensor:
        for c, original, _, _ in kept:
            if original is v:
                return c
        c = v.clone()
        kept.append((c, v, c._version, c.requires_grad))
        return c
    if type(v) is list or type(v) is tuple:
        items = [_copied(x, kept) for x in v]
        return items if type(v) is list else tuple(items)
    if type(v) is dict:
        return {key: _copied(x, kept) for key, x in v.items()}
    return v


def _problems(kept: list, args: tuple, kwargs: dict, names: list[str]) -> list[tuple[str, str]]:
    """What the call did to each copy it changed, by the input's name (found only now: the
    names cost more than the copies)."""
    named = {id(t): label for t, label in _labelled(args, kwargs, names)}
    problems = []
    for c, original, version, rg in kept:
        label = named.get(id(original), "an input")
        if c.requires_grad != rg:
            problems.append(flip(label, rg))
        if c._version != version or c.shape != original.shape:
            problems.append((label, changes(original, c)))
    return problems
