"""Run an exercise's tier tests directly with pytest, against the reference or any file.

    pytest exercises/glm5_mis/tests                      # the reference solution
    pytest exercises/glm5_mis/tests --impl my_solution.py  # your file, in-process (no sandbox)

The judge runs the same test functions against a sandboxed submission instead.
"""

from pathlib import Path

import pytest

from judge.exercise import load_exercise, load_module
from judge.readonly import InProcess
from judge.testing import Context


def pytest_addoption(parser):
    parser.addoption("--impl", default=None, help="implementation file to test (default: the reference)")
    parser.addoption("--judge-seed", type=int, default=0, help="the run's seed")
    parser.addoption("--judge-mode", default="submit", choices=["run", "submit"])


def _exercise(request):
    return load_exercise(Path(request.path).parent.parent)


@pytest.fixture
def ref(request):
    return _exercise(request).ref


@pytest.fixture
def oracle(request):
    return _exercise(request).oracle


@pytest.fixture
def experiment(request):
    return _exercise(request).experiment


@pytest.fixture
def sub(request):
    """The implementation, with its read-only inputs kept pristine (judge.readonly): a write into
    one fails the test that made the call, as under the judge."""
    impl = request.config.getoption("--impl")
    ex = _exercise(request)
    if impl is None:
        module = ex.ref
    else:
        path = Path(impl).resolve()
        module = load_module(path, f"_judge_impl_{abs(hash(str(path)))}")
    guarded = InProcess(module, ex.functions)
    yield guarded
    writes = guarded.__judge_violations__()
    if writes:
        pytest.fail(writes[0], pytrace=False)


@pytest.fixture
def ctx(request, tmp_path):
    return Context(seed=request.config.getoption("--judge-seed"),
                   mode=request.config.getoption("--judge-mode"),
                   out_dir=tmp_path, exercise=_exercise(request).slug)
