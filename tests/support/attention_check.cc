#include "support/attention_check.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

namespace tilesplash::test {

std::vector<ReferenceHead> reference_all_heads(const Mask& mask, const HostTensor& q,
                                               const HostTensor& k, const HostTensor& v,
                                               std::optional<double> scale) {
  std::vector<ReferenceHead> heads;
  heads.reserve(static_cast<std::size_t>(q.heads()));
  for (std::int64_t h = 0; h < q.heads(); ++h) {
    heads.push_back(reference_attention(mask, q.view(), k.view(), v.view(), h, scale));
  }
  return heads;
}

namespace {

struct Worst {
  double excess = -1.0;  // error / allowed; > 1 fails
  std::string where;
};

// Formatting the location is the expensive part, so only a new worst one is described.
template <typename Describe>
void note(Worst& worst, double excess, Describe describe) {
  if (excess > worst.excess) worst = {excess, describe()};
}

std::string describe(const char* what, std::int64_t h, std::int64_t r, std::int64_t c, double ref,
                     double got, double allowed) {
  std::ostringstream s;
  s.precision(9);
  s << what << "[head " << h << ", row " << r;
  if (c >= 0) s << ", col " << c;
  s << "]: reference " << ref << ", kernel " << got << ", allowed error " << allowed;
  return s.str();
}

}  // namespace

::testing::AssertionResult matches_reference(const std::vector<ReferenceHead>& reference,
                                             const HostTensor& out, const float* lse, Tolerance tol,
                                             double v_max_abs) {
  const double out_allowed = tol.out * std::max(1.0, v_max_abs);
  const std::int64_t dv = out.dim();
  std::int64_t failures = 0;
  Worst worst;
  for (std::int64_t h = 0; h < out.heads(); ++h) {
    const ReferenceHead& ref = reference[static_cast<std::size_t>(h)];
    for (std::int64_t r = 0; r < out.len(); ++r) {
      const double ref_lse = ref.lse[static_cast<std::size_t>(r)];
      const bool empty_row = std::isinf(ref_lse);
      for (std::int64_t c = 0; c < dv; ++c) {
        const double want = ref.out[static_cast<std::size_t>(r * dv + c)];
        const double got = out.get(h, r, c);
        // An empty row must be exactly 0: a merge of LSE-weighted shards relies on it.
        const double allowed = empty_row ? 0.0 : out_allowed;
        const double err = std::fabs(got - want);
        const double excess = std::isnan(got) ? INFINITY
                                              : (allowed > 0 ? err / allowed
                                                 : err > 0   ? INFINITY
                                                             : 0.0);
        if (excess > 1.0) ++failures;
        note(worst, excess, [&] { return describe("out", h, r, c, want, got, allowed); });
      }
      if (lse == nullptr) continue;
      const double got = lse[h * out.len() + r];
      double excess;
      double allowed = 0.0;
      if (empty_row) {
        excess = (std::isinf(got) && got < 0) ? 0.0 : INFINITY;
      } else {
        allowed = tol.lse * std::max(1.0, std::fabs(ref_lse));
        excess = std::isfinite(got) ? std::fabs(got - ref_lse) / allowed : INFINITY;
      }
      if (excess > 1.0) ++failures;
      note(worst, excess, [&] { return describe("lse", h, r, -1, ref_lse, got, allowed); });
    }
  }
  if (failures == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << failures << " values out of tolerance; worst " << worst.where;
}

Outputs run_forward(const TilePlan& plan, const HostTensor& q, const HostTensor& k,
                    const HostTensor& v, DType out_dtype, const AttentionOptions& options,
                    bool with_lse) {
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  Outputs o{HostTensor(out_dtype, q.heads(), q.len(), v.dim()),
            std::vector<float>(static_cast<std::size_t>(q.heads() * q.len()), kNaN)};
  o.out.fill_storage(kNaN);
  attention_forward(
      plan, {q.view(), k.view(), v.view(), o.out.mutable_view(), with_lse ? o.lse.data() : nullptr},
      options);
  return o;
}

bool bitwise_equal(const HostTensor& a, const HostTensor& b) {
  if (a.dtype() != b.dtype() || a.heads() != b.heads() || a.len() != b.len() ||
      a.dim() != b.dim()) {
    return false;
  }
  for (std::int64_t h = 0; h < a.heads(); ++h) {
    for (std::int64_t r = 0; r < a.len(); ++r) {
      for (std::int64_t c = 0; c < a.dim(); ++c) {
        const float x = a.get(h, r, c);
        const float y = b.get(h, r, c);
        if (std::memcmp(&x, &y, sizeof x) != 0) return false;
      }
    }
  }
  return true;
}

}  // namespace tilesplash::test
