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
| `arith`      | `+` ↔ `-`, `*` ↔ `/` (also `+=`, `-=`, `*=`, `/=`)                          | `Add->Sub`       |
| `negate`     | `-x` → `x` (a negated expression; a negative number is `constant`'s)       | `-x->x`          |
| `swap`       | `torch.where(c, a, b)` → `where(c, b, a)`; a used call's first two arguments exchanged (`f(a, b)` → `f(b, a)`; not a builtin, nor a call made for its effect) | `where-a<->b` |

A mutant's id is ``<file>:<line>:<label>`` (``solution.py:42:LtE->Lt``), with ``#2``, ``#3``...
appended for the second, third... identical change on the same line, so authors can list
known-equivalent mutants in ``reference/<slug>/mutants.toml``. Code inside ``raise`` statements
and f-strings (error messages) is never mutated (a whole ``raise`` may be removed: ``guard``).
Two operators that produce the same module count once (the first in ``OPERATORS`` order).
``judge.authoring.interface`` adds mutants of how the declared functions take their arguments and
rows (``alone``, ``rows``, ``precision``, ``order``); ``judge validate`` grades both kinds.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass
from typing import Callable

from judge.authoring.operators import OPERATORS, sites


@dataclass(frozen=True)
class Mutant:
    id: str  # "solution.py:42:LtE->Lt" (stable while the line does not move)
    operator: str  # one of OPERATORS
    label: str  # "LtE->Lt"
    line: int  # 1-based line in the original file
    before: str  # the changed expression, as written (unparsed)
    after: str  # what the mutant has instead
    source: str  # the whole mutated module


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
    for site in sites(tree):
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
