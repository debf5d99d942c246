#!/usr/bin/env bash
# The GPU check, one command on a CUDA machine with PyTorch and Triton already
# installed and no network, bounded to 6 minutes: the build, the GPU tests
# (stopped at GPU_TESTS_TIMEOUT, 90 s) and the measurements (stopped at
# GPU_CHECK_TIMEOUT, 210 s, printing the parts measured so far):
#
#   bash bench/gpu_check.sh                 # from the repository root
#
# 1. builds the library and the Python extension with CMake directly (no pip,
#    no build isolation, nothing downloaded: the machine's own nanobind, its
#    Python's headers, and nlohmann-json's headers from .gpu/prefix when the
#    system has none; bench/gpu_prepare.sh makes .gpu/ where there is network);
# 2. installs diffusers from .gpu/wheels when the machine lacks it (part c);
# 3. runs the GPU-marked tests (pytest -m gpu) and keeps their summary line;
# 4. prints one JSON line per part as it ends and the whole last (bench/gpu_check.py): (band) one 25% band, dense
#    SDPA flash and cuDNN against FlexAttention with create_block_mask's
#    BlockMask and tilesplash; (a) Wan 2.1 480p / 720p dense SDPA against
#    tilesplash 25% routed; (b) BlockMask building from plans against
#    create_block_mask; (c) one Wan 2.1 1.3B block at 480p and 720p, native
#    against enable(), with the compiles of a 10-step run; (t) tile-granular
#    masks: the band and the routed 480p layer at granularity "tile" against
#    "token"; the kernel options chosen. With $OUT set, the JSON and the logs are also written there.
#
# Environment: PYTHON (default python3), BUILD (default build-gpu),
# GPU_CHECK_SKIP (e.g. "c" or "band,b"), GPU_CHECK_ARGS (more arguments for gpu_check.py,
# e.g. "--device cpu --tiny" for a dry run on a machine without a GPU).
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
py=${PYTHON:-python3}
build=${BUILD:-build-gpu}
logs=${OUT:-/tmp/gpu_check}
mkdir -p "$logs"
say() { printf 'gpu_check: %s\n' "$*" >&2; }
# Stops before the measurements still print one JSON object, naming the stage.
stop() {
  say "$2"
  printf '{"error": "%s", "stage": "%s", "seconds": %d}\n' "${2//\"/\'}" "$1" \
    "$(( $(date +%s) - started ))" | tee "$logs/gpu_check.json"
  exit 2
}
started=$(date +%s)

# -- 1. build ---------------------------------------------------------------------------------
# The build's tools from .gpu/build-wheels where the machine lacks them (PyTorch alone).
tools=/tmp/gpu_check_tools
if ! command -v cmake >/dev/null || ! "$py" -m nanobind --cmake_dir >/dev/null 2>&1; then
  if ls .gpu/build-wheels/*.whl >/dev/null 2>&1; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --target "$tools" \
      .gpu/build-wheels/*.whl >"$logs/tools.log" 2>&1 || say "installing the build tools failed (log: $logs/tools.log)"
    export PATH="$tools/bin:$PATH" PYTHONPATH="$tools${PYTHONPATH:+:$PYTHONPATH}"
    say "build tools from .gpu/build-wheels"
  fi
  command -v cmake >/dev/null || stop build "cmake is missing: run bench/gpu_prepare.sh where there is network and carry .gpu"
  "$py" -m nanobind --cmake_dir >/dev/null 2>&1 || stop build "nanobind is missing: run bench/gpu_prepare.sh where there is network and carry .gpu"
fi
prefix=()
if ! echo '#include <nlohmann/json.hpp>' | c++ -x c++ -std=c++20 -fsyntax-only - 2>/dev/null; then
  if [ -d .gpu/prefix/include/nlohmann ]; then
    prefix=(-DCMAKE_PREFIX_PATH="$repo/.gpu/prefix")
    say "nlohmann-json from .gpu/prefix"
  else
    stop build "nlohmann-json is missing: run bench/gpu_prepare.sh where there is network and carry .gpu"
  fi
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
command -v ccache >/dev/null && generator+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
say "building the extension with $($py --version 2>&1) into $build"
if ! cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DTILESPLASH_BUILD_TESTS=OFF -DTILESPLASH_BUILD_BENCH=OFF -DTILESPLASH_BUILD_TOOLS=OFF \
    -DTILESPLASH_BUILD_PYTHON=ON -DPython_EXECUTABLE="$(command -v "$py")" "${prefix[@]}" \
    >"$logs/cmake.log" 2>&1; then
  tail -30 "$logs/cmake.log" >&2
  stop build "cmake failed (log: $logs/cmake.log)"
fi
if ! grep -q "Python extension: building" "$logs/cmake.log"; then
  grep "Python extension" "$logs/cmake.log" >&2
  stop build "the Python extension cannot be built here (log: $logs/cmake.log)"
fi
if ! cmake --build "$build" -j "$(nproc)" --target tilesplash_python >"$logs/build.log" 2>&1; then
  tail -30 "$logs/build.log" >&2
  stop build "the build failed (log: $logs/build.log)"
fi
export PYTHONPATH="$repo/$build/python${PYTHONPATH:+:$PYTHONPATH}"
say "built in $(( $(date +%s) - started )) s"

# -- 2. diffusers -----------------------------------------------------------------------------
if ! "$py" -c "import diffusers" 2>/dev/null; then
  if ls .gpu/wheels/*.whl >/dev/null 2>&1; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --target /tmp/gpu_check_site \
      .gpu/wheels/*.whl && export PYTHONPATH="$PYTHONPATH:/tmp/gpu_check_site"
  fi
  "$py" -c "import diffusers" 2>/dev/null || {
    say "diffusers is missing (carry .gpu from bench/gpu_prepare.sh): part (c) skipped"
    GPU_CHECK_SKIP="${GPU_CHECK_SKIP:+$GPU_CHECK_SKIP,}c"
  }
fi
"$py" -c "import tilesplash, tilesplash.flex; print('gpu_check: tilesplash', tilesplash.__version__)" >&2 ||
  stop import "import tilesplash failed"

# -- 3. the GPU-marked tests ------------------------------------------------------------------
timeout "${GPU_TESTS_TIMEOUT:-90}" "$py" -m pytest -q -p no:cacheprovider -m gpu tests/python -rs \
  >"$logs/pytest_gpu.log" 2>&1
tests_rc=$?  # 124: stopped at its time limit
summary=$(grep -E "(passed|failed|skipped|error|no tests ran)" "$logs/pytest_gpu.log" | tail -1)
if [ "$tests_rc" -eq 124 ]; then
  # Stopped at its cap before pytest's summary: say so, with what it had printed.
  summary="stopped at ${GPU_TESTS_TIMEOUT:-90} s; last output: $(tail -c 300 "$logs/pytest_gpu.log" | tr '\n"' ' ')"
fi
say "gpu tests (rc $tests_rc): $summary"
if [ "$tests_rc" -ne 0 ] && [ "$tests_rc" -ne 5 ]; then
  grep -E "^(FAILED|ERROR)|Error" "$logs/pytest_gpu.log" | head -20 >&2
fi

# -- 4. the measurements ----------------------------------------------------------------------
# shellcheck disable=SC2086
# Each part's JSON line is printed as the part ends (tee), the whole on the last line.
timeout "${GPU_CHECK_TIMEOUT:-210}" "$py" bench/gpu_check.py --pytest-summary "rc $tests_rc: $summary" \
  --skip "${GPU_CHECK_SKIP:-}" --partial "$logs/gpu_check.partial.json" ${GPU_CHECK_ARGS:-} \
  | tee "$logs/gpu_check.jsonl"
rc=${PIPESTATUS[0]}
if [ "$rc" -eq 0 ]; then
  tail -1 "$logs/gpu_check.jsonl" >"$logs/gpu_check.json"
else
  say "bench/gpu_check.py stopped (rc $rc); the parts measured before it:"
  cat "$logs/gpu_check.partial.json" 2>/dev/null || echo '{}'
  echo
fi
say "done in $(( $(date +%s) - started )) s"
exit "$rc"
