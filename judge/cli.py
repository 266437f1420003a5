"""``judge``: the command line. Each command is a thin shell over one library call.

    judge local exercises/glm5_mis my_solution.py   # grade a file (exit 0 accepted, 1 rejected,
                                                    # 3 could not run, 4 judge error, 2 usage)
    judge local exercises/glm5_mis --reference      # the author's check
    judge schema                                    # the Verdict JSON Schema
    judge serve --host 127.0.0.1 --port 8000        # the service (configured by JUDGE_* variables)
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

from judge.errors import JudgeError, UsageError
from judge.exercise import TIERS, resolve

log = logging.getLogger("judge")
MAX_SOURCE_BYTES = 1 << 20


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

    sub.add_parser("schema", help="print the Verdict JSON Schema")

    srv = sub.add_parser("serve", help="run the judge service (configuration: JUDGE_* variables)")
    srv.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    srv.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    srv.add_argument("--workers", type=int, default=None, help="grading workers (default JUDGE_WORKERS or one per core)")
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
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"{path} is not UTF-8 text ({e})") from None


def cmd_local(args: argparse.Namespace) -> int:
    from judge.grading import grade, warm
    from judge.report import render
    from judge.sandbox import Sandbox

    t0 = time.perf_counter()
    exercise = resolve(args.exercise)
    tiers = _tiers(args.tiers)
    if args.reference and args.file:
        raise UsageError("give either a file or --reference, not both")
    path = exercise.solution_path if args.reference else Path(args.file or exercise.starter_path)
    source = read_source(path)
    out_dir = args.out or Path("judge-out") / f"{exercise.slug}-{datetime.now():%Y%m%d-%H%M%S}"

    # Start the zygote (it imports torch) while this process loads the tests and the reference.
    box: dict = {}

    def start() -> None:
        try:
            box["sandbox"] = Sandbox()
        except BaseException as e:  # noqa: BLE001 - reported below
            box["error"] = e

    starter = threading.Thread(target=start, daemon=True)
    if not args.no_sandbox:
        starter.start()
    else:
        log.warning("--no-sandbox: the submission runs in the judge's process, without isolation")
    warm([exercise])
    sandbox = None
    if not args.no_sandbox:
        starter.join()
        if "error" in box:
            raise box["error"]
        sandbox = box["sandbox"]
    startup_ms = (time.perf_counter() - t0) * 1000
    try:
        verdict = grade(exercise, source, sandbox=sandbox, mode=args.mode, seed=args.seed,
                        tiers=tiers, out_dir=out_dir)
    finally:
        if sandbox is not None:
            sandbox.close()
    verdict.timings.startup_ms = round(startup_ms, 1)
    if args.json:
        print(verdict.model_dump_json(indent=2))
    else:
        print(render(verdict, out_dir=str(out_dir)))
    return verdict.exit_code


def cmd_schema(args: argparse.Namespace) -> int:
    from judge.models import Verdict

    print(json.dumps(Verdict.model_json_schema(), indent=2))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from judge.api import serve
    from judge.config import Config

    overrides = {} if args.workers is None else {"workers": max(args.workers, 0)}
    return serve(Config.from_env(**overrides), args.host, args.port)


COMMANDS = {"local": cmd_local, "schema": cmd_schema, "serve": cmd_serve}


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
