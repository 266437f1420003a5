"""Mutants of how a reference's declared functions take their arguments and their rows.

``judge.authoring.mutate`` changes one expression of the reference; these keep every line of it
and wrap a declared function instead, so the mistake sits where learners make it: in the handling
of arguments and of the batch. Each wrapper first calls the reference with the arguments as
given (its validation and its errors stay the reference's), then returns what the mistaken
version computes:

| operator    | the mistaken version                                                          | label                      |
|-------------|-------------------------------------------------------------------------------|----------------------------|
| `alone`     | a defaulted parameter `p` is honoured only when another defaulted parameter `q` is given too (else `p`'s default is used): `eps_high = eps_low if eps_high is None`-style defaults, a bound applied only beside its partner | `alone:clip_low\\|clip_high` |
| `rows`      | (a function with `mask` and `advantages`) the responses whose advantage is exactly 0 are dropped before it runs (DAPO-style filtering), or the responses with no valid token are | `rows:zero-advantage`, `rows:empty` |
| `precision` | float64 tensor inputs computed in float32, the result cast back to float64    | `precision:float32`        |
| `order`     | two neighbouring defaulted parameters in the other order in the signature (a positional call gives each the other's value) | `order:eps_low<->eps_high` |

Ids are ``<file>:<line of the def>:<label>``, as ``mutate``'s are, so an equivalent one is listed
in ``mutants.toml`` the same way (e.g. ``rows:empty`` for a loss that is a token-mean only: an
empty response adds no token to it).
"""

from __future__ import annotations

import ast
import itertools

from judge.authoring.mutate import Mutant

_PRELUDE = '''

# --- interface mutant (judge.authoring.interface): {label} of {fn} ---
import inspect as _judge_inspect
import torch as _judge_torch
_judge_orig_{fn} = {fn}
_judge_sig_{fn} = _judge_inspect.signature({fn})
'''

_ALONE = '''
def {fn}(*args, **kwargs):
    _judge_orig_{fn}(*args, **kwargs)  # the reference's validation, on the arguments as given
    bound = _judge_sig_{fn}.bind(*args, **kwargs)
    if {p!r} in bound.arguments and {q!r} not in bound.arguments:
        del bound.arguments[{p!r}]  # the mistake: {p} is honoured only beside {q}
    return _judge_orig_{fn}(*bound.args, **bound.kwargs)
'''

_ROWS = '''
def {fn}(*args, **kwargs):
    full = _judge_orig_{fn}(*args, **kwargs)
    bound = _judge_sig_{fn}.bind(*args, **kwargs)
    mask, adv = bound.arguments.get("mask"), bound.arguments.get("advantages")
    if not (isinstance(mask, _judge_torch.Tensor) and isinstance(adv, _judge_torch.Tensor)
            and mask.dim() >= 1 and adv.dim() == 1 and adv.shape[0] == mask.shape[0]):
        return full
    B = mask.shape[0]
    if B == 0:
        return full
    keep = ({keep}).nonzero().flatten()  # the mistake: these rows only
    rows = dict(bound.arguments)
    for name, value in bound.arguments.items():
        if isinstance(value, _judge_torch.Tensor) and value.dim() >= 1 and value.shape[0] == B:
            rows[name] = value[keep]
    return _judge_orig_{fn}(**rows)
'''
_KEEP = {"zero-advantage": "adv != 0", "empty": "(mask != 0).reshape(B, -1).any(-1)"}

_PRECISION = '''
def {fn}(*args, **kwargs):
    full = _judge_orig_{fn}(*args, **kwargs)
    bound = _judge_sig_{fn}.bind(*args, **kwargs)
    lowered = dict(bound.arguments)
    for name, value in bound.arguments.items():
        if isinstance(value, _judge_torch.Tensor) and value.dtype == _judge_torch.float64:
            lowered[name] = value.float()  # the mistake: float64 computed in float32
    out = _judge_orig_{fn}(**lowered)
    if isinstance(out, _judge_torch.Tensor) and isinstance(full, _judge_torch.Tensor) \
            and out.is_floating_point():
        return out.to(full.dtype)  # and cast back: the dtype is right, the digits are not
    return out
'''


_ORDER = '''
def {fn}(*args, **kwargs):
    names = list(_judge_sig_{fn}.parameters)
    i, j = names.index({p!r}), names.index({q!r})
    if len(args) > max(i, j):  # the mistake: {p} and {q} in the other order in the signature
        args = list(args)
        args[i], args[j] = args[j], args[i]
    return _judge_orig_{fn}(*args, **kwargs)
'''


def _defaulted(fn: ast.FunctionDef) -> list[str]:
    a = fn.args
    positional = a.posonlyargs + a.args
    names = [p.arg for p in positional[len(positional) - len(a.defaults):]]
    return names + [p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]


def _params(fn: ast.FunctionDef) -> list[str]:
    a = fn.args
    return [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]


def generate(source: str, functions: list[str], filename: str = "solution.py") -> list[Mutant]:
    """The interface mutants of ``source``'s top-level functions named in ``functions`` (the
    exercise's declared ones), in the order of ``functions``."""
    tree = ast.parse(source, filename)
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    out: list[Mutant] = []

    def add(fn: ast.FunctionDef, operator: str, label: str, body: str, before: str, after: str) -> None:
        code = source.rstrip("\n") + "\n" + _PRELUDE.format(fn=fn.name, label=label) + body
        compile(code, filename, "exec")
        out.append(Mutant(id=f"{filename}:{fn.lineno}:{label}", operator=operator, label=label,
                          line=fn.lineno, before=before, after=after, source=code))

    for name in functions:
        fn = defs.get(name)
        if fn is None:
            continue
        for p, q in itertools.permutations(_defaulted(fn), 2):
            add(fn, "alone", f"alone:{p}|{q}", _ALONE.format(fn=name, p=p, q=q),
                f"{name}(..., {p}=v)", f"{name}(..., {p}=v) uses {p}'s default unless {q} is given too")
        positional = [p.arg for p in fn.args.posonlyargs + fn.args.args]
        ordered = [p for p in _defaulted(fn) if p in positional]
        for p, q in zip(ordered, ordered[1:]):
            add(fn, "order", f"order:{p}<->{q}", _ORDER.format(fn=name, p=p, q=q),
                f"{name}(..., {p}, {q})", f"{name}(..., {q}, {p})")
        if {"mask", "advantages"} <= set(_params(fn)):
            for kind, keep in _KEEP.items():
                add(fn, "rows", f"rows:{kind}", _ROWS.format(fn=name, keep=keep),
                    f"{name}(batch)", f"{name}(the batch without its {kind} rows)")
        add(fn, "precision", "precision:float32", _PRECISION.format(fn=name),
            f"{name}(float64 inputs)", f"{name}(inputs.float()).double()")
    return out
