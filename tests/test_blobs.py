"""The blob store (judge/service/blobs.py, blobs_local.py, blobs_pg.py, artifacts.py) on both backends through one fixture:
files under the data dir (SQLite's) and PostgreSQL's tables. Sets are written whole and once,
files once; names and sizes are checked on write and read; caps hold under concurrent writers;
a large file is read a piece at a time; a worker's artifacts are kept only when its verdict was."""

from __future__ import annotations

import os
import threading
import time

import pytest

from judge.errors import BlobExists, BlobTooLarge
from judge.exercise import REPO_ROOT
from judge.models import Artifact, Verdict
from judge.service.artifacts import artifacts_scratch, blob_store, keep_artifacts
from judge.service.blobs import Kept, artifacts_owner, previews_owner
from judge.service.blobs_local import LocalBlobs
from judge.service.files import CHUNK, FILE_CAP
from judge.service.store import Store

SID = "0123456789abcdef01234567"
OTHER = "fedcba9876543210fedcba98"
A = artifacts_owner(SID)


@pytest.fixture
def blobs(database_url, tmp_path):
    """A fresh blob store on each backend: LocalBlobs on SQLite, PgBlobs on PostgreSQL."""
    store = Store(database_url)
    yield blob_store(tmp_path / "data", store)
    store.close()


def folder_of(tmp_path, files: dict[str, bytes], name: str = "src"):
    d = tmp_path / name
    d.mkdir()
    for n, data in files.items():
        (d / n).write_bytes(data)
    return d


def test_the_store_s_url_picks_the_backend(blobs, database_url):
    assert blobs.name == ("postgresql" if database_url.startswith("postgresql://") else "files")
    assert isinstance(blobs, LocalBlobs) == (blobs.name == "files")


def test_a_folder_is_kept_as_a_set_and_read_back(blobs, tmp_path):
    files = {"metrics.json": b'{"a": 1}', "bandit.vl.json": b"{}" * 1000, "empty.txt": b""}
    assert blobs.list(A) is None and not blobs.exists(A) and blobs.open(A, "metrics.json") is None
    kept = blobs.put_folder(A, folder_of(tmp_path, files), file_cap=1 << 20)
    assert kept == Kept(files=sorted((n, len(d)) for n, d in files.items()), problems=[])
    assert blobs.exists(A) and blobs.list(A) == sorted((n, len(d)) for n, d in files.items())
    for n, data in files.items():
        assert blobs.read(A, n) == data
    assert blobs.open(A, "missing.json") is None and blobs.list(artifacts_owner(OTHER)) is None
    blob = blobs.open(A, "bandit.vl.json")
    try:
        assert blob.size == 2000 and blob.read(1990, 100) == b"{}" * 5
    finally:
        blob.close()


def test_a_large_file_is_read_a_piece_at_a_time(blobs, tmp_path):
    data = os.urandom(3 * CHUNK + 5)
    blobs.put_folder(A, folder_of(tmp_path, {"big.bin": data}), file_cap=FILE_CAP)
    blob = blobs.open(A, "big.bin")
    pieces, offset = [], 0
    try:
        while offset < blob.size:
            piece = blob.read(offset, CHUNK)
            assert 0 < len(piece) <= CHUNK
            pieces.append(piece)
            offset += len(piece)
    finally:
        blob.close()
    assert b"".join(pieces) == data and len(pieces) == 4
    if blobs.name == "postgresql":  # four rows of at most a CHUNK each, none holding the whole file
        sizes = [r[0] for r in blobs.raw().execute(
            "SELECT length(data) FROM blob_chunks c JOIN blobs b ON b.id = c.blob WHERE b.name = 'big.bin' "
            "ORDER BY n").fetchall()]
        assert sizes == [CHUNK, CHUNK, CHUNK, 5]
        assert blobs.open_reads == 0


def test_bad_names_links_and_oversized_files_are_left_out_and_said_so(blobs, tmp_path):
    src = folder_of(tmp_path, {"ok.json": b"{}", "big.png": b"x" * 101, "bad name.json": b"{}"})
    (src / "link.json").symlink_to(src / "ok.json")
    os.mkfifo(src / "fifo.json")
    (src / "dir").mkdir()
    (src / ".hidden").write_bytes(b"never listed")
    kept = blobs.put_folder(A, src, file_cap=100)
    assert kept.files == [("ok.json", 2)]
    told = "\n".join(kept.problems)
    for name in ("big.png", "bad name.json", "link.json", "fifo.json", "dir"):
        assert name in told, name
    assert "over the 100 bytes" in told and ".hidden" not in told
    assert blobs.list(A) == [("ok.json", 2)]


def test_a_set_s_caps_on_files_and_bytes_hold(blobs, tmp_path):
    blobs.set_files, blobs.set_bytes = 3, 100
    kept = blobs.put_folder(A, folder_of(tmp_path, {f"f{i}.txt": b"x" * 10 for i in range(5)}), file_cap=50)
    assert [n for n, _ in kept.files] == ["f0.txt", "f1.txt", "f2.txt"]
    assert sum("capped at 3 files" in p for p in kept.problems) == 2
    with pytest.raises(BlobTooLarge):  # a fourth file, drawn later, finds the set full
        blobs.put(A, "late.svg", b"<svg/>")
    other = artifacts_owner(OTHER)
    blobs.put(other, "a.svg", b"x" * 60)
    with pytest.raises(BlobTooLarge):  # 60 + 50 > 100 bytes
        blobs.put(other, "b.svg", b"x" * 50)
    blobs.put(other, "b.svg", b"x" * 40)
    assert blobs.list(other) == [("a.svg", 60), ("b.svg", 40)]


def test_sizes_are_capped_on_write_and_on_read(blobs, tmp_path):
    with pytest.raises(BlobTooLarge):
        blobs.put(A, "a.svg", b"x" * 11, cap=10)
    assert blobs.list(A) is None  # nothing made for a refused file
    blobs.put(A, "a.svg", b"x" * 10, cap=10)
    assert blobs.open(A, "a.svg", cap=9) is None
    assert blobs.read(A, "a.svg", cap=10) == b"x" * 10


def test_hostile_names_and_owners_are_refused(blobs):
    blobs.put(A, "ok.svg", b"<svg/>")
    for name in ("../ok.svg", "..", ".hidden", "a" * 300, "x\x00.png", "/etc/passwd", "ok.svg/..", ""):
        assert blobs.open(A, name) is None, name
        with pytest.raises(ValueError):
            blobs.put(A, name, b"x")
    for owner in ("artifacts/../../etc", "artifacts/" + "0" * 23, "previews/a/b/c", "previews/../x/00",
                  "submissions/" + SID):
        with pytest.raises(ValueError):
            blobs.list(owner)
        with pytest.raises(ValueError):
            blobs.open(owner, "ok.svg")


def test_nothing_is_ever_overwritten(blobs, tmp_path):
    blobs.put_folder(A, folder_of(tmp_path, {"metrics.json": b"first"}), file_cap=100)
    with pytest.raises(BlobExists):
        blobs.put_folder(A, folder_of(tmp_path, {"metrics.json": b"second", "new.json": b"{}"}, "again"),
                         file_cap=100)
    with pytest.raises(BlobExists):
        blobs.put(A, "metrics.json", b"second")
    assert blobs.list(A) == [("metrics.json", 5)] and blobs.read(A, "metrics.json") == b"first"
    blobs.put(A, "bandit.svg", b"<svg/>")  # a new name joins the set
    with pytest.raises(BlobExists):
        blobs.put(A, "bandit.svg", b"<svg>other</svg>")
    assert blobs.read(A, "bandit.svg") == b"<svg/>"


def test_concurrent_writers_of_one_set_one_name_and_one_capped_set(blobs, tmp_path):
    folders = [folder_of(tmp_path, {"metrics.json": f"writer {i}".encode(), f"only{i}.txt": b"x"}, f"w{i}")
               for i in range(6)]
    results: dict[str, list] = {"sets": [], "names": [], "capped": []}
    start = threading.Barrier(18)

    def whole(i):
        start.wait()
        try:
            blobs.put_folder(A, folders[i], file_cap=100)
            results["sets"].append(i)
        except BlobExists:
            results["sets"].append(None)

    def one_name(i):
        start.wait()
        try:
            blobs.put(artifacts_owner(OTHER), "same.svg", f"drawer {i}".encode())
            results["names"].append(i)
        except BlobExists:
            results["names"].append(None)

    capped = previews_owner("glm5_mis", "00ff")

    def capped_set(i):
        start.wait()
        try:
            blobs.put(capped, f"v{i}.svg", b"x")
            results["capped"].append(i)
        except BlobTooLarge:
            results["capped"].append(None)

    blobs.set_files = 4
    threads = [threading.Thread(target=f, args=(i,)) for f in (whole, one_name, capped_set) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    (winner,) = [i for i in results["sets"] if i is not None]
    assert results["sets"].count(None) == 5
    assert blobs.list(A) == [("metrics.json", 8), (f"only{winner}.txt", 1)]  # the winner's set, no merge
    assert blobs.read(A, "metrics.json") == f"writer {winner}".encode()
    (drawer,) = [i for i in results["names"] if i is not None]
    assert blobs.read(artifacts_owner(OTHER), "same.svg") == f"drawer {drawer}".encode()
    stored = sorted(i for i in results["capped"] if i is not None)
    assert len(stored) == 4 and [n for n, _ in blobs.list(capped)] == [f"v{i}.svg" for i in stored]


def test_old_versions_of_previews_are_pruned(blobs, tmp_path):
    old, new, other = previews_owner("glm5_mis", "0001"), previews_owner("glm5_mis", "0002"), \
        previews_owner("glm5_misx", "0001")
    for i, owner in enumerate((old, new, other)):
        blobs.put_folder(owner, folder_of(tmp_path, {"metrics.json": b"{}"}, f"v{i}"), file_cap=100)
    blobs.put_folder(A, folder_of(tmp_path, {"metrics.json": b"{}"}, "art"), file_cap=100)
    assert blobs.prune(new) == 1
    assert not blobs.exists(old) and blobs.exists(new) and blobs.exists(other) and blobs.exists(A)
    assert blobs.prune(A) == 0 and blobs.exists(A)


def test_one_builder_at_a_time_the_others_wait(blobs):
    owner = previews_owner("glm5_mis", "00aa")
    inside, order = threading.Event(), []

    def first():
        with blobs.building(owner):
            inside.set()
            time.sleep(0.3)
            order.append("first out")

    def second():
        inside.wait(10)
        with blobs.building(owner):
            order.append("second in")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert order == ["first out", "second in"]


def verdict_with(*names: str) -> Verdict:
    return Verdict(exercise="glm5_mis", verdict="accepted", mode="run", seed=0, artifacts=[
        Artifact(name=n, path=f"/submissions/{SID}/artifacts/{n}", size=0, media_type="application/json")
        for n in names])


def test_a_worker_keeps_its_artifacts_only_when_its_verdict_was_stored(blobs, tmp_path):
    data = tmp_path / "data"
    out = artifacts_scratch(data, SID)
    out.mkdir(parents=True)
    (out / "metrics.json").write_bytes(b'{"x": 1}')
    v = verdict_with("metrics.json")
    keep_artifacts(blobs, SID, out, v, 1 << 20, keep=False)  # a stale worker: its grading was taken back
    assert not out.exists() and blobs.list(A) is None

    out = artifacts_scratch(data, SID)
    out.mkdir(parents=True)
    (out / "metrics.json").write_bytes(b'{"x": 1}')
    (out / "huge.vl.json").write_bytes(b"x" * 200)
    v = verdict_with("metrics.json", "huge.vl.json")
    keep_artifacts(blobs, SID, out, v, 100, keep=True)
    assert not out.exists() and blobs.list(A) == [("metrics.json", 8)]
    assert [(a.name, a.size) for a in v.artifacts] == [("metrics.json", 8)]  # the verdict lists what is kept
    assert "[judge] huge.vl.json was not kept" in v.output


def test_scratch_left_by_a_process_that_is_gone_is_swept(tmp_path, monkeypatch):
    import judge.service.artifacts as blobs_module

    base = tmp_path / "artifacts" / ".scratch"
    dead = base / f"{OTHER}-999999999"  # no such pid
    dead.mkdir(parents=True)
    mine = base / f"{OTHER}-{os.getpid()}"
    mine.mkdir()
    monkeypatch.setattr(blobs_module, "_swept", [])
    path = artifacts_scratch(tmp_path, SID)
    assert not dead.exists() and mine.exists() and path == base / f"{SID}-{os.getpid()}"


def test_previews_are_built_once_by_whichever_builder_is_first(blobs, tmp_path, monkeypatch):
    """Four builders at once (threads here; hosts in tests/test_blobs_hosts.py): the reference is
    graded once, its files kept once; the next version's build removes the old version's set."""
    import judge.grading
    from judge.service.catalog import build_previews, load_catalog, previews_of
    from judge.service.config import Config

    cfg = Config(data_dir=tmp_path / "data", exercises=("glm5_mis",))
    ex = load_catalog(cfg)["glm5_mis"]
    graded = []

    def fake_grade(exercise, source, *, out_dir, **kw):  # the reference's T3, quickly
        graded.append(threading.get_ident())
        time.sleep(0.2)
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "metrics.json").write_bytes(b'{"p_best": [0.5]}')
        return Verdict(exercise=exercise.slug, verdict="accepted", mode="run", seed=0)

    monkeypatch.setattr(judge.grading, "grade", fake_grade)
    built = []
    threads = [threading.Thread(target=lambda: built.append(build_previews(cfg, blobs, ex))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(graded) == 1 and sorted(built) == [False, False, False, True]
    assert blobs.list(previews_of(ex)) == [("metrics.json", 17)]
    assert not list((tmp_path / "data" / "previews" / ".scratch").iterdir())  # its scratch went
    first, older = previews_of(ex), previews_owner("glm5_mis", "0" * 16)
    blobs.put(older, "metrics.json", b"{}")
    monkeypatch.setattr("judge.service.catalog.preview_digest", lambda ex: "f" * 16)  # the exercise changed
    assert build_previews(cfg, blobs, ex) and len(graded) == 2
    assert blobs.exists(previews_of(ex)) and not blobs.exists(first) and not blobs.exists(older)


REF = (REPO_ROOT / "reference/glm5_mis/solution.py").read_text()


@pytest.fixture
def graded_by_worker(database_url, tmp_path, sandbox):
    """A real worker (the session's warm sandbox) on each backend, and its config."""
    from judge.service.config import Config
    from judge.service.worker import Worker

    cfg = Config(database_url=database_url, workers=1, data_dir=tmp_path / "data", exercises=("glm5_mis",))
    w = Worker(cfg, "wtest", 0, 1)
    w.preload()
    w.sandbox = sandbox
    yield w
    w.sandbox = None
    w.heartbeat.stop()


def test_a_worker_keeps_a_grading_s_artifacts_in_its_backend_and_a_stale_one_keeps_none(graded_by_worker):
    w = graded_by_worker
    ok = w.store.add("a", "glm5_mis", "run", REF, queue_max=10)
    w.run(w.store.claim("wtest"))
    v = Verdict.model_validate_json(w.store.get(ok, None)["verdict"])
    kept = dict(w.blobs.list(artifacts_owner(ok)))
    assert {"metrics.json", "bandit.vl.json"} <= set(kept) and {a.name: a.size for a in v.artifacts} == kept
    assert (w.cfg.data_dir / "artifacts" / ok).is_dir() == (w.blobs.name == "files")  # PostgreSQL: no disk

    stale = w.store.add("a", "glm5_mis", "run", REF, queue_max=10)
    job = w.store.claim("wtest")
    # taken back meanwhile (no heartbeat) and claimed by another host: our verdict is refused
    w.store.execute("UPDATE submissions SET worker = 'w-other', attempts = 2 WHERE id = ?", (stale,))
    w.run(job)
    row = w.store.get(stale, None)
    assert row["status"] == "running" and row["verdict"] is None
    assert w.blobs.list(artifacts_owner(stale)) is None  # nothing kept to clash with the other's
    assert not list((w.cfg.data_dir / "artifacts" / ".scratch").iterdir())  # its scratch went


def test_artifacts_kept_as_files_are_imported_once(blobs, tmp_path, capsys, database_url):
    """judge.service.blobs_import: a data dir's artifacts (an older judge's, a grading host's)
    copied into the store's blob store with the worker's checks; a second run copies nothing."""
    from judge.service.blobs_import import import_artifacts, main

    src = tmp_path / "old-host"
    one, two = src / "artifacts" / SID, src / "artifacts" / OTHER
    one.mkdir(parents=True)
    two.mkdir()
    (one / "metrics.json").write_bytes(b'{"a": 1}')
    (two / "bandit.vl.json").write_bytes(b"{}")
    (two / "planted.json").symlink_to(tmp_path / "judge.db")
    (src / "artifacts" / "not-a-submission").mkdir()
    (src / "artifacts" / ".scratch" / f"{SID}-1").mkdir(parents=True)
    done = import_artifacts(blobs, src)
    assert (done.copied, done.present) == (2, 0) and any("planted.json" in p for p in done.problems)
    assert blobs.list(A) == [("metrics.json", 8)] and blobs.read(A, "metrics.json") == b'{"a": 1}'
    assert blobs.list(artifacts_owner(OTHER)) == [("bandit.vl.json", 2)]
    again = import_artifacts(blobs, src)
    assert (again.copied, again.present) == (0, 2)
    assert main(["sqlite:///x.db", str(src)]) == 2 and "postgresql" in capsys.readouterr().err
    if blobs.name == "postgresql":  # the command, by hand: a second host's data dir, then both again
        host2 = tmp_path / "host2" / "artifacts" / "00000000000000000000beef"
        host2.mkdir(parents=True)
        (host2 / "metrics.json").write_bytes(b"{}")
        assert main([database_url, str(tmp_path / "host2"), str(src)]) == 0
        assert capsys.readouterr().out.splitlines() == [f"{tmp_path / 'host2'}: 1 copied, 0 kept already",
                                                       f"{src}: 0 copied, 2 kept already"]
        assert blobs.read(artifacts_owner("00000000000000000000beef"), "metrics.json") == b"{}"
