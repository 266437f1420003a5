"""``judge export``: an exercise packaged for another grading platform.

``--format gradescope`` builds a Gradescope autograder zip (https://gradescope-autograders.readthedocs.io/en/latest/specs/):

    setup.sh          installs Python >= 3.11, CPU torch and the judge's dependencies into /autograder/venv
                      (those of the installed ``judge`` distribution's metadata, else of pyproject.toml)
    run_autograder    runs `judge local exercises/<slug> <the submitted .py> --json` as an unprivileged
                      user and turns the verdict into /autograder/results/results.json
    gradescope.json   the export's settings: slug, submission file name, points per tier, visibility
    judge/ sandbox/ pyproject.toml   the judge itself
    exercises/<slug>/ reference/<slug>/   the exercise and its reference (oracle, known-wrong solutions)

Every tier test becomes a Gradescope test named "T1 oracle: test_random_cases_match_oracle";
a tier's points are shared equally by its tests; a failed test's output is the judge's message
(hidden tests follow the exercise's ``hidden_feedback``). When the submission could not run, every
test scores 0 and says why. ``python -m judge.authoring.export results ...`` is the conversion step.
"""

from __future__ import annotations

import argparse
import json
import importlib.metadata
import re
import shlex
import stat
import sys
import tomllib
import zipfile
from pathlib import Path

from judge.errors import UsageError
from judge.exercise import REPO_ROOT, TIERS, Exercise, load_exercise
from judge.models import Verdict
from judge.report import TIER_NAMES

DEFAULT_POINTS = {"T0": 25.0, "T1": 25.0, "T2": 25.0, "T3": 25.0}
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
_ZIP_TIME = (2020, 1, 1, 0, 0, 0)  # fixed timestamps: the same inputs give the same zip
_SKIP_DIRS = {"__pycache__", ".pytest_cache"}

SETUP_SH = r"""#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image.
set -euxo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
PY=""
for v in python3.13 python3.12 python3.11; do
  if command -v "$v" >/dev/null; then PY="$v"; break; fi
done
if [ -z "$PY" ]; then  # e.g. Ubuntu 22.04: python3.11 is in universe
  apt-get install -y -q software-properties-common
  add-apt-repository -y universe || true
  apt-get update -q
  apt-get install -y -q python3.11 python3.11-venv
  PY=python3.11
fi
apt-get install -y -q "$PY-venv" libseccomp2 || apt-get install -y -q python3-venv libseccomp2 || true
"$PY" -m venv /autograder/venv
/autograder/venv/bin/pip install -q --upgrade pip
/autograder/venv/bin/pip install -q --index-url https://download.pytorch.org/whl/cpu "{torch_spec}"
/autograder/venv/bin/pip install -q {requirements}
# The judge grades as an unprivileged user (the sandbox's laptop mode: Landlock, seccomp,
# rlimits; a container usually cannot mount the per-job tmpfs that root mode needs).
id judge-grader >/dev/null 2>&1 || useradd --system --create-home --shell /usr/sbin/nologin judge-grader
chmod a+rx /autograder || true
chmod -R a+rX /autograder/source /autograder/venv
"""

RUN_AUTOGRADER = r"""#!/usr/bin/env bash
# Gradescope runs this for every submission. AUTOGRADER_ROOT and JUDGE_PYTHON exist for testing.
set -uo pipefail
AG="${{AUTOGRADER_ROOT:-/autograder}}"
SRC="$AG/source"
PY="${{JUDGE_PYTHON:-$AG/venv/bin/python}}"
EXERCISE="exercises/{slug}"
mkdir -p "$AG/results"
WORK="$(mktemp -d "${{TMPDIR:-/tmp}}/judge-grade.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
chmod 755 "$WORK"
SUB="$AG/submission/{submission_file}"
if [ ! -f "$SUB" ]; then  # otherwise the only (or first) .py file the learner uploaded
  SUB="$(find "$AG/submission" -type f -name '*.py' 2>/dev/null | sort | head -n 1)"
fi
STATUS=2
if [ -n "$SUB" ] && [ -f "$SUB" ]; then
  cp "$SUB" "$WORK/submission.py"
  chmod 644 "$WORK/submission.py"
  RUN=()
  if [ "$(id -u)" = 0 ] && id judge-grader >/dev/null 2>&1; then
    chown judge-grader "$WORK"
    RUN=(runuser -u judge-grader --)
  fi
  cd "$SRC"
  ${{RUN[@]+"${{RUN[@]}}"}} env HOME="$WORK" MPLCONFIGDIR="$WORK/mpl" "$PY" -m judge.cli local "$EXERCISE" \
    "$WORK/submission.py" --json --out "$WORK/out" >"$WORK/verdict.json" 2>"$WORK/judge.log"
  STATUS=$?
  tail -n 40 "$WORK/judge.log"  # for the instructor (stdout is hidden from learners)
else
  echo "no .py file in $AG/submission" >&2
  : >"$WORK/verdict.json"
fi
cd "$SRC"
"$PY" -m judge.authoring.export results --exercise "$EXERCISE" --verdict "$WORK/verdict.json" \
  --status "$STATUS" --config "$SRC/gradescope.json" --out "$AG/results/results.json"
"""


def parse_points(text: str | None) -> dict[str, float]:
    """``"T0=10,T1=40,T2=30,T3=20"`` -> points per tier (tiers left out score 0)."""
    if not text:
        return dict(DEFAULT_POINTS)
    out = dict.fromkeys(TIERS, 0.0)
    for part in text.split(","):
        m = re.fullmatch(r"\s*(T[0-3])\s*=\s*([0-9]+(?:\.[0-9]*)?)\s*", part)
        if not m:
            raise UsageError(f"--points: expected e.g. T0=10,T1=40,T2=30,T3=20, got {text!r}")
        out[m.group(1)] = float(m.group(2))
    return out


def runtime_requirements() -> list[str]:
    """The judge's own dependencies, as pip requirement strings: from the installed ``judge``
    distribution's metadata (else from pyproject.toml beside the judge's package), without the
    optional extras (tests) and without torch, which setup.sh installs from the CPU index."""
    try:
        reqs = importlib.metadata.requires("judge") or []
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that is not installed
        reqs = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    out = []
    for req in reqs:
        marker = req.partition(";")[2]
        name = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
        if re.search(r"\bextra\s*==", marker) or name is None:
            continue
        if re.sub(r"[-_.]+", "-", name.group(1)).lower() != "torch":
            out.append(req.strip())
    return out


def _torch_spec() -> str:
    import torch

    return f"torch=={torch.__version__.split('+')[0]}"


def _files(root: Path, rel: str) -> list[tuple[str, Path]]:
    base = root / rel
    if base.is_file():
        return [(rel, base)]
    out = []
    for p in sorted(base.rglob("*")):
        if p.is_file() and not p.is_symlink() and not (_SKIP_DIRS & set(p.relative_to(root).parts)) \
                and p.suffix not in (".pyc",):
            out.append((p.relative_to(root).as_posix(), p))
    return out


def _add(zf: zipfile.ZipFile, name: str, data: bytes, executable: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    mode = 0o755 if executable else 0o644
    info.external_attr = (stat.S_IFREG | mode) << 16
    zf.writestr(info, data)


def gradescope_zip(exercise: Exercise, out: Path, *, submission_file: str = "solution.py",
                   points: dict[str, float] | None = None, visibility: str = "visible",
                   hidden_visibility: str = "visible", torch_spec: str | None = None) -> Path:
    """Build the autograder zip for ``exercise`` at ``out``; returns ``out``."""
    if "/" in submission_file or not submission_file.endswith(".py"):
        raise UsageError(f"--submission-file must be a plain .py file name, got {submission_file!r}")
    for v in (visibility, hidden_visibility):
        if v not in VISIBILITIES:
            raise UsageError(f"visibility must be one of {', '.join(VISIBILITIES)}, got {v!r}")
    config = {"slug": exercise.slug, "submission_file": submission_file,
              "points": points or dict(DEFAULT_POINTS), "visibility": visibility,
              "hidden_visibility": hidden_visibility}
    ex_root = exercise.root.parent.parent  # the folder holding exercises/ and reference/
    members: list[tuple[str, Path]] = []
    for rel in ("judge", "sandbox", "pyproject.toml"):
        members += _files(REPO_ROOT, rel)
    members += _files(ex_root, f"exercises/{exercise.slug}")
    members += _files(ex_root, f"reference/{exercise.slug}")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w") as zf:
        setup = SETUP_SH.replace("{torch_spec}", torch_spec or _torch_spec())
        setup = setup.replace("{requirements}", " ".join(shlex.quote(r) for r in runtime_requirements()))
        _add(zf, "setup.sh", setup.encode(), executable=True)
        _add(zf, "run_autograder", RUN_AUTOGRADER.format(slug=exercise.slug,
                                                         submission_file=submission_file).encode(),
             executable=True)
        _add(zf, "gradescope.json", (json.dumps(config, indent=2) + "\n").encode())
        for name, path in members:
            _add(zf, name, path.read_bytes())
    return out


# --- results.json ----------------------------------------------------------------------------
def _tests_of(exercise: Exercise) -> dict[str, list[tuple[str, bool]]]:
    """Tier -> [(test name, visible)], the whole list whether or not the grading got to them."""
    from judge.runner import collect
    from judge.testing import is_visible

    return {tier: [(fn.__name__, tier == "T3" or is_visible(fn)) for fn in fns]
            for tier, fns in collect(exercise).items()}


def gradescope_results(exercise: Exercise, verdict: Verdict | None, config: dict, *,
                       failure: str = "") -> dict:
    """Gradescope's results.json for ``verdict`` (``None``: the judge produced no verdict, and
    ``failure`` says why)."""
    points = {t: float(config.get("points", DEFAULT_POINTS).get(t, 0.0)) for t in TIERS}
    vis, hidden_vis = config.get("visibility", "visible"), config.get("hidden_visibility", "visible")
    got = {}
    if verdict is not None:
        got = {(t.tier, r.name): r for t in verdict.tiers for r in t.tests}
    stopped = ""
    if verdict is not None and verdict.error is not None:
        stopped = f"not run: {verdict.error.kind}: {verdict.error.message}"
    tests, total = [], 0.0
    for k, (tier, names) in enumerate(_tests_of(exercise).items()):
        share = round(points[tier] / len(names), 4) if names else 0.0
        for j, (name, visible) in enumerate(names):
            if j == len(names) - 1:  # the last test takes the rounding remainder: a tier sums exactly
                share = round(points[tier] - share * (len(names) - 1), 4)
            r = got.get((tier, name))
            if r is not None and r.status == "passed":
                status, score, output = "passed", share, ""
            elif r is not None and r.status in ("failed", "error"):
                status, score, output = "failed", 0.0, r.message
            elif r is not None:  # skipped
                status, score, output = "failed", 0.0, r.message or stopped or "not run"
            else:
                status, score, output = "failed", 0.0, stopped or failure or "not run"
            total += score
            tests.append({"name": f"{tier} {TIER_NAMES[tier]}: {name}", "number": f"{k}.{j + 1}",
                          "score": round(score, 4), "max_score": round(share, 4), "status": status,
                          "output": output, "visibility": vis if visible else hidden_vis})
    if verdict is None:
        summary = f"The judge could not grade this submission: {failure or 'no result'}"
        elapsed = 0
    else:
        summary = f"{verdict.exercise}: {verdict.verdict.upper()} (seed {verdict.seed}; replay locally with " \
                  f"`judge local {verdict.exercise} your_file.py --seed {verdict.seed}`)"
        if verdict.error is not None:
            summary += f"\n{verdict.error.kind}: {verdict.error.message}"
        if verdict.output.strip():
            summary += "\n\nyour program printed:\n" + verdict.output[:4000]
        elapsed = round(verdict.timings.total_ms / 1000)
    return {"score": round(total, 4), "execution_time": elapsed, "output": summary,
            "output_format": "text", "stdout_visibility": "hidden", "tests": tests}


def _results_main(args: argparse.Namespace) -> int:
    config = json.loads(Path(args.config).read_text())
    exercise = load_exercise(Path(args.exercise))
    verdict, failure = None, ""
    text = Path(args.verdict).read_text() if Path(args.verdict).is_file() else ""
    if text.strip():
        try:
            verdict = Verdict.model_validate_json(text)
        except ValueError as e:
            failure = f"the judge's output was not a verdict ({type(e).__name__})"
    elif args.status == 2:
        failure = "no Python file was submitted (or it could not be read)"
    else:
        failure = f"the judge failed (exit status {args.status})"
    results = gradescope_results(exercise, verdict, config, failure=failure)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m judge.authoring.export")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("results", help="convert a verdict into Gradescope's results.json")
    r.add_argument("--exercise", required=True)
    r.add_argument("--verdict", required=True, help="the output of judge local --json (may be empty)")
    r.add_argument("--status", type=int, default=0, help="judge local's exit status")
    r.add_argument("--config", required=True, help="gradescope.json from the export")
    r.add_argument("--out", required=True)
    args = p.parse_args(argv)
    return _results_main(args)


if __name__ == "__main__":
    sys.exit(main())
