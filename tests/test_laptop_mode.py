"""Laptop mode: the judge run by an ordinary user (no uid switch, no cgroups, no PID namespace)
still withstands the attacks with Landlock, seccomp, rlimits and a user+network namespace."""

from __future__ import annotations

import json
import os
import pwd
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from judge.exercise import REPO_ROOT

USER = "judge-laptop"
HERE = Path(__file__).parent


def readable_by_others(path: Path) -> bool:
    return all(os.stat(p).st_mode & 0o005 == 0o005 for p in [path, *path.parents] if p != Path("/"))


@pytest.fixture(scope="module")
def laptop_user():
    if os.geteuid() != 0:
        pytest.skip("this test creates an ordinary user; run as root (CI does)")
    if not readable_by_others(REPO_ROOT) or not readable_by_others(Path(sys.prefix)):
        pytest.skip("the checkout or the venv is not readable by an ordinary user here")
    try:
        pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        USER], check=True)
    return pwd.getpwnam(USER)


def test_attacks_in_laptop_mode(laptop_user, tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    target = tmp_path / "pwned.txt"
    os.chmod(tmp_path, 0o777)
    (tmp_path / "judge.db").write_text("secret rows")  # the user's own file: only Landlock protects it
    os.chmod(tmp_path / "judge.db", 0o644)
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8",
           "PYTHONPATH": str(REPO_ROOT)}
    r = subprocess.run(["setpriv", f"--reuid={laptop_user.pw_uid}", f"--regid={laptop_user.pw_gid}",
                        "--clear-groups", "--", sys.executable, str(HERE / "laptop_driver.py"),
                        str(listener.getsockname()[1]), str(target)],
                       cwd="/tmp", env=env, capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["uid"] == laptop_user.pw_uid and out["info"]["root"] is False
    layers = out["reference"]["sandbox"]
    assert any(l.startswith("landlock") for l in layers) and "seccomp" in layers
    assert out["reference"]["verdict"] == "accepted"
    for name, res in out.items():
        if name in ("uid", "info", "reference"):
            continue
        assert res["verdict"] == "rejected", (name, res)
    assert out["read_reference"]["kind"] == "import_error"
    assert "leaked" not in out["read_host_files"]["output"]
    assert out["write_outside"]["kind"] == "import_error" and not target.exists()
    assert out["tcp_connect"]["kind"] == "import_error"
    with pytest.raises(BlockingIOError):
        listener.accept()
    assert out["fork"]["kind"] == "import_error"
    assert out["infinite_loop"]["kind"] == "time_limit"
    assert out["allocate_20gb"]["kind"] == "memory_limit"
    assert out["kill_parent"]["output"].count("blocked") == 3
    assert out["sys_exit"]["kind"] == "runtime_error"
    assert "reached" not in out["udp_dns"]["output"]
    assert "wrote" not in out["persist_state"]["output"]
    assert "files: []" in out["observe_state"]["output"]
    assert out["sigstop_self"]["kind"] == "time_limit"
    assert out["read_host_files"]["output"].count("blocked") == 6
    assert "planted" not in out["site_hooks"]["output"]
    assert "attached" not in out["ptrace_judge"]["output"]
    assert "read memory" not in out["ptrace_judge"]["output"]
    assert "judge-like modules: []" in out["introspect"]["output"]
