// End-to-end tests of `tilesplash tune` and `bench --ablation mask`: the
// output's shape and exit codes, the cache the tune command writes and bench
// then reads. Each run gets its own XDG_CACHE_HOME; no timing assertions.
#include <gtest/gtest.h>

#ifdef TILESPLASH_CLI_PATH

#include <stdlib.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "support/scratch_dir.h"
#include "support/shell.h"
#include "tilesplash/routing.h"
#include "tilesplash/routing_layout.h"
#include "tilesplash/tuning.h"

namespace {

namespace fs = std::filesystem;

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

class TuneCli : public tilesplash::test::ScratchDirTest {
 protected:
  // Runs the CLI with `args` (already shell-quoted) and XDG_CACHE_HOME in the
  // test's directory; stdout through the pipe, stderr through a file.
  RunResult run(const std::string& args) const {
    const fs::path err_path = dir_ / "stderr.txt";
    const std::string command = "XDG_CACHE_HOME=" + (dir_ / "cache").string() + " " +
                                TILESPLASH_CLI_PATH + " " + args + " 2>" + err_path.string();
    const tilesplash::test::ShellResult shell = tilesplash::test::run_shell(command);
    RunResult result;
    result.exit_code = shell.exit_code;
    result.out = shell.out;
    std::ifstream err_file(err_path);
    result.err.assign(std::istreambuf_iterator<char>(err_file), std::istreambuf_iterator<char>());
    return result;
  }

  fs::path cache_file() const { return dir_ / "cache" / "tilesplash" / "tuning.json"; }
};

constexpr const char* kTuneArgs =
    "tune --mask 'local:left=100,right=100' --q-len 700 --head-dim 32 --dtype bf16 "
    "--threads 1 --heads 1 --budget-seconds 0.05 --repeats 1";

// A video shape with --method times the mask that method's front door takes
// its tiles for, and stores it where that front door looks.
TEST_F(TuneCli, VideoShapeTimesTheMethodsTuningMask) {
  const RunResult r =
      run("tune --geometry frames=13,height=16,width=12 --method sta --density 0.2 --head-dim 32 "
          "--dtype f32 --threads 1 --heads 1 --budget-seconds 0.05 --repeats 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  const tilesplash::VideoGeometry g =
      tilesplash::parse_video_geometry("frames=13,height=16,width=12");
  const tilesplash::VideoAttention attention(g,
                                             tilesplash::method_attention_options("sta", g, {0.2}));
  const tilesplash::Mask expected = tilesplash::tuning_mask(attention);
  EXPECT_EQ(json.at("mask").get<std::string>(), expected.to_string());
  EXPECT_EQ(json.at("method").get<std::string>(), "sta");
  EXPECT_EQ(
      json.at("cache_key").get<std::string>(),
      tilesplash::make_tune_key(expected, g.tokens(), g.tokens(), 32, tilesplash::DType::kF32, 1)
          .to_string());
}

TEST_F(TuneCli, JsonListsEveryCandidateAndStoresTheBest) {
  const RunResult r = run(std::string(kTuneArgs) + " --verify --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  const auto& rows = json.at("candidates");
  ASSERT_GE(rows.size(), 2u);
  for (const auto& row : rows) {
    for (const char* key : {"block_q", "block_kv", "full", "partial", "empty", "boundary_pairs",
                            "ms", "gflops", "sample_fraction"}) {
      EXPECT_TRUE(row.contains(key)) << key;
    }
    EXPECT_GT(row.at("ms").get<double>(), 0.0);
    EXPECT_GE(row.at("boundary_pairs").get<long>(), 0);
  }
  const auto& best = json.at("best");
  EXPECT_TRUE(best.at("full_ms").is_number());  // --verify
  EXPECT_TRUE(json.at("least_boundary").at("full_ms").is_number());
  bool listed = false;
  for (const auto& row : rows) listed = listed || row == best;
  EXPECT_TRUE(listed);

  ASSERT_TRUE(fs::exists(cache_file()));
  const auto cache = nlohmann::json::parse(std::ifstream(cache_file()));
  const auto& entry = cache.at("entries").at(json.at("cache_key").get<std::string>());
  EXPECT_EQ(entry.at("block_q"), best.at("block_q"));
  EXPECT_EQ(entry.at("block_kv"), best.at("block_kv"));

  // bench without block sizes now runs the cached choice.
  const RunResult b =
      run("bench --mask 'local:left=100,right=100' --q-len 700 --head-dim 32 --dtype bf16 "
          "--threads 1 --repeats 1 --json");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const auto bench = nlohmann::json::parse(b.out);
  EXPECT_EQ(bench.at("blocks_from"), "cache");
  EXPECT_EQ(bench.at("block_q"), best.at("block_q"));
  EXPECT_EQ(bench.at("block_kv"), best.at("block_kv"));
}

TEST_F(TuneCli, TextMarksFastestAndLeastBoundary) {
  const RunResult r = run(std::string(kTuneArgs) + " --no-store");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("fastest"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("least-boundary"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("boundary_pairs"), std::string::npos) << r.out;
  // --no-store keeps the tuned tiles out of the cache; the bf16 run may have
  // stored the product-path calibration (per CPU model, not per shape) there.
  if (fs::exists(cache_file())) {
    const auto cache = nlohmann::json::parse(std::ifstream(cache_file()));
    for (const auto& [key, entry] : cache.at("entries").items()) {
      EXPECT_EQ(key.rfind("product-path|", 0), 0u) << key;
    }
  }
}

TEST_F(TuneCli, BadInputExitsTwo) {
  for (const char* args : {
           "tune --head-dim 64 --dtype f32",  // no shape
           "tune --preset no-such-model --head-dim 64 --dtype f32",
           "tune --preset wan2.1-14b-720p --mask causal --q-len 10 --head-dim 64 --dtype f32",
           "tune --mask causal --q-len 100 --head-dim 60 --dtype f32",
           "tune --mask causal --q-len 100 --head-dim 64 --dtype f32 --budget-seconds 0",
           "tune --mask causal --q-len 100 --head-dim 64 --dtype f32 --density 0.5",
           "bench --mask causal --q-len 100 --head-dim 64 --dtype f32 --ablation tiles",
       }) {
    const RunResult r = run(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find("error"), std::string::npos) << args;
  }
}

TEST_F(TuneCli, BenchMaskAblationReportsThreeModes) {
  const RunResult r =
      run("bench --mask 'local:left=64,right=64|causal:offset=-400' --q-len 512 --head-dim 64 "
          "--dtype f32 --threads 1 --repeats 1 --block-q 64 --block-kv 64 --ablation mask --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json.at("blocks_from"), "given");
  for (const char* key : {"tile_seconds", "element_seconds", "bitmask_seconds"}) {
    EXPECT_GT(json.at(key).get<double>(), 0.0) << key;
  }
  EXPECT_DOUBLE_EQ(json.at("seconds").get<double>(), json.at("tile_seconds").get<double>());
  EXPECT_NEAR(json.at("element_vs_tile").get<double>(),
              json.at("element_seconds").get<double>() / json.at("tile_seconds").get<double>(),
              1e-9);
  EXPECT_GT(json.at("bitmask_vs_tile").get<double>(), 0.0);
}

}  // namespace

#else

TEST(TuneCli, Skipped) { GTEST_SKIP() << "built without the tilesplash CLI"; }

#endif
