# Cross-compiling for 64-bit ARM Linux with Debian's toolchain
# (g++-aarch64-linux-gnu) and running the results under qemu-user:
#
#   cmake -S . -B build-aarch64 --toolchain cmake/aarch64-linux-gnu.cmake \
#     -DGTest_DIR=... -Dnlohmann_json_DIR=...   (see .ci/aarch64)
#
# Libraries and headers come only from the target's root
# (/usr/aarch64-linux-gnu) or from a package directory given explicitly, never
# from the build machine's /usr. ctest and gtest_discover_tests run the test
# executables through qemu-aarch64.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu)
