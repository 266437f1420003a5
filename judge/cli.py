"""``judge``: the command line. Each command is a thin shell over one library call.

    judge local exercises/glm5_mis my_solution.py   # grade a file (exit 0 accepted, 1 rejected,
                                                    # 3 could not run, 4 judge error, 2 usage)
    judge local exercises/glm5_mis --reference      # the author's check
    judge local exercises/gspo sol.py --watch       # grade again on every save, the judge kept warm
    judge submit sol.py --exercise gspo --server URL --key KEY   # grade on a service (same table)
    judge schema                                    # the Verdict JSON Schema
    judge serve --host 127.0.0.1 --port 8000        # the service (configured by JUDGE_* variables)
    judge worker --concurrency 4                    # a grading host on JUDGE_DATABASE_URL (no API)
    judge new my_exercise                           # scaffold exercises/my_exercise + reference/
    judge validate exercises/gspo | --all           # the author's checks and mutation score
    judge export exercises/gspo --format gradescope # a Gradescope autograder zip
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import sys
import time
import tokenize
from datetime import datetime
from pathlib import Path

from judge.errors import JudgeError, UsageError
from judge.exercise import TIERS, exercise_folders, exercises_dir, resolve

log = logging.getLogger("judge")
MAX_SOURCE_BYTES = 1 << 20


def _pack_option(parser: argparse.ArgumentParser) -> None:
    """``--exercises DIR``: the one pack setting, the same for every command that reads exercises."""
    parser.add_argument("--exercises", dest="pack", type=Path, default=None, metavar="DIR",
                        help="the exercise pack: a folder holding exercises/ and reference/, or its "
                        "exercises/ folder (default: JUDGE_EXERCISES_DIR, else this checkout's)")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="judge", description="Grade implementations of ML papers.")
    sub = p.add_subparsers(dest="command", required=True)

    loc = sub.add_parser("local", help="grade a solution file on this machine")
    loc.add_argument("exercise", help="an exercise folder (exercises/glm5_mis) or its slug")
    loc.add_argument("file", nargs="?", help="the solution file (default: the exercise's starter)")
    loc.add_argument("--reference", action="store_true", help="grade the reference solution")
    loc.add_argument("--json", action="store_true", help="print only the result document on stdout")
    loc.add_argument("--seed", type=int, default=None, help="replay a run with this seed")
    loc.add_argument("--out", type=Path, default=None, help="where artifacts go (default judge-out/...)")
    loc.add_argument("--mode", choices=["run", "submit"], default="submit",
                     help="run: visible cases and the experiment; submit: everything (default)")
    loc.add_argument("--tiers", default=",".join(TIERS), help="a subset, e.g. T0,T1")
    loc.add_argument("--no-sandbox", action="store_true",
                     help="run in this process without isolation (authors only; never untrusted code)")
    loc.add_argument("--junit", type=Path, default=None, metavar="FILE",
                     help="also write the result as JUnit XML to FILE (for CI dashboards)")
    loc.add_argument("--watch", action="store_true",
                     help="keep the judge warm and grade the file again every time it is saved (Ctrl-C stops)")
    _pack_option(loc)

    sbm = sub.add_parser("submit", help="grade a solution file on a judge service, with its progress")
    sbm.add_argument("file", type=Path, help="the solution file")
    sbm.add_argument("--exercise", required=True, help="the exercise's slug, e.g. gspo")
    sbm.add_argument("--server", default=None,
                     help="the service's URL (default JUDGE_SERVER, else http://127.0.0.1:8000)")
    sbm.add_argument("--key", default=None, help="an API key of the service (default JUDGE_API_KEY)")
    sbm.add_argument("--mode", choices=["run", "submit"], default="submit",
                     help="run: visible cases and the experiment; submit: everything (default)")
    sbm.add_argument("--json", action="store_true", help="print only the result document on stdout")

    sub.add_parser("schema", help="print the Verdict JSON Schema")

    srv = sub.add_parser("serve", help="run the judge service (configuration: JUDGE_* variables)")
    srv.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    srv.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    srv.add_argument("--workers", type=int, default=None, help="grading workers (default JUDGE_WORKERS or one per core)")
    srv.add_argument("--allow-weak-sandbox", action="store_true",
                     help="grade even where Landlock or seccomp is missing (JUDGE_ALLOW_WEAK_SANDBOX=1)")
    _pack_option(srv)

    wrk = sub.add_parser("worker", help="grade from a shared database, no API (JUDGE_DATABASE_URL)")
    wrk.add_argument("--concurrency", type=int, default=None,
                     help="worker processes, each with a warm zygote (default JUDGE_WORKERS or one per core)")
    wrk.add_argument("--allow-weak-sandbox", action="store_true",
                     help="grade even where Landlock or seccomp is missing (JUDGE_ALLOW_WEAK_SANDBOX=1)")
    _pack_option(wrk)

    new = sub.add_parser("new", help="scaffold a new exercise with a small working example")
    new.add_argument("slug", help="the exercise's name: lower case, digits, underscores")
    new.add_argument("--root", type=Path, default=None,
                     help="the folder holding exercises/ and reference/ (default: the pack of "
                     "--exercises or JUDGE_EXERCISES_DIR, else this checkout)")
    _pack_option(new)
    new.add_argument("--title", default=None, help="the exercise's title")

    val = sub.add_parser("validate", help="check exercises: reference, starter, wrong solutions, mutants")
    val.add_argument("exercises", nargs="*", help="exercise folders or slugs")
    val.add_argument("--all", action="store_true", help="every exercise of the pack")
    val.add_argument("--seed", type=int, default=None, help="the validation seed (default 1234)")
    val.add_argument("--max-mutants", type=int, default=None,
                     help="grade at most N mutants per exercise (default 0: all)")
    val.add_argument("--no-mutants", action="store_true", help="skip mutation testing")
    val.add_argument("--json", action="store_true", help="print only the report document on stdout")
    val.add_argument("-v", "--verbose", action="store_true", help="list every mutant, not only survivors")
    _pack_option(val)

    wrg = sub.add_parser("wrong", help="list an exercise's known mistakes, or print the file one builds")
    wrg.add_argument("exercise", help="an exercise folder or its slug")
    wrg.add_argument("name", nargs="?", default=None,
                     help="a known-wrong solution: print its built file (without it: list them)")
    _pack_option(wrg)

    exp = sub.add_parser("export", help="package an exercise for another grading platform")
    exp.add_argument("exercise", help="an exercise folder or its slug")
    exp.add_argument("--format", choices=["gradescope"], default="gradescope")
    exp.add_argument("--out", type=Path, default=None, help="the zip (default judge-out/<slug>-gradescope.zip)")
    exp.add_argument("--submission-file", default="solution.py",
                     help="the file name learners upload (default solution.py; else the first .py)")
    exp.add_argument("--points", default=None, help="points per tier, e.g. T0=10,T1=40,T2=30,T3=20 "
                     "(default 25 each), shared equally by the tier's tests")
    exp.add_argument("--hidden-visibility", default="visible",
                     help="Gradescope visibility of tests that run mode does not show (default visible)")
    _pack_option(exp)
    return p


def _tiers(text: str) -> list[str]:
    tiers = [t.strip().upper() for t in text.split(",") if t.strip()]
    bad = [t for t in tiers if t not in TIERS]
    if bad or not tiers:
        raise UsageError(f"--tiers: unknown tier(s) {bad or text!r}; expected a comma-separated "
                         f"subset of {','.join(TIERS)}")
    return tiers


def read_source(path: Path) -> str:
    if not path.is_file():
        raise UsageError(f"no such file: {path}")
    data = path.read_bytes()
    if len(data) > MAX_SOURCE_BYTES:
        raise UsageError(f"{path} is {len(data)} bytes; a submission is at most {MAX_SOURCE_BYTES}")
    # decoded as Python decodes a source file: UTF-8, a byte-order mark or a coding declaration
    # ("# -*- coding: latin-1 -*-") saying otherwise
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError) as e:
        raise UsageError(f"{path} is not text Python can read: {e} (save it as UTF-8)") from None


def cmd_local(args: argparse.Namespace) -> int:
    from judge.grading import grade, warm
    from judge.report import render
    from judge.box.sandbox import StartingSandbox

    t0 = time.perf_counter()
    exercise = resolve(args.exercise, exercises_dir(args.pack))
    tiers = _tiers(args.tiers)
    if args.reference and args.file:
        raise UsageError("give either a file or --reference, not both")
    path = exercise.solution_path if args.reference else Path(args.file or exercise.starter_path)
    source = read_source(path)
    out_dir = args.out or Path("judge-out") / f"{exercise.slug}-{datetime.now():%Y%m%d-%H%M%S}"

    # Start the zygote (it imports torch) while this process loads the tests and the reference.
    starting = None if args.no_sandbox else StartingSandbox()
    if starting is None:
        log.warning("--no-sandbox: the submission runs in the judge's process, without isolation")
    warm([exercise])
    sandbox = None if starting is None else starting.get()
    startup_ms = (time.perf_counter() - t0) * 1000

    def grade_source(text: str, saved_at: float | None = None) -> int:
        # --watch: the table first; the known mistake it matches, and the plots, after it
        verdict = grade(exercise, text, sandbox=sandbox, mode=args.mode, seed=args.seed,
                        tiers=tiers, out_dir=out_dir, diagnose=not args.watch)
        verdict.timings.startup_ms = round(startup_ms, 1)
        if not args.watch:
            _draw_views(verdict, out_dir, exercise.title)
        if args.json and not args.watch:
            print(verdict.model_dump_json(indent=2), flush=True)
        elif not args.json:
            print(render(verdict, out_dir=str(out_dir)), flush=True)
        if saved_at is not None:
            print(f"[watch] save to table: {(time.perf_counter() - saved_at) * 1000:.0f} ms",
                  file=sys.stderr, flush=True)
        if args.watch:
            _diagnose_after(exercise, verdict, show=not args.json)
            if args.json:
                print(verdict.model_dump_json(indent=2), flush=True)
            _draw_views(verdict, out_dir, exercise.title)
        if args.junit is not None:
            from judge.junit import write_junit

            write_junit(verdict, args.junit)
        return verdict.exit_code

    try:
        if not args.watch:
            return grade_source(source)
        from judge.watch import watch

        return watch(path, grade_source, read=read_source,
                     say=lambda line: print(line, file=sys.stderr, flush=True))
    finally:
        if sandbox is not None:
            sandbox.close()


def _diagnose_after(exercise, verdict, *, show: bool) -> None:
    """``--watch``: name the known mistakes a rejected grading reproduces once its table is out
    (what ``grade`` does before returning otherwise), and print them."""
    if verdict.verdict != "rejected" or verdict.error is not None:
        return
    from judge.diagnose import diagnose

    t = time.perf_counter()
    diagnose(exercise, verdict)
    verdict.timings.diagnosis_ms = round((time.perf_counter() - t) * 1000, 2)
    named = [(r.name, r.misconception) for tr in verdict.tiers for r in tr.tests if r.misconception]
    if show and named:
        first: dict[str, list[str]] = {}
        for test, m in named:
            first.setdefault(m.name, []).append(test)
        m_of = {m.name: m for _, m in named}
        for name, tests in first.items():
            m = m_of[name]
            spec = f" (spec: {m.spec_section})" if m.spec_section else ""
            print(f"  known mistake in {', '.join(tests[:3])}{' …' if len(tests) > 3 else ''}: "
                  f"{m.why}{spec}", flush=True)


def cmd_submit(args: argparse.Namespace) -> int:
    import os

    from judge.remote import submit
    from judge.report import render

    server = args.server or os.environ.get("JUDGE_SERVER") or "http://127.0.0.1:8000"
    key = args.key or os.environ.get("JUDGE_API_KEY") or ""
    source = read_source(args.file)

    def progress(event: str, data: dict) -> None:
        if args.json:
            return
        if event == "test":
            mark = {"passed": "✓", "failed": "✗", "error": "!", "skipped": "-"}.get(data.get("status"), "?")
            print(f"  {data.get('tier', '')} {mark} {data.get('name', '')}", file=sys.stderr, flush=True)
        elif event == "status":
            print(f"[{data.get('status', '')}]", file=sys.stderr, flush=True)

    verdict = submit(server, key, args.exercise, source, mode=args.mode, on_event=progress)
    if args.json:
        print(verdict.model_dump_json(indent=2))
    else:
        print(render(verdict))
    return verdict.exit_code


def _draw_views(verdict, out_dir: Path, title: str) -> None:
    """``<view>.svg`` and one offline ``report.html`` from the specs T3 wrote, drawn here, after
    the verdict and with the sandbox closed (vl-convert must not be loaded before a fork)."""
    from judge.grading import MEDIA_TYPES
    from judge.models import Artifact
    from judge.views_render import RenderError, render_local

    if not any(a.name.endswith(".vl.json") for a in verdict.artifacts):
        return
    try:
        names = render_local(out_dir, f"{title}: your plots beside the reference's")
    except (RenderError, OSError) as e:
        verdict.output += ("\n" if verdict.output else "") + f"[judge] the plots could not be drawn: {e}"
        return
    for name in names:
        path = out_dir / name
        verdict.artifacts.append(Artifact(name=name, path=str(path), size=path.stat().st_size,
                                          media_type=MEDIA_TYPES.get(path.suffix, "application/octet-stream")))


def cmd_schema(args: argparse.Namespace) -> int:
    from judge.models import Verdict

    print(json.dumps(Verdict.model_json_schema(), indent=2))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from judge.service.app import serve
    from judge.service.config import Config

    overrides: dict = {} if args.workers is None else {"workers": max(args.workers, 0)}
    if args.pack is not None:
        overrides["exercises_dir"] = exercises_dir(args.pack)
    if args.allow_weak_sandbox:
        overrides["allow_weak_sandbox"] = True
    return serve(Config.from_env(**overrides), args.host, args.port)


def cmd_worker(args: argparse.Namespace) -> int:
    from judge.service import worker_host
    from judge.service.config import Config

    overrides: dict = {} if args.concurrency is None else {"workers": args.concurrency}
    if args.pack is not None:
        overrides["exercises_dir"] = exercises_dir(args.pack)
    if args.allow_weak_sandbox:
        overrides["allow_weak_sandbox"] = True
    cfg = Config.from_env(**overrides)
    if cfg.workers < 1:
        raise UsageError("judge worker: --concurrency must be at least 1")
    return worker_host.run(cfg)


def cmd_new(args: argparse.Namespace) -> int:
    from judge.authoring.scaffold import new_exercise

    root = args.root or exercises_dir(args.pack).parent
    for path in new_exercise(args.slug, root=root, title=args.title):
        print(path)
    print(f"\nnext: judge validate {root / 'exercises' / args.slug}   (see docs/authoring.md)")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from judge.authoring import validate as v

    if args.all == bool(args.exercises):
        raise UsageError("give exercise folders or slugs, or --all")
    root = exercises_dir(args.pack)
    folders = exercise_folders(root) if args.all else [resolve(e, root).root for e in args.exercises]
    if not folders:
        raise UsageError("no exercises found")
    show = None if args.json else (lambda rep: print(v.render_exercise(rep, verbose=args.verbose), flush=True))
    report = v.validate(folders, seed=v.DEFAULT_SEED if args.seed is None else args.seed,
                        max_mutants=v.DEFAULT_MAX_MUTANTS if args.max_mutants is None else args.max_mutants,
                        mutants=not args.no_mutants, on_exercise=show)
    if args.json:
        print(report.model_dump_json(indent=2))
    else:
        print("\n" + v.render_summary(report))
    return 0 if report.ok else 1


def cmd_export(args: argparse.Namespace) -> int:
    from judge.authoring.export import gradescope_zip, parse_points

    exercise = resolve(args.exercise, exercises_dir(args.pack))
    out = args.out or Path("judge-out") / f"{exercise.slug}-gradescope.zip"
    path = gradescope_zip(exercise, out, submission_file=args.submission_file,
                          points=parse_points(args.points), hidden_visibility=args.hidden_visibility)
    print(path)
    return 0


def cmd_wrong(args: argparse.Namespace) -> int:
    """The built file of one known mistake on stdout (gradable as it is), or the catalogue."""
    exercise = resolve(args.exercise, exercises_dir(args.pack))
    if args.name is None:
        for w in exercise.wrong_solutions():
            print(f"{w.name:<32} {w.expect_tier}  {w.label:<40} {w.why}")
        return 0
    names = [w.name for w in exercise.wrong_solutions()]
    if args.name not in names:
        raise UsageError(f"exercise {exercise.slug} has no known-wrong solution {args.name!r}; "
                         f"expected one of: {', '.join(names) or 'none'}")
    w = exercise.wrong_solution(args.name)
    print(f"# {exercise.slug}: {w.label}, expect {w.expect_tier} (spec: {w.spec_section or '-'}): {w.why}",
          file=sys.stderr)
    sys.stdout.write(w.source)
    return 0


COMMANDS = {"local": cmd_local, "submit": cmd_submit, "schema": cmd_schema, "serve": cmd_serve, "worker": cmd_worker, "new": cmd_new,
            "validate": cmd_validate, "export": cmd_export, "wrong": cmd_wrong}


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:
        return 2 if e.code not in (0, None) else 0
    try:
        return COMMANDS[args.command](args)
    except JudgeError as e:
        print(f"judge: {e.message}", file=sys.stderr)
        return e.exit_code


if __name__ == "__main__":
    sys.exit(main())
