// Every malformed call is refused with std::invalid_argument whose message
// names the offending argument, before the kernel touches memory: a wrong
// stride or length would otherwise read out of bounds instead of failing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/random_data.h"
#include "tilesplash/attention.h"
#include "tilesplash/kernel_limits.h"
#include "tilesplash/mask.h"
#include "tilesplash/plan.h"

namespace tilesplash::test {
namespace {

using enum DType;

// A valid call, one field of which each case breaks.
struct Call {
  Call()
      : q(kF32, 2, 100, 64),
        k(kF32, 2, 130, 64),
        v(kF32, 2, 130, 64),
        out(kF32, 2, 100, 64),
        lse(200) {
    q.fill_normal(1);
    k.fill_normal(2);
    v.fill_normal(3);
  }
  HostTensor q, k, v, out;
  std::vector<float> lse;
  Mask mask = Mask::causal(30);
  BlockSizes blocks{64, 64};
  AttentionOptions options{std::nullopt, MaskMode::kTile, 1, true};

  void forward() {
    const TilePlan plan = TilePlan::build(mask, 100, 130, blocks);
    attention_forward(plan, {q.view(), k.view(), v.view(), out.mutable_view(), lse.data()},
                      options);
  }
};

// `word` appears in `text` as a whole identifier (case-insensitive), so that
// "k" is found in "k.dim" but not in "mask".
bool mentions(const std::string& text, const std::string& word) {
  auto lower = [](std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s;
  };
  const std::string t = lower(text), w = lower(word);
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (std::size_t pos = t.find(w); pos != std::string::npos; pos = t.find(w, pos + 1)) {
    const bool left = pos == 0 || !ident(t[pos - 1]);
    const bool right = pos + w.size() == t.size() || !ident(t[pos + w.size()]);
    if (left && right) return true;
  }
  return false;
}

struct BadCase {
  std::string name;
  std::function<void(Call&)> breaks;
  std::vector<std::string> any_of;  // the message must mention one of these
};

std::vector<BadCase> bad_cases() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  return {
      {"heads_mismatch", [](Call& c) { c.k = HostTensor(kF32, 3, 130, 64); }, {"heads", "k"}},
      {"kv_len_mismatch",
       [](Call& c) { c.v = HostTensor(kF32, 2, 129, 64); },
       {"v", "k", "kv_len", "len"}},
      {"q_len_vs_plan", [](Call& c) { c.q = HostTensor(kF32, 2, 99, 64); }, {"q", "q_len", "plan"}},
      {"kv_len_vs_plan",
       [](Call& c) {
         c.k = HostTensor(kF32, 2, 131, 64);
         c.v = HostTensor(kF32, 2, 131, 64);
       },
       {"k", "kv_len", "plan"}},
      {"qk_dim_mismatch",
       [](Call& c) { c.k = HostTensor(kF32, 2, 130, 72); },
       {"k", "d", "dim", "head_dim"}},
      {"out_dim_vs_v", [](Call& c) { c.out = HostTensor(kF32, 2, 100, 72); }, {"out", "dv", "dim"}},
      {"out_len", [](Call& c) { c.out = HostTensor(kF32, 2, 101, 64); }, {"out"}},
      {"out_heads", [](Call& c) { c.out = HostTensor(kF32, 1, 100, 64); }, {"out", "heads"}},
      {"k_dtype", [](Call& c) { c.k = HostTensor(kBF16, 2, 130, 64); }, {"k", "dtype"}},
      {"v_dtype", [](Call& c) { c.v = HostTensor(kF16, 2, 130, 64); }, {"v", "dtype"}},
      {"out_dtype_neither_f32_nor_input",
       [](Call& c) { c.out = HostTensor(kBF16, 2, 100, 64); },
       {"out", "dtype"}},
      {"d_not_multiple_of_8",
       [](Call& c) {
         c.q = HostTensor(kF32, 2, 100, 60);
         c.k = HostTensor(kF32, 2, 130, 60);
       },
       {"d", "dim", "head_dim", "q"}},
      {"d_over_256",
       [](Call& c) {
         c.q = HostTensor(kF32, 2, 100, 264);
         c.k = HostTensor(kF32, 2, 130, 264);
       },
       {"d", "dim", "head_dim", "q"}},
      {"dv_not_multiple_of_8",
       [](Call& c) {
         c.v = HostTensor(kF32, 2, 130, 36);
         c.out = HostTensor(kF32, 2, 100, 36);
       },
       {"dv", "dim", "v"}},
      {"block_kv_not_multiple_of_64",
       [](Call& c) {
         c.blocks = {64, 100};
       },
       {"block_kv"}},
      {"block_kv_over_max",
       [](Call& c) {
         c.blocks = {64, kernel_limits::kMaxBlockKv + kernel_limits::kBlockKvMultiple};
       },
       {"block_kv"}},
      {"block_q_over_max",
       [](Call& c) {
         c.blocks = {kernel_limits::kMaxBlockQ + 1, 64};
       },
       {"block_q"}},
      {"scale_zero", [](Call& c) { c.options.scale = 0.0f; }, {"scale"}},
      {"scale_negative", [](Call& c) { c.options.scale = -0.125f; }, {"scale"}},
      {"scale_nan", [nan](Call& c) { c.options.scale = nan; }, {"scale"}},
      {"scale_inf", [inf](Call& c) { c.options.scale = inf; }, {"scale"}},
      // Finite, but scale * log2(e) is not in float32: the scale is the cause,
      // whatever q.k holds (here |q.k| < 100), so the message must say scale.
      {"scale_past_max",
       [inf](Call& c) { c.options.scale = std::nextafter(kernel_limits::kMaxScale, inf); },
       {"scale"}},
      {"scale_3e38", [](Call& c) { c.options.scale = 3e38f; }, {"scale"}},
      {"threads_past_max", [](Call& c) { c.options.threads = kMaxThreads + 1; }, {"threads"}},
      {"nan_in_q", [nan](Call& c) { c.q.set(1, 99, 63, nan); }, {"q"}},
      {"inf_in_k", [inf](Call& c) { c.k.set(0, 0, 0, -inf); }, {"k"}},
      {"nan_in_v", [nan](Call& c) { c.v.set(1, 64, 5, nan); }, {"v"}},
      {"nan_in_bf16_q",
       [nan](Call& c) {
         c.q = HostTensor(kBF16, 2, 100, 64);
         c.k = HostTensor(kBF16, 2, 130, 64);
         c.v = HostTensor(kBF16, 2, 130, 64);
         c.q.set(0, 50, 7, nan);
       },
       {"q"}},
      {"inf_in_f16_v",
       [inf](Call& c) {
         c.q = HostTensor(kF16, 2, 100, 64);
         c.k = HostTensor(kF16, 2, 130, 64);
         c.v = HostTensor(kF16, 2, 130, 64);
         c.v.set(1, 129, 63, inf);
       },
       {"v"}},
  };
}

TEST(AttentionArgs, ValidCallSucceeds) {
  Call call;
  EXPECT_NO_THROW(call.forward());
}

// kMaxScale is the largest float whose product with log2(e) (as the kernel
// forms it, in float32) is finite; the kernel runs at it and just below it.
TEST(AttentionArgs, ScaleLimitIsTheLastFloatTheKernelCanFold) {
  const float inf = std::numeric_limits<float>::infinity();
  volatile float log2e = kernel_limits::kScaleLog2e;  // multiplied at run time, in float
  EXPECT_TRUE(std::isfinite(kernel_limits::kMaxScale * log2e));
  EXPECT_FALSE(std::isfinite(std::nextafter(kernel_limits::kMaxScale, inf) * log2e));
  EXPECT_TRUE(kernel_limits::valid_scale(kernel_limits::kMaxScale));
  EXPECT_FALSE(kernel_limits::valid_scale(std::nextafter(kernel_limits::kMaxScale, inf)));
  for (const float scale :
       {kernel_limits::kMaxScale, std::nextafter(kernel_limits::kMaxScale, 0.0f),
        std::numeric_limits<float>::denorm_min()}) {
    Call call;
    call.options.scale = scale;
    EXPECT_NO_THROW(call.forward()) << scale;
  }
}

TEST(AttentionArgs, BadInputThrowsNamingTheArgument) {
  for (const BadCase& bad : bad_cases()) {
    SCOPED_TRACE(bad.name);
    Call call;
    bad.breaks(call);
    try {
      call.forward();
      ADD_FAILURE() << "no exception";
    } catch (const std::invalid_argument& e) {
      const std::string message = e.what();
      const bool named = std::any_of(bad.any_of.begin(), bad.any_of.end(),
                                     [&](const std::string& w) { return mentions(message, w); });
      EXPECT_TRUE(named) << "message does not name the argument: " << message;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "wrong exception type: " << e.what();
    }
  }
}

// Finite inputs only are checked when asked: with check_finite off the call
// must still not crash (the values are then the caller's problem).
TEST(AttentionArgs, UncheckedNonFiniteDoesNotThrow) {
  Call call;
  call.options.check_finite = false;
  call.q.set(0, 0, 0, std::numeric_limits<float>::infinity());
  EXPECT_NO_THROW(call.forward());
}

}  // namespace
}  // namespace tilesplash::test
