#!/usr/bin/env bash
# Installs llama-cpp-python into a virtualenv from a portable build, never from a wheel that pip
# cached with other compiler flags.
#
# A default build of llama.cpp compiles for the CPU it is built on (-march=native): the wheel then
# crashes on another machine (an AVX-512/AMX build on a CPU without them, or with AMX not granted).
# pip's wheel cache keys on the source archive only, so it would hand that wheel to any later
# install. Here the build targets every x86-64 CPU with AVX2 (GGML_NATIVE=OFF: SSE4.2, AVX, AVX2,
# FMA, F16C, BMI2; no AVX-512, AVX-VNNI or AMX), or the architecture's baseline elsewhere, and
# lands in a wheelhouse whose directory name is a hash of version, flags, Python and platform.
#
# usage: scripts/install-llama-cpp.sh VENV_PYTHON [VARIANT]
#   VARIANT: portable (default), or native: built into the wheelhouse and printed, never
#   installed (bench/chat_local_tokens.py compares the two on one machine)
set -euo pipefail

PYTHON=${1:?usage: install-llama-cpp.sh VENV_PYTHON [portable|native]}
VARIANT=${2:-portable}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VERSION=$(sed -n 's/.*"llama-cpp-python==\([0-9.]*\)".*/\1/p' "$ROOT/pyproject.toml" | head -1)
[ -n "$VERSION" ] || { echo "pyproject.toml pins no llama-cpp-python==X" >&2; exit 1; }

# mtmd (multimodal) is not used: leaving it out saves a third of the compile.
COMMON="-DLLAVA_BUILD=OFF -DGGML_BLAS=OFF -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF"
case "$VARIANT:$(uname -m)" in
  portable:x86_64)
    FLAGS="-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON \
-DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF \
-DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF \
-DGGML_AMX_BF16=OFF" ;;
  portable:*) FLAGS="-DGGML_NATIVE=OFF" ;;
  native:*) FLAGS="-DGGML_NATIVE=ON" ;;
  *) echo "unknown variant $VARIANT" >&2; exit 1 ;;
esac
CMAKE_ARGS="$COMMON $FLAGS"
PYTAG=$("$PYTHON" -c 'import sys, sysconfig; print(f"cp{sys.version_info[0]}{sys.version_info[1]}-{sysconfig.get_platform()}")')
# A native build also depends on the CPU it was made on.
CPU=""
[ "$VARIANT" = native ] && CPU=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
KEY=$(printf '%s\n' "$VERSION" "$CMAKE_ARGS" "$PYTAG" "$CPU" | sha256sum | cut -c1-16)
HOUSE=${AP_WHEELHOUSE:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-platform/wheelhouse}
DIR="$HOUSE/llama-cpp-python-$VERSION-$VARIANT-$KEY"
STAMP="$(dirname "$(dirname "$PYTHON")")/.llama-cpp-build"

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$DIR" ] \
   && "$PYTHON" -c "import importlib.metadata as m; assert m.version('llama-cpp-python') == '$VERSION'" 2>/dev/null; then
  exit 0
fi

if ! ls "$DIR"/llama_cpp_python-"$VERSION"-*.whl >/dev/null 2>&1; then
  echo "Building llama-cpp-python $VERSION ($VARIANT: $FLAGS); about 5 minutes on 2 cores"
  TMP=$(mktemp -d "$HOUSE.tmp.XXXXXX" 2>/dev/null || { mkdir -p "$HOUSE"; mktemp -d "$HOUSE.tmp.XXXXXX"; })
  trap 'rm -rf "$TMP"' EXIT
  CMAKE_ARGS="$CMAKE_ARGS" FORCE_CMAKE=1 "$PYTHON" -m pip wheel --quiet --no-deps --no-cache-dir \
    --no-binary llama-cpp-python "llama-cpp-python==$VERSION" -w "$TMP"
  printf 'version=%s\nvariant=%s\ncmake_args=%s\npython=%s\n' "$VERSION" "$VARIANT" "$CMAKE_ARGS" "$PYTAG" \
    > "$TMP/BUILD-FLAGS"
  mkdir -p "$HOUSE"
  rm -rf "$DIR"
  mv "$TMP" "$DIR"
  trap - EXIT
fi

if [ "$VARIANT" = native ]; then
  ls "$DIR"/llama_cpp_python-"$VERSION"-*.whl
  exit 0
fi

"$PYTHON" -m pip install --quiet --force-reinstall --no-deps --no-index --find-links "$DIR" \
  "llama-cpp-python==$VERSION"
# Its own dependencies (numpy, jinja2, diskcache, typing-extensions) from the index as usual.
"$PYTHON" -m pip install --quiet --only-binary llama-cpp-python --find-links "$DIR" \
  "llama-cpp-python==$VERSION"
echo "$DIR" > "$STAMP"
