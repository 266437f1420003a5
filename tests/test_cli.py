"""`judge local` as a learner meets it: exit codes, --json on stdout only, usage errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from judge.exercise import REPO_ROOT
from judge.models import Verdict

JUDGE = [sys.executable, "-m", "judge.cli"]


def judge(*args: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(JUDGE + list(args), cwd=cwd, capture_output=True, text=True, timeout=300)


def test_reference_is_accepted_as_json(tmp_path):
    r = judge("local", "exercises/glm5_mis", "--reference", "--json", "--seed", "3", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    v = Verdict.model_validate_json(r.stdout)  # stdout is the document and nothing else
    assert v.verdict == "accepted" and v.seed == 3
    assert v.timings.startup_ms > 0 and v.timings.grading_ms > 0
    assert all(Path(a.path).parent == tmp_path for a in v.artifacts) and v.artifacts


def test_starter_is_rejected_with_a_readable_table(tmp_path):
    r = judge("local", "exercises/gspo", "--out", str(tmp_path), "--mode", "run")
    assert r.returncode == 1
    assert "REJECTED" in r.stdout and "sequence_ratio is not implemented yet" in r.stdout
    assert "Traceback" not in r.stdout + r.stderr


def test_a_submission_that_cannot_run_exits_3(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def masked_is_weights(:\n")
    r = judge("local", "exercises/glm5_mis", str(bad), "--json", "--out", str(tmp_path / "o"))
    assert r.returncode == 3
    assert json.loads(r.stdout)["error"]["kind"] == "syntax_error"


def test_usage_errors_exit_2_and_say_what_was_expected(tmp_path):
    r = judge("local", "exercises/nope")
    assert r.returncode == 2 and "unknown exercise" in r.stderr and "glm5_mis" in r.stderr
    r = judge("local", "glm5_mis", str(tmp_path / "missing.py"))
    assert r.returncode == 2 and "no such file" in r.stderr
    r = judge("local", "glm5_mis", "--tiers", "T9")
    assert r.returncode == 2 and "T0,T1,T2,T3" in r.stderr
    r = judge("local")
    assert r.returncode == 2


def test_a_source_file_is_decoded_as_python_decodes_it(tmp_path):
    """A byte-order mark, a coding declaration: what Python would run is graded; bytes Python
    cannot read are a usage error that says so."""
    from judge.cli import read_source
    from judge.errors import UsageError

    bom = tmp_path / "bom.py"
    bom.write_bytes(b"\xef\xbb\xbfx = 1\n")
    assert read_source(bom) == "x = 1\n"  # (and grade ignores one in a str, as Python does)
    latin = tmp_path / "latin.py"
    latin.write_bytes(b"# -*- coding: latin-1 -*-\n# caf\xe9\nx = 1\n")
    assert read_source(latin) == "# -*- coding: latin-1 -*-\n# caf\u00e9\nx = 1\n"
    bad = tmp_path / "bad.py"
    bad.write_bytes(b"# caf\xe9\nx = 1\n")
    try:
        read_source(bad)
    except UsageError as e:
        assert "bad.py" in str(e) and "UTF-8" in str(e)
    else:
        raise AssertionError("undecodable bytes were read")


def test_published_schema_is_current():
    published = json.loads((REPO_ROOT / "docs" / "verdict.schema.json").read_text())
    assert published == Verdict.model_json_schema(), "run: judge schema > docs/verdict.schema.json"
