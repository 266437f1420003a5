# Two commands on a fresh machine: `make serve` and `make test`.
PYTHON ?= /usr/bin/python3
# The CPU build of torch (a bare `torch` may pull a multi-GB CUDA build). Override elsewhere, e.g.
#   make test TORCH_SPEC=torch==2.13.0+cpu PIP_EXTRA="--extra-index-url https://download.pytorch.org/whl/cpu"
TORCH_SPEC ?= torch==2.13.0
PIP_EXTRA ?=
# The sandbox drops to an unprivileged uid when run as root, and that uid must be able to read the
# interpreter's packages: when this checkout is not reachable for it (e.g. under /root), the
# virtual environment goes to /var/lib/judge instead.
VENV ?= $(shell sh scripts/venv-dir.sh)
PY := $(VENV)/bin/python
STAMP := $(VENV)/.judge-installed
WEB := judge/service/static/dist/page.js

.PHONY: setup serve test fuzz bench clean

setup: $(STAMP) $(WEB)

# the learner page's bundle (scripts/build-web.sh: npm ci of package-lock.json, then esbuild);
# Debian's nodejs and npm when missing
$(WEB): package.json package-lock.json scripts/build-web.sh $(wildcard judge/service/static/src/*)
	command -v npm >/dev/null || [ "$$(id -u)" != 0 ] || (apt-get update && apt-get install -y nodejs npm)
	sh scripts/build-web.sh

$(STAMP): pyproject.toml Makefile
	@# the browser test of report.html (tests/test_report_html.py) drives Debian's chromium
	command -v chromium >/dev/null || [ "$$(id -u)" != 0 ] || (apt-get update && apt-get install -y chromium)
	@# the store's tests run on a real PostgreSQL too (judge/service/pg_local.py starts Debian's server)
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || \
		(apt-get update && apt-get install -y postgresql)
	@# the multi-host tests put hosts in network namespaces (tests/test_netns_hosts.py: iproute2's ip)
	command -v ip >/dev/null || [ "$$(id -u)" != 0 ] || (apt-get update && apt-get install -y iproute2)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q $(PIP_EXTRA) "$(TORCH_SPEC)"
	$(PY) -m pip install -q $(PIP_EXTRA) -e ".[test]" "$(TORCH_SPEC)"
	touch $(STAMP)

# make serve PORT=8080 HOST=0.0.0.0 (default 127.0.0.1:8000)
HOST ?= 127.0.0.1
PORT ?= 8000
serve: setup
	$(PY) -m judge.cli serve --host $(HOST) --port $(PORT)

test: setup
	$(PY) -m pytest -q --maxfail=5 -p no:randomly tests exercises; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

# The boundary fuzzer alone, for longer than `make test` runs it (a few seconds there): raw
# frames written by a sandboxed child, FUZZ_EXAMPLES of them, fresh random ones each run.
FUZZ_EXAMPLES ?= 2000
fuzz: setup
	JUDGE_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) JUDGE_FUZZ_RANDOM=1 $(PY) -m pytest -q -p no:randomly \
		tests/test_attacks.py -k TestFuzz

bench: setup
	$(PY) -m judge.service.bench
	@# dispatch latency the store adds, SQLite vs PostgreSQL (a throwaway local cluster)
	$(PY) -m judge.service.bench_dispatch
	@# throughput with one and with two worker hosts (network namespaces: needs root)
	$(PY) -m judge.service.bench_hosts
	$(PY) -m judge.service.bench_page  # the learner page's weight and speed, in chromium
	$(PY) -m judge.service.bench_page --hosts  # the same with an API-only node beside a judge worker (PostgreSQL)

clean:
	rm -rf .venv judge-out bench-results.json
