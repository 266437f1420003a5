"""Files the API serves: opened safely, streamed a chunk at a time (from disk, or from
PostgreSQL's blob tables), under caps on the downloads in flight (per client and in all), with
every blob closed and every slot given back when a reader finishes, hangs up or stalls. The live
tests run the real app under uvicorn in a thread (no workers) on both blob backends and read its
previews over real sockets."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

from judge.service import files
from judge.service.artifacts import blob_store
from judge.service.catalog import load_catalog, preview_dir, previews_of
from judge.service.config import Config
from judge.service.files import FILE_CAP, Transfers, list_regular_files, open_regular_file
from judge.service.store import Store

KEYS = ("files-key-alice", "files-key-bob")
BIG = 29 << 20  # the size of the 40-reader report


# --- opening and listing ---------------------------------------------------------------------

def test_open_regular_file_refuses_links_fifos_bad_names_and_large_files(tmp_path):
    (tmp_path / "ok.json").write_text("{}")
    (tmp_path / "link.json").symlink_to(tmp_path / "ok.json")
    os.mkfifo(tmp_path / "fifo.log")
    (tmp_path / "dir").mkdir()
    big = tmp_path / "big.bin"
    with open(big, "wb") as f:
        f.truncate(100)
    fd, size = open_regular_file(tmp_path, "ok.json")
    try:
        assert size == 2 and os.read(fd, 10) == b"{}"
    finally:
        os.close(fd)
    for name in ("link.json", "fifo.log", "dir", "missing.png", "../ok.json", ".hidden", "a" * 300):
        assert open_regular_file(tmp_path, name) is None, name
    assert open_regular_file(tmp_path, "big.bin", cap=99) is None
    assert open_regular_file(tmp_path, "big.bin", cap=100)[1] == 100
    (tmp_path.parent / "linked").symlink_to(tmp_path)
    assert open_regular_file(tmp_path.parent / "linked", "ok.json") is None  # nor a linked folder
    assert [n for n, _ in list_regular_files(tmp_path)] == ["big.bin", "ok.json"]


def test_transfers_cap_per_client_and_in_all():
    t = Transfers(total=3, per_client=2)
    assert [t.take("a"), t.take("a"), t.take("a")] == [None, None, "client"]
    assert [t.take("b"), t.take("b")] == [None, "total"]
    t.release("a")
    assert t.take("b") is None and t.in_flight == 3
    for c in "abb":
        t.release(c)
    assert t.in_flight == 0 and t.active == {}


# --- the app, live ---------------------------------------------------------------------------

class Live:
    """``create_app`` (no workers) served by uvicorn on a free loopback port, in a thread, with
    a large preview (a recognisable head and tail) kept in its blob store: under its data dir
    (``database_url`` SQLite's) or in PostgreSQL's tables."""

    def __init__(self, tmp_path: Path, database_url: str, **kw):
        import uvicorn

        from judge.service.app import create_app

        self.cfg = Config(database_url=database_url, api_keys=KEYS, workers=0,
                          data_dir=tmp_path / "data", exercises=("glm5_mis",), **kw)
        ex = load_catalog(self.cfg)["glm5_mis"]
        self.on_disk = not database_url.startswith("postgresql://")
        folder = preview_dir(self.cfg, ex) if self.on_disk else tmp_path / "made"
        folder.mkdir(parents=True)
        self.big = folder / "big.bin"
        with open(self.big, "wb") as f:
            f.truncate(BIG)  # sparse: no disk needed
            f.write(b"head")
            f.seek(BIG - 4)
            f.write(b"tail")
        if not self.on_disk:  # kept in the database as a worker host would: the API reads no disk
            store = Store(database_url)
            blob_store(self.cfg.data_dir, store).put_folder(previews_of(ex), folder, file_cap=FILE_CAP)
            store.close()
            self.big.unlink()
        self.app = create_app(self.cfg)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(self.app, log_level="warning", lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)

    @property
    def transfers(self) -> Transfers:
        return self.app.state.transfers

    def open_download(self, key: str = KEYS[0], name: str = "big.bin") -> tuple[socket.socket, int, bytes]:
        """A GET of a preview that reads the status line and then nothing more: a stalled reader
        (a small receive buffer, so the server soon has to wait for it). (socket, status, head)"""
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", self.port))
        s.sendall(f"GET /exercises/glm5_mis/previews/{name} HTTP/1.1\r\nHost: x\r\n"
                  f"Authorization: Bearer {key}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = s.recv(1024)
            assert chunk, head
            head += chunk
        return s, int(head.split(b" ", 2)[1]), head

    def open_files(self) -> int:
        """How many blobs of the big file are open: descriptors of this process on it (files),
        or the PostgreSQL store's blobs not yet closed."""
        if not self.on_disk:
            return self.app.state.blobs.open_reads
        n = 0
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                n += os.readlink(f"/proc/self/fd/{fd}") == str(self.big)
        return n

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


@pytest.fixture
def live(tmp_path, request, database_url):
    app = Live(tmp_path, database_url, **getattr(request, "param", {}))
    yield app
    app.close()


def settle(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def refused(live: Live, key: str) -> tuple[int, bytes, bytes]:
    """(status, head, body) of a download the server refuses (a short JSON answer)."""
    s, status, data = live.open_download(key)
    with s:
        head, _, body = data.partition(b"\r\n\r\n")
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:")))
        while len(body) < length:
            chunk = s.recv(4096)
            assert chunk
            body += chunk
    return status, head, body


@pytest.mark.parametrize("live", [{"client_transfers": 2, "max_transfers": 3}], indirect=True)
def test_downloads_in_flight_are_capped_per_client_and_in_all(live):
    socks = []
    try:
        for _ in range(2):
            s, status, _ = live.open_download(KEYS[0])
            socks.append(s)
            assert status == 200
        status, head, body = refused(live, KEYS[0])
        assert status == 429 and b'"too_many_transfers"' in body and b"retry-after" in head.lower()
        s, status, _ = live.open_download(KEYS[1])  # bob's are bob's own
        socks.append(s)
        assert status == 200
        status, head, body = refused(live, KEYS[1])
        assert status == 503 and b'"transfers_busy"' in body and b"retry-after" in head.lower()
        assert live.transfers.in_flight == 3 and live.open_files() == 3
        metrics = httpx.get(f"http://127.0.0.1:{live.port}/metrics").text
        assert "\njudge_transfers_in_flight 3\n" in metrics
        for s in socks[:2]:  # alice hangs up: her slots and files are given back
            s.close()
        assert settle(lambda: live.transfers.in_flight == 1 and len(live.transfers.active) == 1)
        assert live.open_files() == 1
        s, status, _ = live.open_download(KEYS[0])
        socks.append(s)
        assert status == 200
    finally:
        for s in socks:
            s.close()
    assert settle(lambda: live.transfers.in_flight == 0 and live.open_files() == 0)


def test_a_whole_download_is_the_file(live):
    r = httpx.get(f"http://127.0.0.1:{live.port}/exercises/glm5_mis/previews/big.bin",
                  headers={"Authorization": f"Bearer {KEYS[0]}"}, timeout=60)
    assert r.status_code == 200 and int(r.headers["content-length"]) == BIG == len(r.content)
    assert r.content[:4] == b"head" and r.content[-4:] == b"tail"
    assert r.headers["content-security-policy"] == "default-src 'none'; sandbox"
    assert r.headers["x-content-type-options"] == "nosniff"
    assert settle(lambda: live.transfers.in_flight == 0 and live.open_files() == 0)


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.parametrize("live", [{"client_transfers": 64, "max_transfers": 64}], indirect=True)
def test_forty_idle_readers_of_a_large_file_hold_little_memory(live):
    """The issue's case: 40 readers of a 29 MB artifact that read nothing. Read whole, that is
    1.1 GB in the API; streamed, each holds a chunk or two."""
    before = rss_mb()
    socks = []
    try:
        for _ in range(40):
            s, status, _ = live.open_download()
            socks.append(s)
            assert status == 200
        assert settle(lambda: live.transfers.in_flight == 40)
        time.sleep(0.5)  # every transfer has sent what the sockets take and waits for its reader
        grown = rss_mb() - before
    finally:
        for s in socks:
            s.close()
    assert grown < 40 * BIG / 2**20 / 8, f"{grown:.0f} MB for 40 idle readers"
    assert settle(lambda: live.transfers.in_flight == 0 and live.open_files() == 0)


def test_a_stalled_reader_loses_its_transfer(live, monkeypatch):
    monkeypatch.setattr(files, "STALL_S", 0.3)
    s, status, _ = live.open_download()
    try:
        assert status == 200
        assert settle(lambda: live.transfers.in_flight == 0), "the stalled transfer kept its slot"
        assert live.open_files() == 0
    finally:
        s.close()
