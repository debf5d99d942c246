# The SIMD targets come from src/kernel/targets.def, the one list that dispatch,
# the peak loop, the tests and the benchmarks also read. Each per-target
# translation unit (*_<target>.cc) is compiled with that target's flags (as
# PyTorch's CPU_CAPABILITY builds do) and the best target the CPU supports is
# picked once at run time from its features. Targets of another architecture
# are left out of the build.

# The arch column of targets.def: "any" or one of these. A build compiles the
# lines of its own arch and those marked any; C++ sees the choice as
# TILESPLASH_ARCH_<ARCH> = 0 or 1 (src/kernel/target_list.h).
set(TILESPLASH_KNOWN_ARCHS x86 aarch64)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64|i[3-6]86)$")
  set(TILESPLASH_ARCH x86)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64)$")
  set(TILESPLASH_ARCH aarch64)
else()
  set(TILESPLASH_ARCH none)  # only the portable targets
endif()

set(TILESPLASH_TARGETS_FILE ${CMAKE_CURRENT_LIST_DIR}/../src/kernel/targets.def)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${TILESPLASH_TARGETS_FILE})
file(STRINGS ${TILESPLASH_TARGETS_FILE} _tilesplash_target_lines REGEX "^TILESPLASH_TARGET\\(")
set(TILESPLASH_TARGETS)  # compiled in this build, best first
set(TILESPLASH_ALL_TARGETS)
foreach(line IN LISTS _tilesplash_target_lines)
  if(NOT line MATCHES "^TILESPLASH_TARGET\\(([a-z0-9_]+), *([a-z0-9_]+), *\"([^\"]*)\", *\"([^\"]*)\"\\)")
    message(FATAL_ERROR "targets.def: cannot parse '${line}'")
  endif()
  set(name ${CMAKE_MATCH_1})
  set(arch ${CMAKE_MATCH_2})
  separate_arguments(TILESPLASH_ISA_FLAGS_${name} UNIX_COMMAND "${CMAKE_MATCH_4}")
  list(APPEND TILESPLASH_ALL_TARGETS ${name})
  if(NOT arch STREQUAL "any" AND NOT arch IN_LIST TILESPLASH_KNOWN_ARCHS)
    message(FATAL_ERROR "targets.def: unknown arch '${arch}' for target ${name} "
      "(expected any or one of: ${TILESPLASH_KNOWN_ARCHS})")
  endif()
  if(arch STREQUAL "any" OR arch STREQUAL TILESPLASH_ARCH)
    list(APPEND TILESPLASH_TARGETS ${name})
  endif()
endforeach()
message(STATUS "tilesplash SIMD targets (${TILESPLASH_ARCH}): ${TILESPLASH_TARGETS}")

set(TILESPLASH_ISA_DEFINITIONS)
foreach(arch IN LISTS TILESPLASH_KNOWN_ARCHS)
  string(TOUPPER ${arch} upper)
  if(arch STREQUAL TILESPLASH_ARCH)
    list(APPEND TILESPLASH_ISA_DEFINITIONS TILESPLASH_ARCH_${upper}=1)
  else()
    list(APPEND TILESPLASH_ISA_DEFINITIONS TILESPLASH_ARCH_${upper}=0)
  endif()
endforeach()

# Test-only: the AVX-512 targets' code, compiled against SIMDe's portable
# intrinsics (Debian libsimde-dev) with the avx2 flags, and reported as
# supported by dispatch, so their tests run on a CPU without AVX-512 (the
# development machines have none; CI may land on one that has). Slow, and not
# a check of timing or of the instructions GCC picks: only of the kernels'
# arithmetic, lane counts, masks and indexing. See docs/kernel.md.
option(TILESPLASH_EMULATE_AVX512 "Test-only: run the avx512* targets on an AVX2 CPU through SIMDe" OFF)
if(TILESPLASH_EMULATE_AVX512)
  if(NOT TILESPLASH_ARCH STREQUAL "x86")
    message(FATAL_ERROR "TILESPLASH_EMULATE_AVX512 needs an x86-64 build")
  endif()
  find_path(TILESPLASH_SIMDE_INCLUDE_DIR simde/x86/avx512.h)
  if(NOT TILESPLASH_SIMDE_INCLUDE_DIR)
    message(FATAL_ERROR "TILESPLASH_EMULATE_AVX512 needs SIMDe (apt-get install libsimde-dev)")
  endif()
  list(APPEND TILESPLASH_ISA_DEFINITIONS TILESPLASH_EMULATE_AVX512=1)
  message(STATUS "tilesplash: avx512 targets EMULATED through SIMDe (test-only build)")
else()
  list(APPEND TILESPLASH_ISA_DEFINITIONS TILESPLASH_EMULATE_AVX512=0)
endif()

# Gives each *_<target>.cc its flags and drops those of targets not compiled here.
function(tilesplash_apply_isa_flags sources_var)
  set(kept)
  foreach(src IN LISTS ${sources_var})
    set(isa "")
    foreach(name IN LISTS TILESPLASH_ALL_TARGETS)
      if(src MATCHES "_${name}\\.cc$")
        set(isa ${name})
      endif()
    endforeach()
    if(isa STREQUAL "")
      list(APPEND kept ${src})
    elseif(isa IN_LIST TILESPLASH_TARGETS)
      # -ffp-contract=fast: the portable target too fuses multiply-adds where it can.
      set(options ${TILESPLASH_ISA_FLAGS_${isa}})
      if(TILESPLASH_EMULATE_AVX512 AND isa MATCHES "^avx512")
        # -Wno-psabi: 64-byte vectors pass between these units' own inline
        # functions only; the exported entry points take pointers and scalars.
        set(options ${TILESPLASH_ISA_FLAGS_avx2} -Wno-psabi
          -include ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/../tests/emulation/avx512_simde_shim.h)
        # The shim claims AVX-512 VNNI only for the targets built with it, so
        # the emulated avx512 target keeps its plain int8 sums, as on a CPU.
        if("-mavx512vnni" IN_LIST TILESPLASH_ISA_FLAGS_${isa})
          list(APPEND options -DTILESPLASH_EMULATE_AVX512VNNI=1)
        endif()
      endif()
      list(APPEND options -ffp-contract=fast)
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${options}")
      list(APPEND kept ${src})
    endif()
  endforeach()
  set(${sources_var} ${kept} PARENT_SCOPE)
endfunction()
