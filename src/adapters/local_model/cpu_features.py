"""Whether the installed llama.cpp build runs on this CPU.

llama.cpp reports the instruction sets it was compiled for (`llama_print_system_info`); a
build made with `-march=native` on another machine may use some this CPU lacks, and then dies
on its first matrix product. `make install` checks this once (`python -m
adapters.local_model.cpu_features`), and the local-model runner checks it before it loads a model.
"""

from __future__ import annotations

import platform
import sys
from pathlib import Path

# ggml's feature names and the /proc/cpuinfo flags they need (x86-64).
X86_FLAGS = {
    "SSE3": "pni",
    "SSSE3": "ssse3",
    "AVX": "avx",
    "AVX_VNNI": "avx_vnni",
    "AVX2": "avx2",
    "F16C": "f16c",
    "FMA": "fma",
    "BMI2": "bmi2",
    "AVX512": "avx512f",
    "AVX512_VBMI": "avx512vbmi",
    "AVX512_VNNI": "avx512_vnni",
    "AVX512_BF16": "avx512_bf16",
    "AMX_INT8": "amx_int8",
}
# What the project's portable x86-64 build may use: any CPU with AVX2 has all of these.
PORTABLE_X86 = frozenset({"SSE3", "SSSE3", "AVX", "AVX2", "F16C", "FMA", "BMI2"})


def compiled_features() -> set[str]:
    """The instruction-set features the installed llama.cpp CPU backend was built with."""
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode("utf-8", "replace")
    features: set[str] = set()
    for part in info.split("|"):
        name, _, value = part.partition("=")
        name = name.split(":")[-1].strip()
        if name and value.strip() not in ("", "0"):
            features.add(name)
    return features


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str] | None:
    """This CPU's flags, or None where /proc/cpuinfo does not tell."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return None


def unsupported_features(
    features: set[str] | None = None, flags: set[str] | None = None
) -> list[str]:
    """The build's x86 features this CPU lacks (empty when all is well or unknowable)."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return []
    flags = flags if flags is not None else cpu_flags()
    if flags is None:
        return []
    features = features if features is not None else compiled_features()
    return sorted(f for f in features if f in X86_FLAGS and X86_FLAGS[f] not in flags)


def main() -> int:
    features = compiled_features()
    missing = unsupported_features(features)
    known = sorted(f for f in features if f in X86_FLAGS)
    if missing:
        print(
            f"llama-cpp-python was built for {', '.join(missing)}, which this CPU lacks: "
            "remove .venv and run make install again",
            file=sys.stderr,
        )
        return 1
    beyond = sorted(set(known) - PORTABLE_X86) if platform.machine() == "x86_64" else []
    note = f" (not portable: {', '.join(beyond)})" if beyond else ""
    print(f"llama.cpp build uses {', '.join(known) or 'the baseline'}: fits this CPU{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
