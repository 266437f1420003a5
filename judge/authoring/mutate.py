"""Simple mutants of a reference solution, generated from its AST.

Each mutant is the reference with exactly one change, from a small fixed set of operators:

| operator     | change                                                                   | label            |
|--------------|--------------------------------------------------------------------------|------------------|
| `comparison` | `<` ↔ `<=`, `>` ↔ `>=` (each operator of a chain on its own)               | `Lt->LtE`        |
| `minmax`     | `min` ↔ `max`, `minimum` ↔ `maximum`, `amin` ↔ `amax` (names and attributes) | `min->max`       |
| `clamp`      | a bound of `clamp`/`clip` dropped; `clamp_min(v)`/`clamp_max(v)` removed   | `clamp-min->None`|
| `detach`     | `x.detach()` → `x`                                                       | `detach->removed`|
| `mask`       | `torch.where(m, a, b)` → `a`; `x * mask` → `x`; `x.masked_fill(m, v)` → `x` | `where->a`       |
| `summean`    | `sum` ↔ `mean` (`x.sum(...)`, `torch.sum(...)`)                            | `sum->mean`      |
| `constant`   | a number `c` → `c + 1` (`-1` → `0`, `0.2` → `1.2`)                         | `0.2->1.2`       |
| `guard`      | an `if ...: raise` removed; any other `raise` → `pass`                     | `guard->removed` |
| `default`    | a default argument changed: a number halved, a bool flipped, a string to a sibling value of the module (`("softmax", "sigmoid")`) | `default:eps=0.2->0.1` |
| `wheremul`   | `torch.where(c, a, b)` → `a * c + b * ~c` (selection by multiplication)   | `where->mul`     |
| `expdiv`     | `exp(a - b)` → `exp(a) / exp(b)` (`torch.exp` and `.exp()`)                 | `exp(a-b)->exp(a)/exp(b)` |
| `cast`       | `.to(...)`, `.double()`, `.float()`, `.long()`, `.clone()`... → removed (not a mask count's cast) | `to->removed` |
| `branch`     | one branch of an `if` kept (`if->then`, `if->else`; no else: `if->always`, `if->never`), likewise `a if c else b` | `if->then` |

A mutant's id is ``<file>:<line>:<label>`` (``solution.py:42:LtE->Lt``), with ``#2``, ``#3``...
appended for the second, third... identical change on the same line, so authors can list
known-equivalent mutants in ``reference/<slug>/mutants.toml``. Code inside ``raise`` statements
and f-strings (error messages) is never mutated (a whole ``raise`` may be removed: ``guard``).
Two operators that produce the same module count once (the first in ``OPERATORS`` order).
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass
from typing import Callable, Iterator

OPERATORS = ("comparison", "minmax", "clamp", "detach", "mask", "summean", "constant",
             "guard", "default", "wheremul", "expdiv", "cast", "branch")
_CASTS = ("to", "double", "float", "half", "long", "int", "bool", "type", "clone", "contiguous")
_CMP_CALLS = {"lt": "le", "le": "lt", "gt": "ge", "ge": "gt"}  # torch.lt(a, b), a.le(b)
_CMP_SWAP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}
_MINMAX = {"min": "max", "max": "min", "minimum": "maximum", "maximum": "minimum",
           "amin": "amax", "amax": "amin"}
_SUMMEAN = {"sum": "mean", "mean": "sum"}
_CLAMPS = ("clamp", "clip")
_MASK_WORDS = ("mask", "valid")


@dataclass(frozen=True)
class Mutant:
    id: str  # "solution.py:42:LtE->Lt" (stable while the line does not move)
    operator: str  # one of OPERATORS
    label: str  # "LtE->Lt"
    line: int  # 1-based line in the original file
    before: str  # the changed expression, as written (unparsed)
    after: str  # what the mutant has instead
    source: str  # the whole mutated module


# A site: where a mutation applies and how. ``apply`` receives the copied node and returns
# the replacement node (or mutates it in place and returns it); for a statement, a list of
# statements (possibly empty) spliced into its block.
@dataclass(frozen=True)
class _Site:
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


def _sites(tree: ast.AST) -> Iterator[_Site]:
    skip = _skipped_ids(tree)
    yield from _statement_sites(tree, skip)
    unary_operands = {id(n.operand) for n in ast.walk(tree)
                      if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub)}
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
                yield _Site(i, "comparison", f"{type(op).__name__}->{new.__name__}", swap)
        # min <-> max, as a builtin name or an attribute (torch.minimum, x.amax, x.min)
        elif isinstance(node, ast.Call) and _name_of(node.func) in _MINMAX:
            name = _name_of(node.func)

            def swap_mm(n, other=_MINMAX[name]):
                if isinstance(n.func, ast.Attribute):
                    n.func.attr = other
                else:
                    n.func.id = other
                return n
            yield _Site(i, "minmax", f"{name}->{_MINMAX[name]}", swap_mm)
        if isinstance(node, ast.Call):
            yield from _call_sites(i, node)
        # x * mask -> x
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            for keep, drop in (("left", "right"), ("right", "left")):
                if _mentions_mask(getattr(node, drop)) and not _mentions_mask(getattr(node, keep)):
                    yield _Site(i, "mask", "*mask->dropped", lambda n, keep=keep: getattr(n, keep))
        # numeric constants: c -> c + 1
        v = _number(node)
        if v is not None and id(node) not in unary_operands:
            new_v = v + 1
            yield _Site(i, "constant", f"{_fmt(v)}->{_fmt(new_v)}", lambda n, nv=new_v: _literal(nv))


def _call_sites(i: int, node: ast.Call) -> Iterator[_Site]:
    name = _name_of(node.func)
    is_method = isinstance(node.func, ast.Attribute) and not _is_torch_call(node)
    # .detach() removed
    if name == "detach" and is_method and not node.args and not node.keywords:
        yield _Site(i, "detach", "detach->removed", lambda n: n.func.value)
    # torch.where(m, a, b) -> a; x.masked_fill(m, v) -> x
    if name == "where" and _is_torch_call(node) and len(node.args) == 3:
        yield _Site(i, "mask", "where->a", lambda n: n.args[1])
    if name == "masked_fill" and is_method:
        yield _Site(i, "mask", "masked_fill->dropped", lambda n: n.func.value)
    # sum <-> mean
    if name in _SUMMEAN and (is_method or _is_torch_call(node)):
        other = _SUMMEAN[name]

        def swap_sm(n, other=other):
            n.func.attr = other
            return n
        yield _Site(i, "summean", f"{name}->{other}", swap_sm)
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
            yield _Site(i, "clamp", f"{name}-{bound}->None", drop)
    if name in ("clamp_min", "clamp_max") and is_method:
        yield _Site(i, "clamp", f"{name}->removed", lambda n: n.func.value)
    # torch.lt(a, b) <-> torch.le(a, b), a.gt(b) <-> a.ge(b)
    if name in _CMP_CALLS and (is_method or _is_torch_call(node)):
        def swap_cmp(n, other=_CMP_CALLS[name]):
            n.func.attr = other
            return n
        yield _Site(i, "comparison", f"{name}->{_CMP_CALLS[name]}", swap_cmp)
    # torch.where(c, a, b) -> a * c + b * ~c: selection replaced by multiplication with the mask
    if name == "where" and _is_torch_call(node) and len(node.args) == 3:
        def where_mul(n):
            c, a, b = n.args
            keep = ast.BinOp(left=a, op=ast.Mult(), right=c)
            drop = ast.BinOp(left=b, op=ast.Mult(), right=ast.UnaryOp(op=ast.Invert(), operand=copy.deepcopy(c)))
            return ast.BinOp(left=keep, op=ast.Add(), right=drop)
        yield _Site(i, "wheremul", "where->mul", where_mul)
    # exp(a - b) -> exp(a) / exp(b)
    diff = _exp_of_difference(node)
    if diff is not None:
        def exp_div(n):
            a, b = _exp_of_difference(n)
            return ast.BinOp(left=_exp_like(n, a), op=ast.Div(), right=_exp_like(n, b))
        yield _Site(i, "expdiv", "exp(a-b)->exp(a)/exp(b)", exp_div)
    # a dtype cast or a copy dropped: x.to(...), x.double(), x.clone() -> x. Not the cast of a
    # count of a mask (valid.sum(-1).clamp(min=1).to(x.dtype)): torch promotes an integer count
    # exactly where it divides a float, so that mutant is always equivalent.
    if (name in _CASTS and is_method and not (name == "to" and not (node.args or node.keywords))
            and not _is_mask_count(node.func.value)):
        yield _Site(i, "cast", f"{name}->removed", lambda n: n.func.value)


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


def _statement_sites(tree: ast.AST, skip: set[int]) -> Iterator[_Site]:
    """guard, branch and default: statements removed or kept whatever the condition, defaults changed."""
    siblings = _string_siblings(tree)
    guard_raises = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.If) and _raises(n.body) and not n.orelse:
            guard_raises.update(id(s) for s in n.body if isinstance(s, ast.Raise))
    for i, node in enumerate(ast.walk(tree)):
        if isinstance(node, ast.If) and id(node) not in skip:
            if _raises(node.body) and not node.orelse:
                yield _Site(i, "guard", "guard->removed", lambda n: [])
                continue
            if node.orelse:
                yield _Site(i, "branch", "if->then", lambda n: list(n.body))
                yield _Site(i, "branch", "if->else", lambda n: list(n.orelse))
            else:
                yield _Site(i, "branch", "if->always", lambda n: list(n.body))
                yield _Site(i, "branch", "if->never", lambda n: [])
        elif isinstance(node, ast.Raise) and id(node) not in guard_raises:
            yield _Site(i, "guard", "raise->removed", lambda n: [])
        elif isinstance(node, ast.IfExp) and id(node) not in skip:
            yield _Site(i, "branch", "ifexp->then", lambda n: n.body)
            yield _Site(i, "branch", "ifexp->else", lambda n: n.orelse)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from _default_sites(i, node, siblings)


def _default_sites(i: int, fn: ast.FunctionDef, siblings) -> Iterator[_Site]:
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
        yield _Site(i, "default", f"default:{arg.arg}={value!r}->{new!r}", change, shown)


def _default_node(v) -> ast.AST:
    return _literal(v) if type(v) in (int, float) else ast.Constant(v)


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _replace(tree: ast.AST, index: int, fn: Callable[[ast.AST], ast.AST]) -> tuple[str, str]:
    """Apply ``fn`` to the node at ``index`` (ast.walk order) of ``tree`` in place."""
    nodes = list(ast.walk(tree))
    target = nodes[index]
    before = ast.unparse(target)
    parent_field = None
    for parent in nodes:
        for fname, value in ast.iter_fields(parent):
            if value is target:
                parent_field = (parent, fname, None)
            elif isinstance(value, list):
                for j, v in enumerate(value):
                    if v is target:
                        parent_field = (parent, fname, j)
        if parent_field:
            break
    new = fn(target)
    if isinstance(new, list):  # statements spliced into their block (never left empty)
        assert parent_field is not None and parent_field[2] is not None
        parent, fname, j = parent_field
        block = getattr(parent, fname)
        block[j:j + 1] = new
        if not block:
            block.append(ast.Pass())
            return before, "pass"
        return before, "\n".join(ast.unparse(s) for s in new)  # "" when the statement is removed
    if new is not target:
        assert parent_field is not None
        parent, fname, j = parent_field
        if j is None:
            setattr(parent, fname, new)
        else:
            getattr(parent, fname)[j] = new
    return before, ast.unparse(new)


def generate(source: str, filename: str = "solution.py") -> list[Mutant]:
    """Every mutant of ``source``, in source order (line, then column, then operator)."""
    tree = ast.parse(source, filename)
    original = ast.unparse(tree)
    nodes = list(ast.walk(tree))
    out: list[tuple[tuple, Mutant]] = []
    for site in _sites(tree):
        node = nodes[site.index]
        copy_tree = copy.deepcopy(tree)
        before, after = _replace(copy_tree, site.index, site.apply)
        ast.fix_missing_locations(copy_tree)
        mutated = ast.unparse(copy_tree)
        if mutated == original:
            continue
        try:
            compile(mutated, filename, "exec")
        except SyntaxError:  # e.g. a block left with only its docstring is still valid; this is not
            continue
        if site.shown is not None:
            before, after = site.shown
        line = getattr(node, "lineno", 0)
        key = (line, getattr(node, "col_offset", 0), OPERATORS.index(site.operator))
        out.append((key, Mutant(id="", operator=site.operator, label=site.label, line=line,
                                before=before, after=after, source=mutated)))
    out.sort(key=lambda p: p[0])
    seen: dict[str, int] = {}
    sources: set[str] = set()
    result = []
    for _, m in sorted(out, key=lambda p: OPERATORS.index(p[1].operator)):  # the first operator wins
        if m.source in sources:
            out.remove(next(x for x in out if x[1] is m))
        sources.add(m.source)
    for _, m in out:
        base = f"{filename}:{m.line}:{m.label}"
        seen[base] = seen.get(base, 0) + 1
        mid = base if seen[base] == 1 else f"{base}#{seen[base]}"
        result.append(Mutant(id=mid, operator=m.operator, label=m.label, line=m.line,
                             before=m.before, after=m.after, source=m.source))
    return result


def select(mutants: list[Mutant], cap: int) -> list[Mutant]:
    """At most ``cap`` mutants (``cap <= 0``: all), deterministically: the cap is shared
    round-robin between the operators, and each operator's share is spread evenly over the file."""
    if cap <= 0 or len(mutants) <= cap:
        return list(mutants)
    groups = {op: [m for m in mutants if m.operator == op] for op in OPERATORS}
    quota = dict.fromkeys(OPERATORS, 0)
    left = cap
    while left:
        for op in OPERATORS:
            if left and quota[op] < len(groups[op]):
                quota[op] += 1
                left -= 1
    chosen = set()
    for op, q in quota.items():
        n = len(groups[op])
        chosen.update(groups[op][(k * n) // q].id for k in range(q))  # evenly spread over the file
    return [m for m in mutants if m.id in chosen]
