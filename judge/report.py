"""The human-readable rendering of a Verdict, for the terminal."""

from __future__ import annotations

from judge.models import Verdict

TIER_NAMES = {"T0": "contracts", "T1": "oracle", "T2": "properties", "T3": "experiment"}
_MARK = {"passed": "✓", "failed": "✗", "error": "!", "skipped": "-"}


def render(v: Verdict, *, out_dir: str | None = None) -> str:
    lines = [f"{v.exercise} · {v.mode} · seed {v.seed} · {v.verdict.upper()}", ""]
    for tr in v.tiers:
        ran = [t for t in tr.tests if t.status != "skipped"]
        passed = sum(t.status == "passed" for t in ran)
        count = f"{passed}/{len(ran)}" if ran else ""
        lines.append(f"  {tr.tier} {TIER_NAMES[tr.tier]:<11} {tr.status:<8} {count:>6} "
                     f"{tr.duration_ms:>8.1f} ms")
        for t in tr.tests:
            if t.status in ("failed", "error"):
                lines.append(f"     {_MARK[t.status]} {t.name}")
                lines += [f"       {line}" for line in t.message.splitlines()]
    if v.error is not None:
        lines += ["", f"  error ({v.error.kind}): {v.error.message}"]
    if v.artifacts:
        lines += ["", "  artifacts" + (f" in {out_dir}" if out_dir else "") + ":"]
        lines += [f"    {a.name}  ({a.media_type}, {a.size} bytes)" for a in v.artifacts]
    if v.output.strip():
        shown = v.output.strip().splitlines()[:20]
        lines += ["", "  your program printed:"] + [f"    | {s}" for s in shown]
    t = v.timings
    lines += ["", f"  time: start-up {t.startup_ms:.0f} ms, load {t.load_ms:.0f} ms, grading "
                  f"{t.grading_ms:.0f} ms, plots {t.render_ms:.0f} ms; sandbox: "
                  f"{', '.join(v.sandbox) or 'none'}",
              f"  replay with: --seed {v.seed} --mode {v.mode}"]
    return "\n".join(lines)
