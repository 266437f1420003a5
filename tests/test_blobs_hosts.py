"""An API node serves what a worker host produced, on one PostgreSQL and no shared disk: the
reference's previews (built by the worker host) and a grading's artifacts (kept by the worker
that graded it), including views the API node draws on request and keeps in the database for
every node. Neither host's data dir holds any of them (the worker's scratch folder is gone)."""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

from judge.service.artifacts import blob_store
from judge.service.blobs import artifacts_owner
from judge.service.catalog import load_catalog, preview_digest, previews_of
from judge.service.config import Config
from judge.service.store import Store

# the worker host of tests/test_pg_hosts.py (pytest's importlib mode puts no test folder on sys.path)
_spec = importlib.util.spec_from_file_location("pg_hosts_helpers", Path(__file__).with_name("test_pg_hosts.py"))
_hosts = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_hosts)
REF, WorkerHost = _hosts.REF, _hosts.WorkerHost


def files_under(folder) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def test_an_api_node_serves_another_host_s_artifacts_and_previews(postgres, service_factory, tmp_path):
    url = postgres.fresh_database()
    api = service_factory(tmp_path / "api", workers=0, JUDGE_DATABASE_URL=url).start()
    worker = WorkerHost(tmp_path / "worker", url)
    store = Store(url)
    try:
        worker.wait_ready()
        with api.client() as c:
            deadline = time.monotonic() + 120
            while not (d := c.get("/exercises/glm5_mis").json())["previews_ready"]:
                assert time.monotonic() < deadline, f"previews were not built:\n{worker.log()}"
                time.sleep(0.2)
            previews = {p["name"]: p for p in d["previews"]}
            assert {"metrics.json", "bandit.vl.json"} <= set(previews)
            for p in previews.values():
                r = c.get(p["url"])
                assert r.status_code == 200 and len(r.content) == p["size"], p
            svg = c.get("/exercises/glm5_mis/previews/bandit.svg")  # drawn by the API node, then kept
            assert svg.status_code == 200 and svg.content.startswith(b"<?xml")

            r = c.post("/submit", params={"wait": 60}, json={"exercise": "glm5_mis", "code": REF, "mode": "run"})
            assert r.status_code == 200 and r.json()["verdict"]["verdict"] == "accepted", r.text
            sid = r.json()["id"]
            f = c.get(f"/submissions/{sid}/artifacts/metrics.json")  # waits while the plots are drawn
            assert f.status_code == 200 and json.loads(f.content)
            doc = c.get(f"/submissions/{sid}").json()
            arts = {a["name"]: a for a in doc["verdict"]["artifacts"]}
            assert not doc["verdict"]["artifacts_pending"] and {"metrics.json", "bandit.vl.json"} <= set(arts)
            for a in arts.values():
                got = c.get(a["path"])
                assert got.status_code == 200 and len(got.content) == a["size"], a
                assert got.headers["content-type"].startswith(a["media_type"])
            png = c.get(f"/submissions/{sid}/artifacts/bandit-dark.png")
            assert png.status_code == 200 and png.content.startswith(b"\x89PNG")
            assert c.get(f"/submissions/{sid}/artifacts/nosuch.png").status_code == 404

        # kept once, in the database, for every node: not on either host's disk
        cfg = Config(database_url=url, data_dir=tmp_path / "none", exercises=("glm5_mis",))
        blobs = blob_store(cfg.data_dir, store)
        ex = load_catalog(cfg)["glm5_mis"]
        assert ("bandit.svg", len(svg.content)) in blobs.list(previews_of(ex))
        assert ("bandit-dark.png", len(png.content)) in blobs.list(artifacts_owner(sid))
        assert dict(blobs.list(artifacts_owner(sid)))["metrics.json"] == arts["metrics.json"]["size"]
        assert files_under(api.root / "data" / "artifacts") == []
        assert files_under(api.root / "data" / "previews") == []
        assert files_under(tmp_path / "worker" / "data" / "artifacts") == []  # its scratch went too
        assert not (tmp_path / "worker" / "data" / "previews" / "glm5_mis" / preview_digest(ex)).exists()
    finally:
        worker.stop()
        api.stop()
        store.close()
