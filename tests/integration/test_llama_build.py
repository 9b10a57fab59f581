"""The installed llama.cpp runs on any x86-64 CPU with AVX2: the build the project installs
(`scripts/install-llama-cpp.sh`) is checked here, not hoped for. A build compiled with
`-march=native` on a CPU with AVX-512 or AMX holds their instructions and dies elsewhere."""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from pathlib import Path

import llama_cpp
import pytest

from adapters.local_model.cpu_features import (
    PORTABLE_X86,
    X86_FLAGS,
    compiled_features,
    unsupported_features,
)

x86_only = pytest.mark.skipif(platform.machine() != "x86_64", reason="x86-64 build flags")
LIBRARIES = sorted((Path(llama_cpp.__file__).parent / "lib").glob("lib*.so"))
# AVX-512 uses the zmm registers (and k masks); AMX its tile instructions.
BEYOND_AVX2 = re.compile(r"%zmm\d|ldtilecfg|tileloadd|tilestored|tdpb[su][su]d|tdpbf16ps")


@x86_only
def test_the_build_reports_only_instructions_every_avx2_cpu_has():
    features = compiled_features()

    assert "AVX2" in features
    assert {f for f in features if f in X86_FLAGS} <= PORTABLE_X86
    assert unsupported_features(features) == []


@x86_only
@pytest.mark.skipif(shutil.which("objdump") is None, reason="binutils' objdump is needed")
@pytest.mark.parametrize("library", LIBRARIES, ids=lambda p: p.name)
def test_no_library_holds_an_avx512_or_amx_instruction(library):
    listing = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", str(library)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout

    assert "%ymm" in listing or "ggml-cpu" not in library.name
    found = BEYOND_AVX2.search(listing)
    assert found is None, f"{library.name} uses {found.group(0) if found else ''}"


def test_a_build_for_instructions_the_cpu_lacks_is_named():
    avx2_cpu = {"pni", "ssse3", "avx", "avx2", "fma", "f16c", "bmi2"}
    native_build = PORTABLE_X86 | {"AVX512", "AVX512_VNNI", "AMX_INT8"}

    missing = unsupported_features(native_build, avx2_cpu)

    if platform.machine() == "x86_64":
        assert missing == ["AMX_INT8", "AVX512", "AVX512_VNNI"]
    else:
        assert missing == []
