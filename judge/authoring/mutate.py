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

A mutant's id is ``<file>:<line>:<label>`` (``solution.py:42:LtE->Lt``), with ``#2``, ``#3``...
appended for the second, third... identical change on the same line, so authors can list
known-equivalent mutants in ``exercise.toml``. Code inside ``raise`` statements and f-strings
(error messages) is never mutated.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass
from typing import Callable, Iterator

OPERATORS = ("comparison", "minmax", "clamp", "detach", "mask", "summean", "constant")
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
# the replacement node (or mutates it in place and returns it).
@dataclass(frozen=True)
class _Site:
    index: int  # position of the node in ast.walk order
    operator: str
    label: str
    apply: Callable[[ast.AST], ast.AST]


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
        line = getattr(node, "lineno", 0)
        key = (line, getattr(node, "col_offset", 0), OPERATORS.index(site.operator))
        out.append((key, Mutant(id="", operator=site.operator, label=site.label, line=line,
                                before=before, after=after, source=mutated)))
    out.sort(key=lambda p: p[0])
    seen: dict[str, int] = {}
    result = []
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
