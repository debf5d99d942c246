// Shared plumbing of the kernel tests: a kernel call into sentinel-filled
// buffers and the verdict against the reference. (Which SIMD targets they run
// on: support/targets.h.)
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "support/random_data.h"
#include "support/reference.h"
#include "tilesplash/attention.h"
#include "tilesplash/mask.h"
#include "tilesplash/plan.h"

namespace tilesplash::test {

std::vector<ReferenceHead> reference_all_heads(const Mask& mask, const HostTensor& q,
                                               const HostTensor& k, const HostTensor& v,
                                               std::optional<double> scale);

// Every output element within tol.out * max(1, v_max_abs) of the reference and
// every LSE within tol.lse * max(1, |lse|); rows with no kept key exactly 0 with
// LSE = -inf; no NaN anywhere. `lse` may be null (not checked). The message
// names the worst element.
::testing::AssertionResult matches_reference(const std::vector<ReferenceHead>& reference,
                                             const HostTensor& out, const float* lse, Tolerance tol,
                                             double v_max_abs);

struct Outputs {
  HostTensor out;
  std::vector<float> lse;  // heads * q_len
};

// attention_forward() into fresh buffers of `out_dtype` that start as NaN, so
// that any element the kernel forgets to write shows up.
Outputs run_forward(const TilePlan& plan, const HostTensor& q, const HostTensor& k,
                    const HostTensor& v, DType out_dtype, const AttentionOptions& options,
                    bool with_lse = true);

// True when both tensors hold bit-identical logical elements (layouts may differ).
bool bitwise_equal(const HostTensor& a, const HostTensor& b);

}  // namespace tilesplash::test
