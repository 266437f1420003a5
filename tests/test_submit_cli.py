"""``judge submit``: a file graded on the service (the conftest ``service``: glm5_mis), its tier
progress streamed, the same table as ``judge local`` and the same exit codes; and ``POST /submit``
as ``multipart/form-data``, as ``curl -F code=@sol.py -F exercise=glm5_mis`` sends it."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from judge import cli
from judge.models import Verdict
from judge.report import render
from judge.service.forms import FormError, parse_form

API_KEYS = ("test-key-alice", "test-key-bob")  # the service fixture's keys (tests/conftest.py)

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "reference/glm5_mis/solution.py"
STARTER = ROOT / "exercises/glm5_mis/starter.py"


def _submit(service, path: Path, *extra: str, key: str = API_KEYS[0]) -> int:
    return cli.main(["submit", str(path), "--exercise", "glm5_mis", "--server", service.url, "--key", key, *extra])


def _table_shape(text: str) -> list[str]:
    """A table's lines without what differs between two gradings of one file (times, seed)."""
    out = []
    for line in text.splitlines():
        if line.startswith("  time:") or line.startswith("  replay with:"):
            continue
        out.append(" ".join(w for w in line.split() if not w.replace(".", "").isdigit()))
    return out


def test_submit_streams_progress_and_prints_the_local_table(service, capsys):
    assert _submit(service, REFERENCE) == 0
    out, err = capsys.readouterr()
    assert "[queued]" in err or "[running]" in err
    progress = [line.split()[:2] for line in err.splitlines() if line.startswith("  T")]
    assert progress and all(mark == "✓" for _, mark in progress)
    assert [t for t, _ in progress] == sorted(t for t, _ in progress)  # in tier order, as they ran
    assert cli.main(["submit", str(REFERENCE), "--exercise", "glm5_mis", "--server", service.url,
                     "--key", API_KEYS[0], "--json"]) == 0
    verdict = Verdict.model_validate_json(capsys.readouterr().out)
    assert verdict.verdict == "accepted" and len(progress) == sum(len(t.tests) for t in verdict.tiers)
    # both list the plots, drawn after the verdict was first answered (artifacts_pending)
    assert verdict.artifacts and not verdict.artifacts_pending and "\n  artifacts" in out
    assert _table_shape(out.rstrip("\n")) == _table_shape(render(verdict))
    assert out.startswith("glm5_mis · submit · seed ") and " · ACCEPTED" in out.splitlines()[0]


def test_submit_exits_with_the_codes_of_judge_local(service, tmp_path, capsys):
    assert _submit(service, STARTER) == 1  # rejected
    assert "is not implemented yet" in capsys.readouterr().out
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n    pass\n")
    assert _submit(service, broken) == 3  # could not run
    out = capsys.readouterr().out
    assert "not run: the submission could not be loaded (syntax error)" in out and "^" in out
    assert _submit(service, REFERENCE, key="not-a-key") == 2
    assert "(401)" in capsys.readouterr().err
    assert cli.main(["submit", str(REFERENCE), "--exercise", "no_such", "--server", service.url,
                     "--key", API_KEYS[0]]) == 2
    assert "unknown exercise" in capsys.readouterr().err
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert cli.main(["submit", str(REFERENCE), "--exercise", "glm5_mis", "--server",
                     f"http://127.0.0.1:{port}", "--key", API_KEYS[0]]) == 4
    assert "could not reach the judge service" in capsys.readouterr().err


def _wait(client, sid: str) -> dict:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        doc = client.get(f"/submissions/{sid}").json()
        if doc["status"] in ("done", "error"):
            return doc
        time.sleep(0.1)
    raise AssertionError(f"{sid} was not graded in time")


def test_the_service_accepts_multipart_form_data(service):
    code = REFERENCE.read_text()
    with service.client() as c:
        r = c.post("/submit", files={"code": ("sol.py", code.encode(), "text/x-python")},
                   data={"exercise": "glm5_mis", "mode": "run"})
        assert r.status_code == 202, r.text
        doc = _wait(c, r.json()["id"])
        assert doc["mode"] == "run" and doc["verdict"]["verdict"] == "accepted"
        # a form field the JSON body does not have is refused as in JSON; so is a missing one
        r = c.post("/submit", files={"code": ("sol.py", b"x = 1\n")}, data={"exercise": "glm5_mis", "extra": "1"})
        assert r.status_code == 422 and "extra" in r.text
        r = c.post("/submit", data={"exercise": "glm5_mis"})  # urlencoded, without code
        assert r.status_code == 422 and "code" in r.text
        r = c.post("/submit", content=b"--x\r\nno headers\r\n", headers={"Content-Type": "multipart/form-data"})
        assert r.status_code == 400 and r.json()["error"] == "bad_form"


def test_parse_form_reads_files_and_fields():
    body = (b"--B\r\nContent-Disposition: form-data; name=\"code\"; filename=\"sol.py\"\r\n"
            b"Content-Type: text/x-python\r\n\r\nprint('\xc3\xa9')\r\n--B\r\n"
            b"Content-Disposition: form-data; name=\"exercise\"\r\n\r\ngspo\r\n--B--\r\n")
    assert parse_form("multipart/form-data; boundary=B", body) == {"code": "print('é')", "exercise": "gspo"}
    assert parse_form("application/x-www-form-urlencoded", b"exercise=gspo&code=x%3D1") == {"exercise": "gspo", "code": "x=1"}
    with pytest.raises(FormError, match="more than once"):
        parse_form("application/x-www-form-urlencoded", b"code=1&code=2")
