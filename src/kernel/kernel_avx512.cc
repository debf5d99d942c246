// The f32 flash kernel for the avx512 target: 16 floats per vector, a
// 4-vector-wide register tile (see flash_forward-inl.h).
#include "kernel/flash_prelude.h"

namespace tilesplash::kernel::avx512 {

constexpr int kLanes = 16;
constexpr int kColVecs = 4;

#include "kernel/flash_forward-inl.h"

void forward(const ForwardParams& params, Workspace& workspace, runtime::ThreadPool& pool) {
  FlashForward<F32Path>(params).run(workspace, pool);
}

}  // namespace tilesplash::kernel::avx512
