#!/usr/bin/env bash
# Run HERE (a machine with network and this repository's build set-up) before
# bench/gpu_check.sh travels to a GPU machine that has no network. It fills
# .gpu/ (git-ignored) with what such a machine lacks and cannot download:
#   .gpu/prefix/   nlohmann-json's headers and CMake package (header-only; the
#                  C++ library needs it, the GPU image does not ship it)
#   .gpu/wheels/   diffusers (pure Python) and importlib_metadata, for part (c)
#   .gpu/build-wheels/  nanobind, cmake and ninja, for a machine without them
# Then give .gpu to the device call's `carry`:
#   run(command="bash bench/gpu_check.sh", carry=[".gpu"], timeout_s=540)
set -euo pipefail
# Under pipefail a reader that stops early (grep -m1, head) kills the writer with
# SIGPIPE and the script with 141 and no word: no such pipelines here, and any
# failure names its line.
trap 'echo "gpu_prepare: failed (status $?) at line $LINENO: $BASH_COMMAND" >&2' ERR
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$repo/.gpu"
mkdir -p "$out/prefix/include" "$out/prefix/share/cmake" "$out/wheels"
# The header the compiler finds: the preprocessor's include trace, read whole.
trace=$(echo '#include <nlohmann/json.hpp>' | c++ -x c++ -E -H - 2>&1 >/dev/null || true)
header=$(awk '/nlohmann\/json\.hpp$/ { print $2; exit }' <<<"$trace")
if [ -z "$header" ]; then
  echo "gpu_prepare: nlohmann/json.hpp not found here (scripts/setup installs nlohmann-json3-dev)" >&2
  exit 1
fi
cp -r "$(dirname "$header")" "$out/prefix/include/"
configs=$(find /usr/share/cmake /usr/lib/cmake /usr/local/share/cmake /usr/local/lib/cmake \
  -name nlohmann_jsonConfig.cmake 2>/dev/null || true)
config=$(awk 'NR == 1' <<<"$configs")
if [ -z "$config" ]; then
  echo "gpu_prepare: nlohmann_jsonConfig.cmake not found here (scripts/setup installs nlohmann-json3-dev)" >&2
  exit 1
fi
cp -r "$(dirname "$config")" "$out/prefix/share/cmake/"
py="${PYTHON:-$repo/.venv/bin/python}"
[ -x "$py" ] || py=python3
# pure-Python wheels: the same files for any Python 3 on any platform
"$py" -m pip download --quiet --no-deps --only-binary=:all: -d "$out/wheels" \
  "diffusers==0.42.1" "importlib_metadata"
# The build's tools, for a GPU machine with PyTorch alone (issue 34): nanobind (pure
# Python, with its C++ sources), CMake and ninja (py3-none-manylinux x86_64 binaries).
mkdir -p "$out/build-wheels"
"$py" -m pip download --quiet --no-deps --only-binary=:all: -d "$out/build-wheels" \
  --platform manylinux_2_17_x86_64 --python-version 3.12 --implementation py --abi none \
  "nanobind" "cmake" "ninja"
du -sh "$out"
echo "gpu_prepare: .gpu is ready; carry it with bench/gpu_check.sh"
