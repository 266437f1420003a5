"""judge.service.pages without a browser: the sign-in cookie, CSRF, redirects, the CSP, the
pages beside the API's JSON routes, and each learner seeing only their own submissions."""

from __future__ import annotations

import re
import threading

import pytest
from fastapi.testclient import TestClient

from judge.models import Artifact, Verdict
from judge.service.app import create_app
from judge.service.config import Config
from judge.service.guard import client_id
from judge.service.pages import SESSION_SECONDS, Signer, safe_next, status_of

KEYS = ("page-key-alice", "page-key-bob")
HTML = {"Accept": "text/html,application/xhtml+xml"}


@pytest.fixture
def app(tmp_path):
    cfg = Config(database_url=f"sqlite:///{tmp_path / 'judge.db'}", api_keys=KEYS, workers=0,
                 data_dir=tmp_path / "data", exercises=("glm5_mis",))
    with TestClient(create_app(cfg), base_url="http://127.0.0.1") as client:
        yield client


def csrf_of(html: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', html).group(1)


def sign_in(client, key=KEYS[0], next_="/"):
    form = client.get("/signin")
    return client.post("/signin", data={"csrf": csrf_of(form.text), "key": key, "next": next_},
                       follow_redirects=False)


def test_signed_out_pages_redirect_to_sign_in_and_the_api_still_answers_401(app):
    r = app.get("/exercises/glm5_mis", headers=HTML, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/signin?next=%2Fexercises%2Fglm5_mis"
    r = app.get("/exercises/glm5_mis", follow_redirects=False)
    assert r.status_code == 401 and r.json()["error"] == "unauthorized"


def test_sign_in_sets_a_signed_httponly_strict_cookie(app):
    r = sign_in(app, next_="/exercises/glm5_mis")
    assert r.status_code == 303 and r.headers["location"] == "/exercises/glm5_mis"
    cookie = next(c for c in r.headers.get_list("set-cookie") if c.startswith("judge_session="))
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert KEYS[0] not in r.headers["location"]
    page = app.get("/exercises/glm5_mis", headers=HTML)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "<math" in page.text and 'id="editor"' in page.text
    api = app.get("/exercises/glm5_mis")  # the same path without Accept: text/html is the API's
    assert api.headers["content-type"] == "application/json" and api.json()["slug"] == "glm5_mis"


@pytest.mark.parametrize("key, status", [("wrong-key", 401), ("", 401)])
def test_a_wrong_key_is_refused(app, key, status):
    r = sign_in(app, key=key)
    assert r.status_code == status and "not valid" in r.text
    assert not any(c.startswith("judge_session=") for c in r.headers.get_list("set-cookie"))


def test_sign_in_needs_the_forms_csrf_token(app):
    app.get("/signin")
    r = app.post("/signin", data={"csrf": "forged", "key": KEYS[0]}, follow_redirects=False)
    assert r.status_code == 403


def test_unsafe_requests_with_the_cookie_need_the_csrf_token(app):
    sign_in(app)
    body = {"exercise": "glm5_mis", "code": "x = 1\n", "mode": "run"}
    r = app.post("/submit", json=body)
    assert r.status_code == 403 and r.json()["error"] == "csrf"
    token = re.search(r'name="csrf-token" content="([^"]+)"', app.get("/", headers=HTML).text).group(1)
    r = app.post("/submit", json=body, headers={"X-CSRF-Token": token})
    assert r.status_code == 202, r.text
    # a bearer key needs no token (no cookie is involved)
    fresh = TestClient(app.app, base_url="http://127.0.0.1")
    r = fresh.post("/submit", json=body, headers={"Authorization": f"Bearer {KEYS[1]}"})
    assert r.status_code == 202


def test_sign_out_clears_the_cookie(app):
    sign_in(app)
    page = app.get("/", headers=HTML)
    assert app.post("/signout", data={"csrf": "forged"}).status_code == 403
    r = app.post("/signout", data={"csrf": csrf_of(page.text)}, follow_redirects=False)
    assert r.status_code == 303
    assert any(c.startswith("judge_session=;") and "Max-Age=0" in c for c in r.headers.get_list("set-cookie"))
    assert app.get("/", headers=HTML, follow_redirects=False).status_code == 303


def test_every_response_carries_the_csp(app):
    for r in (app.get("/signin"), app.get("/healthz"), app.get("/static/katex-render.cjs"),
              app.get("/exercises")):
        csp = r.headers["content-security-policy"]
        assert "script-src 'self';" in csp and "'unsafe-inline'" not in csp and "'unsafe-eval'" not in csp
        assert r.headers["x-content-type-options"] == "nosniff"
    assert "frame-ancestors 'none'" in app.get("/signin").headers["content-security-policy"]


def test_api_calls_get_no_cookie(app):
    r = app.get("/exercises", headers={"Authorization": f"Bearer {KEYS[0]}"})
    assert r.status_code == 200 and "set-cookie" not in r.headers
    assert "'nonce-" not in r.headers["content-security-policy"]


def test_the_style_nonce_is_fresh_per_response_and_in_the_page(app):
    sign_in(app)
    a, b = app.get("/exercises/glm5_mis", headers=HTML), app.get("/exercises/glm5_mis", headers=HTML)
    na = re.search(r"'nonce-([^']+)'", a.headers["content-security-policy"]).group(1)
    nb = re.search(r"'nonce-([^']+)'", b.headers["content-security-policy"]).group(1)
    assert na != nb and f'name="style-nonce" content="{na}"' in a.text


def test_each_learner_sees_only_their_own_history_and_code(app):
    store = app.app.state.store
    sid = store.add(client_id(KEYS[0]), "glm5_mis", "run", "print('alice</script>')\n", queue_max=100)
    sign_in(app, KEYS[0])
    hist = app.get("/pages/exercises/glm5_mis/history").json()
    assert [h["id"] for h in hist] == [sid]
    assert app.get(f"/pages/submissions/{sid}/code").text == "print('alice</script>')\n"
    bob = TestClient(app.app, base_url="http://127.0.0.1")
    sign_in(bob, KEYS[1])
    assert bob.get("/pages/exercises/glm5_mis/history").json() == []
    assert bob.get(f"/pages/submissions/{sid}/code").status_code == 404
    assert bob.get(f"/submissions/{sid}").status_code == 404
    assert bob.get("/pages/submissions/not-an-id/code").status_code == 404


def test_the_list_shows_each_exercises_status(app):
    sign_in(app)
    page = app.get("/", headers=HTML).text
    assert 'data-slug="glm5_mis"' in page and 'data-status="not tried"' in page
    assert status_of(set()) == "not tried"
    assert status_of({("run", "accepted")}) == "rejected"  # a Run is not an acceptance
    assert status_of({("submit", "rejected"), ("submit", "accepted")}) == "accepted"


def test_docs_serve_swagger_from_local_assets(app):
    r = app.get("/docs")
    assert r.status_code == 200
    assert 'src="/static/dist/swagger/swagger-ui-bundle.js"' in r.text and "http" not in r.text.split("<body>")[1]


@pytest.mark.parametrize("target, expected", [("/exercises/x", "/exercises/x"), ("//evil.example/", "/"),
                                              ("https://evil.example/", "/"), ("/\\evil", "/"), (None, "/")])
def test_next_is_a_path_of_this_site(target, expected):
    assert safe_next(target) == expected


def test_the_session_cookie_is_signed_and_expires():
    signer = Signer(b"s" * 48, KEYS)
    cookie = signer.session(KEYS[0], now=1000.0)
    assert signer.key_of(cookie, now=1000.0 + 60) == KEYS[0]
    assert signer.key_of(cookie, now=1000.0 + SESSION_SECONDS + 1) is None
    body, mac = cookie.rsplit(".", 1)
    assert signer.key_of(body + "." + mac[:-2] + "AA", now=1001.0) is None
    assert Signer(b"t" * 48, KEYS).key_of(cookie, now=1001.0) is None  # another secret
    assert Signer(b"s" * 48, KEYS[1:]).key_of(cookie, now=1001.0) is None  # a key no longer served
    assert signer.csrf_ok("nonce-1234567890abcdef", signer.csrf("nonce-1234567890abcdef"))
    assert not signer.csrf_ok("nonce-1234567890abcdef", signer.csrf("other-1234567890abcdef"))


def test_drawn_answers_once_the_plots_are_kept_and_only_to_the_owner(app):
    """The page's one request for the plots: it waits while the verdict's plots are pending and
    answers the document that lists them once the worker keeps them; another learner gets 404."""
    store = app.app.state.store
    sid = store.add(client_id(KEYS[0]), "glm5_mis", "run", "x = 1\n", queue_max=100)
    store.claim("w1")
    early = Verdict(exercise="glm5_mis", verdict="accepted", mode="run", seed=3, artifacts_pending=True)
    store.finish(sid, early.model_dump_json(), "accepted", worker="w1")
    late = early.model_copy(update={"artifacts_pending": False, "artifacts": [Artifact(
        name="metrics.json", path=f"/submissions/{sid}/artifacts/metrics.json", size=2,
        media_type="application/json")]})
    kept = threading.Timer(0.5, store.add_artifacts, (sid, late.model_dump_json()), {"worker": "w1"})
    kept.start()
    try:
        r = app.get(f"/pages/submissions/{sid}/drawn", headers={"Authorization": f"Bearer {KEYS[0]}"})
    finally:
        kept.join()
    assert r.status_code == 200, r.text
    v = r.json()["verdict"]
    assert v["artifacts_pending"] is False and [a["name"] for a in v["artifacts"]] == ["metrics.json"]
    again = app.get(f"/pages/submissions/{sid}/drawn", headers={"Authorization": f"Bearer {KEYS[0]}"})
    assert again.status_code == 200 and again.json() == r.json()  # drawn already: at once
    other = app.get(f"/pages/submissions/{sid}/drawn", headers={"Authorization": f"Bearer {KEYS[1]}"})
    assert other.status_code == 404
