// LayoutVideoAttention (routing_layout.h): the front doors kept per head dim
// and dtype, their tiles from the tuning cache under tuning_mask() (or fixed
// by the caller), and outputs equal to a VideoAttention with those tiles run
// over the same whole tensors.
#include "tilesplash/routing_layout.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "support/scratch_dir.h"
#include "tilesplash/tuning.h"

namespace tilesplash {
namespace {

// A fresh XDG_CACHE_HOME for one test, restored afterwards.
class LayoutVideoAttentionTest : public test::ScratchDirTest {
 protected:
  void SetUp() override {
    ScratchDirTest::SetUp();
    if (HasFatalFailure()) return;
    if (const char* old = std::getenv("XDG_CACHE_HOME")) old_ = old;
    ASSERT_EQ(setenv("XDG_CACHE_HOME", dir_.c_str(), 1), 0);
  }
  void TearDown() override {
    if (old_) {
      setenv("XDG_CACHE_HOME", old_->c_str(), 1);
    } else {
      unsetenv("XDG_CACHE_HOME");
    }
    ScratchDirTest::TearDown();
  }
  std::optional<std::string> old_;
};

std::vector<float> random_values(std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> values(count);
  for (float& x : values) x = normal(rng);
  return values;
}

struct Call {
  std::vector<float> q, k, v, out;
  LayoutArgs args(std::int64_t batch, std::int64_t tokens, std::int64_t heads, std::int64_t d) {
    const std::vector<std::int64_t> shape{batch, tokens, heads, d};
    return {Layout::kBNHD,
            {q.data(), DType::kF32, shape, {}},
            {k.data(), DType::kF32, shape, {}},
            {v.data(), DType::kF32, shape, {}},
            {out.data(), DType::kF32, shape, {}}};
  }
};

Call make_call(std::int64_t batch, std::int64_t tokens, std::int64_t heads, std::int64_t d) {
  const std::size_t count = static_cast<std::size_t>(batch * tokens * heads * d);
  return {random_values(count, 1), random_values(count, 2), random_values(count, 3),
          std::vector<float>(count, 0.0f)};
}

TEST_F(LayoutVideoAttentionTest, TilesComePerHeadDimFromTheCacheUnderTheTuningMask) {
  // An odd geometry no other test uses: the process-wide choice memo is cold.
  const VideoGeometry g{5, 7, 9, 3, TextPlacement::kAfter};
  const std::int64_t n = g.tokens();
  VideoAttentionOptions options = method_attention_options("radial", g, {0.4});
  options.threads = 1;
  LayoutVideoAttention front(g, options);
  EXPECT_THROW(front.head_mask(0), std::invalid_argument);  // no call yet

  // Store a choice for head dim 16 under the mask the front door tunes by.
  const VideoAttention probe(g, options);
  const Mask mask = tuning_mask(probe);
  EXPECT_EQ(mask, probe.candidates().front().run.mask);
  const BlockSizes stored{32, 64};
  TuningCache().store(make_tune_key(mask, n, n, 16, DType::kF32, 1), stored, 1.0);

  for (const std::int64_t d : {16, 24}) {
    Call call = make_call(2, n, 3, d);
    const LayoutVideoAttention::Result result = front.forward(call.args(2, n, 3, d), 2, 5);
    ASSERT_EQ(result.reports.size(), 2u);
    const BlockSizes expected = d == 16 ? stored : heuristic_blocks(n, n, d, DType::kF32);
    EXPECT_EQ(result.blocks, expected) << d;
    EXPECT_EQ(result.blocks_tuned, d == 16) << d;
    // The same bits as a VideoAttention with those tiles over the same tensors.
    VideoAttentionOptions fixed = options;
    fixed.blocks = expected;
    VideoAttention direct(g, fixed);
    Call again = make_call(2, n, 3, d);
    layout_video_attention(direct, again.args(2, n, 3, d), 2, 5);
    EXPECT_EQ(call.out, again.out) << d;
  }
}

TEST_F(LayoutVideoAttentionTest, FixedTilesAndBadArgumentsNameTheArgument) {
  const VideoGeometry g{3, 4, 4};
  const std::int64_t n = g.tokens();
  LayoutVideoAttention front(g, {}, 16, std::nullopt);
  Call call = make_call(1, n, 2, 8);
  const LayoutVideoAttention::Result result = front.forward(call.args(1, n, 2, 8));
  EXPECT_EQ(result.blocks.block_q, 16);
  EXPECT_THROW(LayoutVideoAttention(g, {}, 0), std::invalid_argument);            // block_q
  EXPECT_THROW(LayoutVideoAttention(g, {}, 16, 96), std::invalid_argument);       // block_kv
  EXPECT_THROW(front.forward(call.args(1, n, 2, 8), -1), std::invalid_argument);  // layer
  try {
    front.forward(call.args(1, n, 2, 8), 0, -2);
    ADD_FAILURE() << "accepted step -2";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "step: must be >= 0, got -2");
  }
}

}  // namespace
}  // namespace tilesplash
