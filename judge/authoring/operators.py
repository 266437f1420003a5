"""The mutation operators of ``judge.authoring.mutate``: where each applies in a module's AST
and how it changes the node (the table is in ``mutate``'s docstring). ``sites(tree)`` yields
every applicable change; ``mutate`` applies them one at a time."""

from __future__ import annotations

import ast
import builtins
import copy
from dataclasses import dataclass
from typing import Callable, Iterator

OPERATORS = ("comparison", "minmax", "clamp", "detach", "mask", "summean", "constant",
             "guard", "default", "wheremul", "expdiv", "cast", "branch", "arith", "negate", "swap",
             "alone", "rows", "precision", "order")  # the last four: judge.authoring.interface's
_CASTS = ("to", "double", "float", "half", "long", "int", "bool", "type", "clone", "contiguous")
_CMP_CALLS = {"lt": "le", "le": "lt", "gt": "ge", "ge": "gt"}  # torch.lt(a, b), a.le(b)
_CMP_SWAP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}
_MINMAX = {"min": "max", "max": "min", "minimum": "maximum", "maximum": "minimum",
           "amin": "amax", "amax": "amin"}
_SUMMEAN = {"sum": "mean", "mean": "sum"}
_CLAMPS = ("clamp", "clip")
_MASK_WORDS = ("mask", "valid")
_ARITH = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult}


# A site: where a mutation applies and how. ``apply`` receives the copied node and returns
# the replacement node (or mutates it in place and returns it); for a statement, a list of
# statements (possibly empty) spliced into its block.
@dataclass(frozen=True)
class Site:
    index: int  # position of the node in ast.walk order
    operator: str
    label: str
    apply: Callable[[ast.AST], ast.AST]
    shown: tuple[str, str] | None = None  # (before, after) to show, when the node's text says little


def _name_of(func: ast.AST) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def _is_torch_call(call: ast.Call) -> bool:
    f = call.func
    return isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "torch"


def _mentions_mask(node: ast.AST) -> bool:
    text = ast.unparse(node).lower()
    return any(w in text for w in _MASK_WORDS)


def _number(node: ast.AST) -> float | int | None:
    """The value of a numeric literal (``-c`` included), else None."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
            and isinstance(node.operand, ast.Constant) and type(node.operand.value) in (int, float)):
        return -node.operand.value
    return None


def _fmt(v: float | int) -> str:
    return repr(v)


def _literal(v: float | int) -> ast.AST:
    if v < 0:
        return ast.UnaryOp(op=ast.USub(), operand=ast.Constant(-v))
    return ast.Constant(v)


def _skipped_ids(tree: ast.AST) -> set[int]:
    """ids of nodes that are never mutated: raise statements, f-strings, annotations, docstrings."""
    skip: set[int] = set()

    def mark(n: ast.AST | None) -> None:
        if n is not None:
            skip.update(id(x) for x in ast.walk(n))

    for n in ast.walk(tree):
        if isinstance(n, (ast.Raise, ast.JoinedStr)):
            mark(n)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            mark(n.returns)
            for a in n.args.posonlyargs + n.args.args + n.args.kwonlyargs:
                mark(a.annotation)
            for a in (n.args.vararg, n.args.kwarg):
                if a is not None:
                    mark(a.annotation)
        elif isinstance(n, ast.AnnAssign):
            mark(n.annotation)
    return skip


def sites(tree: ast.AST) -> Iterator[Site]:
    skip = _skipped_ids(tree)
    yield from _statement_sites(tree, skip)
    unary_operands = {id(n.operand) for n in ast.walk(tree)
                      if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub)}
    # calls made for their effect (validation: _check_shapes(logp, old_logp)): their arguments
    # are not swapped, which would only change which of two inputs an error message names
    statements = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
    for i, node in enumerate(ast.walk(tree)):
        if id(node) in skip:
            continue
        # comparison swaps, one operator of a chain at a time
        if isinstance(node, ast.Compare):
            for k, op in enumerate(node.ops):
                new = _CMP_SWAP.get(type(op))
                if new is None:
                    continue

                def swap(n, k=k, new=new):
                    n.ops[k] = new()
                    return n
                yield Site(i, "comparison", f"{type(op).__name__}->{new.__name__}", swap)
        # min <-> max, as a builtin name or an attribute (torch.minimum, x.amax, x.min)
        elif isinstance(node, ast.Call) and _name_of(node.func) in _MINMAX:
            name = _name_of(node.func)

            def swap_mm(n, other=_MINMAX[name]):
                if isinstance(n.func, ast.Attribute):
                    n.func.attr = other
                else:
                    n.func.id = other
                return n
            yield Site(i, "minmax", f"{name}->{_MINMAX[name]}", swap_mm)
        if isinstance(node, ast.Call):
            yield from _call_sites(i, node, id(node) in statements)
        # x * mask -> x
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            for keep, drop in (("left", "right"), ("right", "left")):
                if _mentions_mask(getattr(node, drop)) and not _mentions_mask(getattr(node, keep)):
                    yield Site(i, "mask", "*mask->dropped", lambda n, keep=keep: getattr(n, keep))
        # arithmetic: a + b <-> a - b, a * b <-> a / b (also +=, -=, *=, /=)
        if isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in _ARITH:
            new_op = _ARITH[type(node.op)]

            def swap_op(n, new_op=new_op):
                n.op = new_op()
                return n
            yield Site(i, "arith", f"{type(node.op).__name__}->{new_op.__name__}", swap_op)
        # -x -> x (a negated expression, not a negative literal)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and _number(node) is None:
            yield Site(i, "negate", "-x->x", lambda n: n.operand)
        # numeric constants: c -> c + 1
        v = _number(node)
        if v is not None and id(node) not in unary_operands:
            new_v = v + 1
            yield Site(i, "constant", f"{_fmt(v)}->{_fmt(new_v)}", lambda n, nv=new_v: _literal(nv))


def _call_sites(i: int, node: ast.Call, statement: bool = False) -> Iterator[Site]:
    name = _name_of(node.func)
    is_method = isinstance(node.func, ast.Attribute) and not _is_torch_call(node)
    # .detach() removed
    if name == "detach" and is_method and not node.args and not node.keywords:
        yield Site(i, "detach", "detach->removed", lambda n: n.func.value)
    # torch.where(m, a, b) -> a; x.masked_fill(m, v) -> x
    if name == "where" and _is_torch_call(node) and len(node.args) == 3:
        yield Site(i, "mask", "where->a", lambda n: n.args[1])
    if name == "masked_fill" and is_method:
        yield Site(i, "mask", "masked_fill->dropped", lambda n: n.func.value)
    # sum <-> mean
    if name in _SUMMEAN and (is_method or _is_torch_call(node)):
        other = _SUMMEAN[name]

        def swap_sm(n, other=other):
            n.func.attr = other
            return n
        yield Site(i, "summean", f"{name}->{other}", swap_sm)
    # clamp bounds
    if name in _CLAMPS and (is_method or _is_torch_call(node)):
        offset = 0 if is_method else 1  # torch.clamp(x, min, max)
        bounds = {}
        for pos, bound in enumerate(("min", "max")):
            if len(node.args) > offset + pos and not _is_none(node.args[offset + pos]):
                bounds[bound] = ("arg", offset + pos)
        for k, kw in enumerate(node.keywords):
            if kw.arg in ("min", "max") and not _is_none(kw.value):
                bounds[kw.arg] = ("kw", k)
        for bound, where in bounds.items():
            only = len(bounds) == 1

            def drop(n, where=where, only=only):
                if only:  # clamp() with no bound is an error: the mutant drops the clamp instead
                    return n.func.value if isinstance(n.func, ast.Attribute) and not _is_torch_call(n) \
                        else n.args[0]
                kind, j = where
                if kind == "arg":
                    n.args[j] = ast.Constant(None)
                else:
                    n.keywords[j].value = ast.Constant(None)
                return n
            yield Site(i, "clamp", f"{name}-{bound}->None", drop)
    if name in ("clamp_min", "clamp_max") and is_method:
        yield Site(i, "clamp", f"{name}->removed", lambda n: n.func.value)
    # torch.lt(a, b) <-> torch.le(a, b), a.gt(b) <-> a.ge(b)
    if name in _CMP_CALLS and (is_method or _is_torch_call(node)):
        def swap_cmp(n, other=_CMP_CALLS[name]):
            n.func.attr = other
            return n
        yield Site(i, "comparison", f"{name}->{_CMP_CALLS[name]}", swap_cmp)
    # torch.where(c, a, b) -> a * c + b * ~c: selection replaced by multiplication with the mask
    if name == "where" and _is_torch_call(node) and len(node.args) == 3:
        def where_mul(n):
            c, a, b = n.args
            keep = ast.BinOp(left=a, op=ast.Mult(), right=c)
            drop = ast.BinOp(left=b, op=ast.Mult(), right=ast.UnaryOp(op=ast.Invert(), operand=copy.deepcopy(c)))
            return ast.BinOp(left=keep, op=ast.Add(), right=drop)
        yield Site(i, "wheremul", "where->mul", where_mul)
    # exp(a - b) -> exp(a) / exp(b)
    diff = _exp_of_difference(node)
    if diff is not None:
        def exp_div(n):
            a, b = _exp_of_difference(n)
            return ast.BinOp(left=_exp_like(n, a), op=ast.Div(), right=_exp_like(n, b))
        yield Site(i, "expdiv", "exp(a-b)->exp(a)/exp(b)", exp_div)
    # two arguments swapped: torch.where(c, a, b) -> torch.where(c, b, a); a call of a plain
    # function (not a builtin: max(a, b) is minmax's; not a class) with its first two positional
    # arguments exchanged: helper(logp, old_logp) -> helper(old_logp, logp)
    if name == "where" and _is_torch_call(node) and len(node.args) == 3:
        def swap_where(n):
            n.args[1], n.args[2] = n.args[2], n.args[1]
            return n
        yield Site(i, "swap", "where-a<->b", swap_where)
    elif (not statement and isinstance(node.func, ast.Name) and len(node.args) >= 2
          and not node.func.id[:1].isupper()
          and not hasattr(builtins, node.func.id)
          and ast.unparse(node.args[0]) != ast.unparse(node.args[1])):
        def swap_args(n):
            n.args[0], n.args[1] = n.args[1], n.args[0]
            return n
        yield Site(i, "swap", f"{name}-args<->", swap_args)
    # a dtype cast or a copy dropped: x.to(...), x.double(), x.clone() -> x. Not the cast of a
    # count of a mask (valid.sum(-1).clamp(min=1).to(x.dtype)): torch promotes an integer count
    # exactly where it divides a float, so that mutant is always equivalent.
    if (name in _CASTS and is_method and not (name == "to" and not (node.args or node.keywords))
            and not _is_mask_count(node.func.value)):
        yield Site(i, "cast", f"{name}->removed", lambda n: n.func.value)


def _is_mask_count(node: ast.AST) -> bool:
    """``valid.sum(...)``, ``mask.sum().clamp(min=1)``, ``m.sum(-1).clamp_min(1)``: a count."""
    while isinstance(node, ast.Call) and _name_of(node.func) in ("clamp", "clamp_min"):
        node = node.func.value
    if not (isinstance(node, ast.Call) and _name_of(node.func) == "sum"
            and isinstance(node.func, ast.Attribute)):
        return False
    root = node.func.value
    return isinstance(root, ast.Name) and (root.id == "m" or _mentions_mask(root))


def _exp_of_difference(node: ast.Call) -> tuple[ast.AST, ast.AST] | None:
    """(a, b) when ``node`` is ``torch.exp(a - b)`` or ``(a - b).exp()``."""
    if _name_of(node.func) != "exp":
        return None
    if _is_torch_call(node) and len(node.args) == 1 and not node.keywords:
        arg = node.args[0]
    elif isinstance(node.func, ast.Attribute) and not _is_torch_call(node) and not node.args:
        arg = node.func.value
    else:
        return None
    if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Sub):
        return arg.left, arg.right
    return None


def _exp_like(call: ast.Call, operand: ast.AST) -> ast.AST:
    """``torch.exp(operand)`` or ``operand.exp()``, the form ``call`` uses."""
    if _is_torch_call(call):
        return ast.Call(func=copy.deepcopy(call.func), args=[operand], keywords=[])
    return ast.Call(func=ast.Attribute(value=operand, attr="exp", ctx=ast.Load()), args=[], keywords=[])


def _raises(block: list[ast.stmt]) -> bool:
    return any(isinstance(s, ast.Raise) for s in block)


def _string_siblings(tree: ast.AST) -> list[tuple[str, ...]]:
    """Tuples/lists/sets of string constants in the module (the allowed values of an option)."""
    out = []
    for n in ast.walk(tree):
        if isinstance(n, (ast.Tuple, ast.List, ast.Set)) and len(n.elts) >= 2 and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in n.elts):
            out.append(tuple(e.value for e in n.elts))
    return out


def _new_default(value, siblings: list[tuple[str, ...]]):
    """A changed default: a number halved (0 -> 1), a bool flipped, a string to a sibling value."""
    if isinstance(value, bool):
        return not value
    if type(value) in (int, float):
        return type(value)(value / 2) if value and (type(value) is float or value % 2 == 0) else value + 1
    if isinstance(value, str):
        for group in siblings:
            if value in group:
                return next(v for v in group if v != value)
    return None


def _statement_sites(tree: ast.AST, skip: set[int]) -> Iterator[Site]:
    """guard, branch and default: statements removed or kept whatever the condition, defaults changed."""
    siblings = _string_siblings(tree)
    guard_raises = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.If) and _raises(n.body) and not n.orelse:
            guard_raises.update(id(s) for s in n.body if isinstance(s, ast.Raise))
    for i, node in enumerate(ast.walk(tree)):
        if isinstance(node, ast.If) and id(node) not in skip:
            if _raises(node.body) and not node.orelse:
                yield Site(i, "guard", "guard->removed", lambda n: [])
                continue
            if node.orelse:
                yield Site(i, "branch", "if->then", lambda n: list(n.body))
                yield Site(i, "branch", "if->else", lambda n: list(n.orelse))
            else:
                yield Site(i, "branch", "if->always", lambda n: list(n.body))
                yield Site(i, "branch", "if->never", lambda n: [])
        elif isinstance(node, ast.Raise) and id(node) not in guard_raises:
            yield Site(i, "guard", "raise->removed", lambda n: [])
        elif isinstance(node, ast.IfExp) and id(node) not in skip:
            yield Site(i, "branch", "ifexp->then", lambda n: n.body)
            yield Site(i, "branch", "ifexp->else", lambda n: n.orelse)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from _default_sites(i, node, siblings)


def _default_sites(i: int, fn: ast.FunctionDef, siblings) -> Iterator[Site]:
    args = fn.args
    positional = args.posonlyargs + args.args
    pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
    for k, (arg, default) in enumerate(pairs):
        value = _number(default) if _number(default) is not None else (
            default.value if isinstance(default, ast.Constant) else None)
        new = _new_default(value, siblings) if value is not None else None
        if new is None or new == value:
            continue

        def change(n, k=k, new=new):
            a = n.args
            n_pos = len(a.defaults)
            if k < n_pos:
                a.defaults[k] = _default_node(new)
            else:
                kws = [j for j, d in enumerate(a.kw_defaults) if d is not None]
                a.kw_defaults[kws[k - n_pos]] = _default_node(new)
            return n
        name = ast.unparse(arg)  # "eps: float" as the def unparses it
        shown = (f"{name}={ast.unparse(default)}", f"{name}={ast.unparse(_default_node(new))}")
        yield Site(i, "default", f"default:{arg.arg}={value!r}->{new!r}", change, shown)


def _default_node(v) -> ast.AST:
    return _literal(v) if type(v) in (int, float) else ast.Constant(v)


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None
