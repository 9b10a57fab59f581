# The two set-up commands: `make serve` and `make test`. Both install what they need first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Inside node_modules: `npm ci` wipes it, and deleting node_modules forces a reinstall.
NODE_STAMP := tests/node/node_modules/.installed
# The CPU build on these machines, not the CUDA wheels; pyproject.toml pins the same.
TORCH := torch==2.13.0

.PHONY: serve test install lint worker bench fuzz constraints

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

# The `ai` npm package whose own parser the stream tests run under Node (>= 18).
$(NODE_STAMP): tests/node/package.json tests/node/package-lock.json
	npm ci --prefix tests/node --no-audit --no-fund
	touch $(NODE_STAMP)

install: $(STAMP)

# `make serve PORT=8080` (or HOST=0.0.0.0) serves elsewhere; AP_PORT and AP_HOST work as well.
# The server prints its address and how to get a token once it listens.
serve: $(STAMP)
	@echo "==> serve: starting PostgreSQL (the embedded one unless AP_DATABASE_URL is set), migrating the schema, then HTTP"
	$(BIN)/agent-platform serve$(if $(HOST), --host $(HOST))$(if $(PORT), --port $(PORT))

lint: $(STAMP)
	$(BIN)/ruff check src tests migrations bench
	$(BIN)/ruff format --check src tests migrations bench
	$(BIN)/mypy src tests/fakes
	$(BIN)/lint-imports

test: lint $(NODE_STAMP)
	$(BIN)/pytest -q -p no:cacheprovider -n 2 --dist loadgroup

# One after the other (they measure the same 2 cores); kb_endpoints, skills and spend need wrk
# (apt-get install wrk). Each writes its own section of BENCHMARKS.md, pass or fail, so a miss does
# not stop the rest.
bench: $(STAMP)
	-$(BIN)/python bench/kb_endpoints.py
	-$(BIN)/python bench/kb_profile.py
	-$(BIN)/python bench/ingestion.py
	-$(BIN)/python bench/search.py
	-$(BIN)/python bench/search_scale.py
	-$(BIN)/python bench/chat_stream.py
	-$(BIN)/python bench/chat_local_tokens.py
	-$(BIN)/python bench/skills.py
	-$(BIN)/python bench/members.py
	-$(BIN)/python bench/spend.py
	-$(BIN)/python bench/soak.py

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
