// The f32 flash kernel for the generic target: 4 floats per vector, a
// 2-vector-wide register tile (see flash_forward-inl.h).
#include "kernel/flash_prelude.h"

namespace tilesplash::kernel::generic {

constexpr int kLanes = 4;
constexpr int kColVecs = 2;

#include "kernel/flash_forward-inl.h"

void forward(const ForwardParams& params, Workspace& workspace, runtime::ThreadPool& pool) {
  FlashForward<F32Path>(params).run(workspace, pool);
}

}  // namespace tilesplash::kernel::generic
