"""The human-readable rendering of a Verdict, for the terminal (``judge local``, ``judge submit``).

Rules that keep it teaching rather than noisy:

- a failure message that many tests share is shown once, with "and N more tests failed the same
  way" (a missing function, an exception every call raises);
- a tier's count covers all its tests: those a stop (a time limit) left unrun are counted as such;
- a submission that could not be loaded gets one line for the tiers it prevented, not four rows;
- a run of some tiers only ends with what passed and what was not run, never "ACCEPTED";
- output the judge cut is said so, with how much was printed and how much was kept.
"""

from __future__ import annotations

import re

from judge.models import TestResult, Verdict

TIER_NAMES = {"T0": "contracts", "T1": "oracle", "T2": "properties", "T3": "experiment"}
_MARK = {"passed": "✓", "failed": "✗", "error": "!", "skipped": "-"}
OUTPUT_LINES = 20  # lines of the submission's output shown
OUTPUT_LINE_CHARS = 160  # characters of each of them
# the note box.job.Job.output ends the kept output with when it dropped the rest
_DROPPED = re.compile(r"\n?\[… (\d+) more bytes of output dropped\]\s*$")


def render(v: Verdict, *, out_dir: str | None = None) -> str:
    lines = [f"{v.exercise} · {v.mode} · seed {v.seed} · {_headline(v)}", ""]
    groups = _shared_messages(v)
    if _nothing_ran(v):
        lines.append(f"  {', '.join(t.tier for t in v.tiers) or 'T0-T3'} not run: "
                     f"the submission could not be loaded ({v.error.kind.replace('_', ' ')})")
    else:
        for tr in v.tiers:
            lines += _tier_lines(tr, groups)
    if v.error is not None:
        lines += ["", f"  error ({v.error.kind}): " + _indent(v.error.message, "  ").lstrip()]
    if v.artifacts:
        lines += ["", "  artifacts" + (f" in {out_dir}" if out_dir else "") + ":"]
        lines += [f"    {a.name}  ({a.media_type}, {a.size} bytes)" for a in v.artifacts]
    lines += _output_lines(v)
    t = v.timings
    lines += ["", f"  time: start-up {t.startup_ms:.0f} ms, load {t.load_ms:.0f} ms, grading "
                  f"{t.grading_ms:.0f} ms, plots {t.render_ms:.0f} ms; sandbox: "
                  f"{', '.join(v.sandbox) or 'none'}",
              f"  replay with: --seed {v.seed} --mode {v.mode}"]
    not_run = _unselected(v)
    if v.verdict == "accepted" and not_run:
        lines += ["", f"  passed the selected tiers ({', '.join(not_run)} not run)"]
    return "\n".join(lines)


def _headline(v: Verdict) -> str:
    if v.verdict == "accepted" and _unselected(v):
        return "PASSED THE SELECTED TIERS"
    return v.verdict.upper()


def _unselected(v: Verdict) -> list[str]:
    """Tiers that were not asked for (``--tiers``): skipped with no test recorded at all."""
    return [tr.tier for tr in v.tiers if tr.status == "skipped" and not tr.tests]


def _nothing_ran(v: Verdict) -> bool:
    return v.error is not None and all(tr.status == "skipped" and not tr.tests for tr in v.tiers)


def _key(t: TestResult) -> str:
    return t.message.strip()


def _shared_messages(v: Verdict) -> dict[int, list[TestResult]]:
    """id(failed test) -> the failed tests that gave its message, in order. A message that is
    another's with context in front ("f with a bool mask: f is not implemented yet") joins it."""
    groups: dict[str, list[TestResult]] = {}
    for tr in v.tiers:
        for t in tr.tests:
            if t.status not in ("failed", "error") or not _key(t):
                continue
            key = _key(t)
            if key not in groups:
                key = next((k for k in groups if "\n" not in k and key.endswith(": " + k)), key)
            groups.setdefault(key, []).append(t)
    return {id(t): g for g in groups.values() for t in g}


def _tier_lines(tr, groups: dict[int, list[TestResult]]) -> list[str]:
    ran = [t for t in tr.tests if t.status != "skipped"]
    not_run = len(tr.tests) - len(ran)
    passed = sum(t.status == "passed" for t in ran)
    count = f"{passed}/{len(tr.tests)}" if tr.tests else ""
    out = [f"  {tr.tier} {TIER_NAMES[tr.tier]:<11} {tr.status:<8} {count:>6} "
           f"{tr.duration_ms:>8.1f} ms" + (f"   ({not_run} not run)" if not_run else "")]
    repeated = []
    for t in tr.tests:
        if t.status not in ("failed", "error"):
            continue
        group = groups.get(id(t), [t])
        if group[0] is not t:
            repeated.append(t.name)  # its message is shown with the first test that gave it
            continue
        out.append(f"     {_MARK[t.status]} {t.name}")
        out.append(_indent(t.message, "       "))
        if len(group) > 1:
            more = len(group) - 1
            out.append(f"       and {more} more test{'s' if more > 1 else ''} failed the same way")
    if repeated:
        names = ", ".join(repeated[:3]) + (f" and {len(repeated) - 3} more" if len(repeated) > 3 else "")
        out.append(f"     ✗ failed the same way as above: {names}")
    return out


def _indent(text: str, pad: str) -> str:
    return "\n".join(f"{pad}{line}" for line in text.splitlines())


def _output_lines(v: Verdict) -> list[str]:
    text = v.output
    dropped = _DROPPED.search(text)
    if dropped is not None:
        text = text[:dropped.start()]
    if not text.strip() and dropped is None:
        return []
    out = [""]
    if dropped is not None:
        kept = len(text.encode("utf-8", "replace"))
        printed = kept + int(dropped.group(1))
        why = (" (printing that much is slow: it may be why the time ran out)"
               if v.error is not None and v.error.kind == "time_limit" else "")
        out.append(f"  your code printed {_size(printed)}; the judge kept the first {_size(kept)}{why}")
    shown = text.strip().splitlines()
    out.append("  your program printed:" if dropped is None else "  the start of it:")
    for s in shown[:OUTPUT_LINES]:
        extra = len(s) - OUTPUT_LINE_CHARS
        out.append(f"    | {s[:OUTPUT_LINE_CHARS]}" + (f"… ({extra} more characters)" if extra > 0 else ""))
    if len(shown) > OUTPUT_LINES:
        out.append(f"    | … {len(shown) - OUTPUT_LINES} more lines")
    return out


def _size(n: int) -> str:
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MB"
    if n >= 1 << 10:
        return f"{n / (1 << 10):.0f} KiB"
    return f"{n} bytes"
