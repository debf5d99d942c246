// The tuning cache and its key: a stored choice comes back, keys that differ
// in any field stay apart, and a corrupt, stale or out-of-range cache is
// ignored with a warning. Every test points XDG_CACHE_HOME at its own
// temporary directory, so the real home is never read or written.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "support/scratch_dir.h"
#include "tilesplash/mask.h"
#include "tilesplash/tuning.h"
#include "tilesplash/version.h"

namespace tilesplash {
namespace {

namespace fs = std::filesystem;

// A fresh XDG_CACHE_HOME for one test, restored and removed afterwards.
class TempCacheHome : public test::ScratchDirTest {
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

  static void write_file(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
  }

  static TuneKey key_for(const Mask& mask, std::int64_t len = 75600, std::int64_t d = 128,
                         DType dtype = DType::kBF16, int threads = 2) {
    return make_tune_key(mask, len, len, d, dtype, threads);
  }

  std::optional<std::string> old_;
};

TEST_F(TempCacheHome, DefaultPathFollowsXdgCacheHome) {
  EXPECT_EQ(TuningCache::default_path(), dir_ / "tilesplash" / "tuning.json");
  EXPECT_EQ(TuningCache().path(), dir_ / "tilesplash" / "tuning.json");
}

TEST_F(TempCacheHome, RelativeXdgCacheHomeFallsBackToHome) {
  ASSERT_EQ(setenv("XDG_CACHE_HOME", "relative/dir", 1), 0);
  const char* home = std::getenv("HOME");
  if (home == nullptr || home[0] == '\0') GTEST_SKIP() << "HOME is not set";
  EXPECT_EQ(TuningCache::default_path(), fs::path(home) / ".cache" / "tilesplash" / "tuning.json");
}

TEST_F(TempCacheHome, RoundTrip) {
  const TuneKey key = key_for(Mask::local(4096, 4096));
  const TuningCache cache;
  EXPECT_FALSE(cache.lookup(key).has_value());
  cache.store(key, {256, 512}, 1.25);
  ASSERT_TRUE(fs::exists(cache.path()));
  EXPECT_EQ(cache.lookup(key), (BlockSizes{256, 512}));
  cache.store(key, {3328, 256}, 1.0);  // replaces
  EXPECT_EQ(cache.lookup(key), (BlockSizes{3328, 256}));

  const auto json = nlohmann::json::parse(std::ifstream(cache.path()));
  EXPECT_EQ(json.at("version"), 1);
  EXPECT_EQ(json.at("library"), kVersion);
  // One tuned entry; a bf16 key may also have stored the product-path
  // calibration (per CPU model) when this process had not measured it yet.
  std::size_t tuned = 0;
  for (const auto& [name, entry] : json.at("entries").items()) {
    if (name.rfind("product-path|", 0) != 0) ++tuned;
  }
  EXPECT_EQ(tuned, 1u);
  // No temporary files left beside it; only the lock file that store() flocks.
  EXPECT_EQ(
      std::distance(fs::directory_iterator(cache.path().parent_path()), fs::directory_iterator()),
      2);
  EXPECT_TRUE(fs::exists(cache.path().string() + ".lock"));
}

TEST_F(TempCacheHome, ChooseBlocksUsesTheCacheElseTheHeuristic) {
  const Mask mask = Mask::local(300, 300);
  const BlockChoice before = choose_blocks(mask, 5000, 5000, 64, DType::kF32, 1);
  EXPECT_FALSE(before.from_cache);
  EXPECT_EQ(before.blocks, heuristic_blocks(5000, 5000, 64, DType::kF32));
  TuningCache().store(before.key, {64, 128}, 0.5);
  const BlockChoice after = choose_blocks(mask, 5000, 5000, 64, DType::kF32, 1);
  EXPECT_TRUE(after.from_cache);
  EXPECT_EQ(after.blocks, (BlockSizes{64, 128}));
  // Same family, bucket and density: the entry serves a neighbouring shape too.
  EXPECT_TRUE(choose_blocks(Mask::local(310, 310), 5100, 5100, 64, DType::kF32, 1).from_cache);
}

TEST_F(TempCacheHome, KeysSeparate) {
  const Mask band = Mask::local(4096, 4096);
  const TuneKey base = key_for(band);
  const TuneKey others[] = {
      key_for(band, 75600, 64),                    // head dim
      key_for(band, 75600, 128, DType::kF32),      // dtype
      key_for(band, 75600, 128, DType::kBF16, 1),  // threads
      key_for(band, 32760),                        // length bucket (and density)
      key_for(Mask::local(20000, 20000)),          // density bucket
      key_for(Mask::causal()),                     // mask family
      key_for(Mask::local(4096, 4096) | Mask::causal(-70000)),
  };
  const TuningCache cache;
  cache.store(base, {512, 256}, 1.0);
  for (const TuneKey& other : others) {
    EXPECT_NE(other.to_string(), base.to_string());
    EXPECT_FALSE(cache.lookup(other).has_value()) << other.to_string();
  }
  TuneKey other_isa = base;
  other_isa.isa = base.isa == "generic" ? "avx2" : "generic";
  EXPECT_FALSE(cache.lookup(other_isa).has_value());
  TuneKey other_cpu = base;
  other_cpu.cpu += " (another)";
  EXPECT_FALSE(cache.lookup(other_cpu).has_value());
  EXPECT_EQ(cache.lookup(base), (BlockSizes{512, 256}));
}

TEST_F(TempCacheHome, KeyIsCoarseWhereShapesBehaveAlike) {
  const TuneKey a = key_for(Mask::local(4096, 4096), 70000);
  const TuneKey b = key_for(Mask::local(4200, 4200), 75600);
  EXPECT_EQ(a.mask_family, "local:left=#,right=#");
  EXPECT_EQ(a.q_bucket, 16);
  EXPECT_EQ(a, b);
  EXPECT_NE(a.cpu, "");
  EXPECT_EQ(a.threads, 2);
}

TEST_F(TempCacheHome, CorruptCacheIsIgnoredWithAWarningAndReplaced) {
  const TuneKey key = key_for(Mask::causal());
  const TuningCache cache;
  bool first = true;
  for (const std::string text : {"{ not json", "[1, 2, 3]", "{\"entries\": 5}", ""}) {
    write_file(cache.path(), text);
    ::testing::internal::CaptureStderr();
    EXPECT_FALSE(cache.lookup(key).has_value()) << text;
    const std::string err = ::testing::internal::GetCapturedStderr();
    // The warning names the file, and each distinct warning is printed once.
    if (first) {
      EXPECT_NE(err.find("corrupt"), std::string::npos) << err;
    }
    first = false;
  }
  cache.store(key, {128, 128}, 1.0);  // a store rewrites it from scratch
  EXPECT_EQ(cache.lookup(key), (BlockSizes{128, 128}));
}

TEST_F(TempCacheHome, StaleCacheIsIgnored) {
  const TuneKey key = key_for(Mask::causal());
  const TuningCache cache;
  cache.store(key, {128, 128}, 1.0);
  auto json = nlohmann::json::parse(std::ifstream(cache.path()));
  for (const auto& [field, value] : {std::pair<std::string, nlohmann::json>{"version", 0},
                                     {"library", "0.0.0-old"},
                                     {"format", "something-else"}}) {
    auto stale = json;
    stale[field] = value;
    write_file(cache.path(), stale.dump());
    ::testing::internal::CaptureStderr();
    EXPECT_FALSE(cache.lookup(key).has_value()) << field;
    const std::string err = ::testing::internal::GetCapturedStderr();
    if (field == "version") {
      EXPECT_NE(err.find("stale"), std::string::npos) << err;
    }
  }
  write_file(cache.path(), json.dump());
  EXPECT_EQ(cache.lookup(key), (BlockSizes{128, 128}));
}

TEST_F(TempCacheHome, InvalidEntriesAreIgnored) {
  const TuneKey key = key_for(Mask::causal());
  const TuningCache cache;
  cache.store(key, {128, 128}, 1.0);
  auto json = nlohmann::json::parse(std::ifstream(cache.path()));
  for (const nlohmann::json& entry : {nlohmann::json{{"block_q", 128}, {"block_kv", 100}},
                                      nlohmann::json{{"block_q", 0}, {"block_kv", 128}},
                                      nlohmann::json{{"block_q", 9000}, {"block_kv", 128}},
                                      nlohmann::json{{"block_q", "128"}, {"block_kv", 128}},
                                      nlohmann::json{{"block_q", 128}}, nlohmann::json(42)}) {
    json["entries"][key.to_string()] = entry;
    write_file(cache.path(), json.dump());
    ::testing::internal::CaptureStderr();
    EXPECT_FALSE(cache.lookup(key).has_value()) << entry.dump();
    ::testing::internal::GetCapturedStderr();
  }
  EXPECT_THROW(cache.store(key, {128, 100}, 1.0), std::invalid_argument);
}

TEST(TuningKey, DensityEstimateAndBuckets) {
  EXPECT_DOUBLE_EQ(estimate_density(Mask::dense(), 1000, 700), 1.0);
  // local(99, 99) over 10,000 x 10,000 keeps about 199 / 10,000 of each row.
  EXPECT_NEAR(estimate_density(Mask::local(99, 99), 10000, 10000), 0.0199, 0.0005);
  EXPECT_NEAR(estimate_density(Mask::causal(), 4096, 4096), 0.5, 0.01);
  EXPECT_DOUBLE_EQ(density_bucket(0.0199), 0.02);
  EXPECT_DOUBLE_EQ(density_bucket(0.26), 0.25);
  EXPECT_DOUBLE_EQ(density_bucket(0.49), 0.5);
  EXPECT_DOUBLE_EQ(density_bucket(1.0), 1.0);
  EXPECT_THROW(make_tune_key(Mask::dense(), 0, 10, 64, DType::kF32, 1), std::invalid_argument);
  EXPECT_THROW(make_tune_key(Mask::dense(), 10, 10, 64, DType::kF32, -1), std::invalid_argument);
}

}  // namespace
}  // namespace tilesplash
