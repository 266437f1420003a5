"""JUnit XML from a Verdict, for CI dashboards (``judge local ... --junit FILE``).

One ``<testsuite>`` per tier (``<exercise>.T0`` ...), one ``<testcase>`` per tier test. A failed
test is a ``<failure>``, a test that could not complete an ``<error>``, a skipped one
``<skipped>``. When grading stopped early (the submission could not run, or the judge failed) a
``<testcase name="grading">`` in a suite ``<exercise>.submission`` carries the ``<error>``. The
run's seed, mode and verdict are ``<properties>`` of every suite.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from judge.models import Verdict
from judge.report import TIER_NAMES

# Characters XML 1.0 cannot carry (a submission's exception message may contain anything).
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _text(s: str) -> str:
    return _INVALID_XML.sub("\ufffd", s)


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.3f}"


def to_junit(v: Verdict) -> ET.ElementTree:
    """The verdict as a JUnit ``<testsuites>`` document."""
    root = ET.Element("testsuites", name=f"judge {v.exercise}")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}

    def properties(parent: ET.Element) -> None:
        props = ET.SubElement(parent, "properties")
        for name, value in (("exercise", v.exercise), ("verdict", v.verdict), ("mode", v.mode),
                            ("seed", str(v.seed))):
            ET.SubElement(props, "property", name=name, value=value)

    for tr in v.tiers:
        suite = ET.SubElement(root, "testsuite", name=f"{v.exercise}.{tr.tier}",
                              time=_seconds(tr.duration_ms))
        properties(suite)
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        for t in tr.tests:
            case = ET.SubElement(suite, "testcase", classname=f"{v.exercise}.{tr.tier}_{TIER_NAMES[tr.tier]}",
                                 name=t.name, time=_seconds(t.duration_ms))
            counts["tests"] += 1
            message = _text(t.message)
            first = message.splitlines()[0] if message else t.status
            if t.status == "failed":
                ET.SubElement(case, "failure", message=first, type="Feedback").text = message
                counts["failures"] += 1
            elif t.status == "error":
                ET.SubElement(case, "error", message=first, type="TestError").text = message
                counts["errors"] += 1
            elif t.status == "skipped":
                ET.SubElement(case, "skipped", message=first)
                counts["skipped"] += 1
        for k, n in counts.items():
            suite.set(k, str(n))
            totals[k] += n
    if v.error is not None:
        suite = ET.SubElement(root, "testsuite", name=f"{v.exercise}.submission",
                              time=_seconds(v.timings.total_ms), tests="1", failures="0", errors="1",
                              skipped="0")
        properties(suite)
        case = ET.SubElement(suite, "testcase", classname=f"{v.exercise}.submission", name="grading",
                             time=_seconds(v.timings.total_ms))
        message = _text(v.error.message)
        ET.SubElement(case, "error", message=_text(f"{v.error.kind}: {message.splitlines()[0] if message else ''}"),
                      type=v.error.kind).text = message
        totals["tests"] += 1
        totals["errors"] += 1
    for k, n in totals.items():
        root.set(k, str(n))
    root.set("time", _seconds(v.timings.total_ms))
    ET.indent(root)
    return ET.ElementTree(root)


def write_junit(v: Verdict, path: Path) -> Path:
    """Write the verdict's JUnit XML to ``path`` (parents created) and return it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    to_junit(v).write(path, encoding="utf-8", xml_declaration=True)
    return path
