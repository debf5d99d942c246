# The SIMD targets come from src/kernel/targets.def, the one list that dispatch,
# the peak loop, the tests and the benchmarks also read. Each per-target
# translation unit (*_<target>.cc) is compiled with that target's -m flags (as
# PyTorch's CPU_CAPABILITY builds do) and the best target the CPU supports is
# picked once at run time from CPUID. Targets of another architecture are left
# out of the build.
set(TILESPLASH_X86 OFF)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64|i[3-6]86)$")
  set(TILESPLASH_X86 ON)
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
  if(arch STREQUAL "any" OR (arch STREQUAL "x86" AND TILESPLASH_X86))
    list(APPEND TILESPLASH_TARGETS ${name})
  elseif(NOT arch STREQUAL "x86")
    message(FATAL_ERROR "targets.def: unknown arch '${arch}' for target ${name}")
  endif()
endforeach()
message(STATUS "tilesplash SIMD targets: ${TILESPLASH_TARGETS}")

if(TILESPLASH_X86)
  set(TILESPLASH_ISA_DEFINITIONS TILESPLASH_ARCH_X86=1)
else()
  set(TILESPLASH_ISA_DEFINITIONS TILESPLASH_ARCH_X86=0)
endif()

# Test-only: the AVX-512 targets' code, compiled against SIMDe's portable
# intrinsics (Debian libsimde-dev) with the avx2 flags, and reported as
# supported by dispatch, so their tests run on a CPU without AVX-512 (the
# development machines have none; CI may land on one that has). Slow, and not
# a check of timing or of the instructions GCC picks: only of the kernels'
# arithmetic, lane counts, masks and indexing. See docs/kernel.md.
option(TILESPLASH_EMULATE_AVX512 "Test-only: run the avx512* targets on an AVX2 CPU through SIMDe" OFF)
if(TILESPLASH_EMULATE_AVX512)
  if(NOT TILESPLASH_X86)
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
      endif()
      list(APPEND options -ffp-contract=fast)
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${options}")
      list(APPEND kept ${src})
    endif()
  endforeach()
  set(${sources_var} ${kept} PARENT_SCOPE)
endfunction()
