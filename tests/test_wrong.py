"""Known mistakes as declared edits (reference/<slug>/wrong.toml), whole files (wrong/*.py), the
equivalent mutants of reference/<slug>/mutants.toml, and `judge wrong`."""

from __future__ import annotations

import ast
import shutil
import tomllib

import pytest

from judge.cli import main
from judge.errors import ExerciseError
from judge.exercise import EXERCISES_DIR, REFERENCE_DIR, discover, load_exercise
from judge.wrong import apply_edits, spec_headings

EXERCISES = discover(EXERCISES_DIR)


@pytest.mark.parametrize("slug", sorted(EXERCISES))
def test_every_catalogue_builds_distinct_files_that_name_a_spec_section(slug):
    ex = EXERCISES[slug]
    reference = ex.solution_path.read_text()
    headings = spec_headings(ex.spec_path)
    wrong = ex.wrong_solutions()
    assert len(wrong) >= 8 and len({w.name for w in wrong}) == len(wrong)
    sources = set()
    for w in wrong:
        assert w.source != reference, f"{w.label} builds the reference itself"
        ast.parse(w.source, w.label)  # each built file is Python
        assert w.spec_section in headings, w.label
        assert len(w.why.split()) >= 5 and w.why.endswith("."), f"{w.label}: why is one full sentence"
        assert w.expect_tier in ("T0", "T1", "T2", "T3")
        sources.add(w.source)
    assert len(sources) == len(wrong), "two entries build the same file"


@pytest.mark.parametrize("slug", sorted(EXERCISES))
def test_an_entry_is_the_reference_with_exactly_its_edits(slug):
    ex = EXERCISES[slug]
    data = tomllib.loads((ex.reference_dir / "wrong.toml").read_text())
    by_name = {w.name: w for w in ex.wrong_solutions()}
    for e in data["wrong"]:
        expected = ex.solution_path.read_text()
        for old, new in e["replace"]:
            assert expected.count(old) == 1
            expected = expected.replace(old, new)
        assert by_name[e["name"]].source == expected


def test_apply_edits_fails_loudly_unless_each_old_text_occurs_once():
    src = "a = 1\nb = 1\n"
    assert apply_edits(src, [("a = 1", "a = 2"), ("a = 2\nb", "a = 3\nb")], "w") == "a = 3\nb = 1\n"
    with pytest.raises(ExerciseError, match=r"entry 'x': replace\[0\].*does not occur"):
        apply_edits(src, [("c = 1", "c = 2")], "entry 'x'")
    with pytest.raises(ExerciseError, match=r"replace\[1\].*occurs 2 times"):
        apply_edits(src, [("a = 1", "a = 2"), ("= ", "== ")], "entry 'x'")


@pytest.fixture
def pack(tmp_path):
    """A copy of glm5_mis's exercise and reference folders."""
    shutil.copytree(EXERCISES_DIR / "glm5_mis", tmp_path / "exercises" / "glm5_mis")
    shutil.copytree(REFERENCE_DIR / "glm5_mis", tmp_path / "reference" / "glm5_mis")
    return load_exercise(tmp_path / "exercises" / "glm5_mis")


def test_a_changed_reference_names_the_entry_that_no_longer_applies(pack):
    sol = pack.solution_path
    sol.write_text(sol.read_text().replace("(ratio > 1.0 - clip_low)", "(1.0 - clip_low < ratio)"))
    with pytest.raises(ExerciseError, match=r"glm5_mis/wrong.toml: wrong entry '(compare_in_float64|inclusive_endpoints)': "
                                            r"replace\[0\]'s old text .* does not occur in the reference"):
        pack.wrong_solutions()


def _append(path, text):
    path.write_text(path.read_text() + text)


def test_bad_entries_are_errors_naming_the_entry(pack):
    toml = pack.reference_dir / "wrong.toml"
    good = toml.read_text()
    cases = {
        '\n[[wrong]]\nname = "x"\nexpect = "T1"\nwhy = "A mistake."\nspec_section = "Nowhere"\n'
        'replace = [["a", "b"]]\n': "spec_section 'Nowhere' is not a heading of spec.md",
        '\n[[wrong]]\nname = "x"\nexpect = "T9"\nwhy = "A mistake."\nspec_section = "Formulas"\n'
        'replace = [["a", "b"]]\n': "expect must be one of T0, T1, T2, T3",
        '\n[[wrong]]\nname = "x"\nexpect = "T1"\nspec_section = "Formulas"\nreplace = [["a", "b"]]\n':
            "needs a non-empty string 'why'",
        '\n[[wrong]]\nname = "x"\nexpect = "T1"\nwhy = "A mistake."\nspec_section = "Formulas"\n'
        'replace = []\n': "replace is a non-empty list of",
        '\n[[wrong]]\nname = "inclusive_endpoints"\nexpect = "T1"\nwhy = "Again."\nspec_section = "Formulas"\n'
        'replace = [["import math", "import math as m"]]\n': "declared more than once",
    }
    for extra, message in cases.items():
        toml.write_text(good + extra)
        with pytest.raises(ExerciseError, match=message):
            pack.wrong_solutions()


def test_a_whole_file_mistake_declares_its_tier_and_may_name_a_spec_section(pack):
    folder = pack.reference_dir / "wrong"
    folder.mkdir()
    (folder / "rewritten.py").write_text('"""Rewrote it all from memory.\n\nexpect: T1\nspec: Numerics\n"""\n')
    w = pack.wrong_solution("rewritten")
    assert (w.expect_tier, w.spec_section, w.why, w.label) == ("T1", "Numerics", "Rewrote it all from memory.",
                                                               "wrong/rewritten.py")
    (folder / "rewritten.py").write_text('"""No tier here."""\n')
    with pytest.raises(ExerciseError, match="expect: T<n>"):
        pack.wrong_solutions()
    (folder / "rewritten.py").write_text('"""Bad section.\n\nexpect: T1\nspec: Elsewhere\n"""\n')
    with pytest.raises(ExerciseError, match="'Elsewhere' is not a heading"):
        pack.wrong_solutions()


def test_a_built_file_loads_as_a_module_in_the_trusted_process(pack):
    w = pack.wrong_solution("ratio_inverted")
    mod = w.load("_test_wrong_glm5_ratio_inverted")
    assert callable(mod.offpolicy_loss) and "rollout_logp.detach() - logp.detach()" in w.source


def test_equivalent_mutants_live_with_the_reference_never_in_exercise_toml(pack):
    for folder in sorted(EXERCISES_DIR.glob("*/")):
        if (folder / "exercise.toml").is_file():
            assert "equivalent_mutants" not in tomllib.loads((folder / "exercise.toml").read_text()), folder
    listed = [e["id"] for e in tomllib.loads((pack.reference_dir / "mutants.toml").read_text())["equivalent"]]
    assert [e.id for e in pack.equivalent_mutants()] == listed
    _append(pack.reference_dir / "mutants.toml", '\n[[equivalent]]\nid = "solution.py:3:Lt->LtE"\n')
    with pytest.raises(ExerciseError, match=rf"equivalent\[{len(listed)}\] needs an id and a non-empty reason"):
        pack.equivalent_mutants()
    _append(pack.root / "exercise.toml", '\n[[equivalent_mutants]]\nid = "a"\nreason = "b"\n')
    with pytest.raises(ExerciseError, match="belong in reference/glm5_mis/mutants.toml"):
        load_exercise(pack.root)


def test_judge_wrong_prints_the_built_file_and_lists_the_catalogue(capsys):
    ex = EXERCISES["gspo"]
    assert main(["wrong", "gspo", "product_ratio"]) == 0
    out, err = capsys.readouterr()
    assert out == ex.wrong_solution("product_ratio").source
    assert "expect T1" in err and "product of the token ratios" in err
    assert main(["wrong", "gspo"]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listing] == [w.name for w in ex.wrong_solutions()]
    assert main(["wrong", "gspo", "no_such_mistake"]) == 2
    names = ", ".join(w.name for w in ex.wrong_solutions())  # every known mistake, as the listing names them
    assert f"expected one of: {names}" in capsys.readouterr().err
