# One central list of SIMD targets. Each per-ISA translation unit is compiled
# with its own -m flags (as PyTorch's CPU_CAPABILITY builds do) and the best one
# the CPU supports is picked once at run time from CPUID. Non-x86 builds keep
# only the portable target.
set(TILESPLASH_X86 OFF)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64|i[3-6]86)$")
  set(TILESPLASH_X86 ON)
endif()

set(TILESPLASH_ISA_FLAGS_avx512bf16 -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx512bf16 -mavx2 -mfma -mf16c)
set(TILESPLASH_ISA_FLAGS_avx512 -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx2 -mfma -mf16c)
set(TILESPLASH_ISA_FLAGS_avx2 -mavx2 -mfma -mf16c)

if(TILESPLASH_X86)
  set(TILESPLASH_ISA_DEFINITIONS TILESPLASH_HAVE_X86_ISAS=1)
else()
  set(TILESPLASH_ISA_DEFINITIONS TILESPLASH_HAVE_X86_ISAS=0)
endif()

function(tilesplash_apply_isa_flags sources_var)
  set(kept)
  foreach(src IN LISTS ${sources_var})
    set(isa "")
    if(src MATCHES "_avx512bf16\\.cc$")
      set(isa avx512bf16)
    elseif(src MATCHES "_avx512\\.cc$")
      set(isa avx512)
    elseif(src MATCHES "_avx2\\.cc$")
      set(isa avx2)
    endif()
    if(src MATCHES "_generic\\.cc$")
      # Portable kernels: let the compiler fuse multiply-adds like the SIMD ones.
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "-ffp-contract=fast")
      list(APPEND kept ${src})
    elseif(isa STREQUAL "")
      list(APPEND kept ${src})
    elseif(TILESPLASH_X86)
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${TILESPLASH_ISA_FLAGS_${isa}};-ffp-contract=fast")
      list(APPEND kept ${src})
    endif()
  endforeach()
  set(${sources_var} ${kept} PARENT_SCOPE)
endfunction()
