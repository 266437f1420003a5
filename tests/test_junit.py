"""JUnit XML from a verdict, and ``judge local --junit FILE``."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from judge.cli import main
from judge.junit import to_junit, write_junit
from judge import models
from judge.models import SubmissionError, TierResult, Verdict


def _verdict() -> Verdict:
    return Verdict(exercise="gspo", verdict="rejected", mode="submit", seed=7, tiers=[
        TierResult(tier="T0", status="passed", duration_ms=12.0,
                   tests=[models.TestResult(name="test_shapes", status="passed", duration_ms=5.0)]),
        TierResult(tier="T1", status="failed", tests=[
            models.TestResult(name="test_oracle", status="failed",
                       message="loss at index (0,): expected 1, got 2\n  with x = ...\x00\x1b"),
            models.TestResult(name="test_big", status="error", message="the test could not complete: KeyError"),
        ]),
        TierResult(tier="T2", status="skipped", tests=[models.TestResult(name="test_p", status="skipped",
                                                                  message="not run: time limit")]),
        TierResult(tier="T3", status="skipped"),
    ])


def test_tiers_are_suites_and_statuses_map_to_junit_elements(tmp_path):
    path = write_junit(_verdict(), tmp_path / "sub" / "junit.xml")
    root = ET.parse(path).getroot()  # well-formed, control characters replaced
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == ("4", "1", "1", "1")
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert list(suites) == ["gspo.T0", "gspo.T1", "gspo.T2", "gspo.T3"]
    t1 = suites["gspo.T1"]
    failure = t1.find("testcase[@name='test_oracle']/failure")
    assert failure.get("message") == "loss at index (0,): expected 1, got 2"
    assert "with x = ..." in failure.text and "\x00" not in failure.text
    assert t1.find("testcase[@name='test_big']/error") is not None
    assert suites["gspo.T2"].find("testcase/skipped") is not None
    assert suites["gspo.T0"].find("testcase").get("classname") == "gspo.T0_contracts"
    props = {p.get("name"): p.get("value") for p in suites["gspo.T0"].iter("property")}
    assert props == {"exercise": "gspo", "verdict": "rejected", "mode": "submit", "seed": "7"}


def test_a_submission_that_could_not_run_is_one_error():
    v = Verdict(exercise="gspo", verdict="rejected", mode="submit", seed=1,
                tiers=[TierResult(tier=t, status="skipped") for t in ("T0", "T1", "T2", "T3")],
                error=SubmissionError(kind="syntax_error", message="line 3: invalid syntax"))
    root = to_junit(v).getroot()
    err = root.find("testsuite[@name='gspo.submission']/testcase[@name='grading']/error")
    assert err.get("type") == "syntax_error" and "line 3" in err.text
    assert root.get("errors") == "1" and root.get("tests") == "1"


def test_judge_local_writes_junit(tmp_path, capsys):
    out = tmp_path / "junit.xml"
    rc = main(["local", "gspo", "--reference", "--no-sandbox", "--tiers", "T0", "--junit", str(out),
               "--out", str(tmp_path / "art")])
    assert rc == 0
    root = ET.parse(out).getroot()
    assert root.get("failures") == "0" and int(root.get("tests")) >= 5
    assert root.find("testsuite[@name='gspo.T0']/testcase") is not None
    assert "gspo" in capsys.readouterr().out
