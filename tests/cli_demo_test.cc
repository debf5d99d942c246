// End-to-end tests of `tilesplash demo` on a tiny geometry (so that it runs in
// well under a second): exit code, the JSON keys scripts rely on, sane values
// (densities in (0, 1], cosine close to 1 at full density), the PNG it writes,
// and the top-level help pointing at it. No timing assertions.
#include <gtest/gtest.h>

#ifdef TILESPLASH_CLI_PATH

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/shell.h"
#include "tensor_io_files.h"

namespace {

struct RunResult {
  int exit_code = -1;
  std::string out;
};

// stdout only; stderr goes to /dev/null (no terminal, so no progress bar).
RunResult run_cli(const std::string& args) {
  const std::string command = std::string(TILESPLASH_CLI_PATH) + " " + args + " 2>/dev/null";
  const tilesplash::test::ShellResult shell = tilesplash::test::run_shell(command);
  RunResult result;
  result.exit_code = shell.exit_code;
  result.out = shell.out;
  return result;
}

constexpr const char* kTiny = "demo --geometry frames=4,height=8,width=8 --heads 2 --threads 1";

TEST(CliDemo, JsonHasTheDocumentedKeys) {
  const RunResult r = run_cli(std::string(kTiny) + " --json");
  ASSERT_EQ(r.exit_code, 0);
  const auto json = nlohmann::json::parse(r.out);
  for (const char* key :
       {"preset", "geometry", "tokens", "num_heads", "head_dim", "band", "heads_table", "sparse_ms",
        "dense_ms", "speedup", "mean_cosine", "time_ms"}) {
    EXPECT_TRUE(json.contains(key)) << key;
  }
  EXPECT_EQ(json.at("tokens").get<int>(), 256);
  ASSERT_EQ(json.at("heads_table").size(), 2u);
  for (const auto& head : json["heads_table"]) {
    for (const char* key :
         {"head", "planted", "choice", "density", "seconds", "dense_ms", "cosine_vs_dense"}) {
      EXPECT_TRUE(head.contains(key)) << key;
    }
    EXPECT_GT(head["density"].get<double>(), 0.0);
    EXPECT_LE(head["density"].get<double>(), 1.0);
    EXPECT_GT(head["cosine_vs_dense"].get<double>(), 0.5);
  }
  // Where the time went adds up to the totals: sparse attention and its
  // permutation are the sparse time, dense attention the dense time; every
  // head was routed (the router ran) and plans were built in this process.
  const auto& time = json["time_ms"];
  EXPECT_NEAR(time.at("sparse_attention").get<double>() + time.at("permutation").get<double>(),
              json.at("sparse_ms").get<double>(), 1e-9);
  EXPECT_DOUBLE_EQ(time.at("dense_attention").get<double>(), json.at("dense_ms").get<double>());
  EXPECT_GT(time.at("routing").get<double>(), 0.0);
  EXPECT_GT(time.at("plan_build").get<double>(), 0.0);
  double heads_ms = 0.0;
  for (const auto& head : json["heads_table"]) heads_ms += head["seconds"].get<double>() * 1e3;
  EXPECT_NEAR(heads_ms, json.at("sparse_ms").get<double>(), 1e-6);
}

TEST(CliDemo, FullDensityMatchesDense) {
  const RunResult r = run_cli(std::string(kTiny) + " --density 1 --json");
  ASSERT_EQ(r.exit_code, 0);
  const auto json = nlohmann::json::parse(r.out);
  for (const auto& head : json["heads_table"]) {
    EXPECT_NEAR(head["cosine_vs_dense"].get<double>(), 1.0, 1e-5);
  }
}

TEST(CliDemo, TextTableAndPng) {
  tilesplash::test::TempDir dir;
  const RunResult r = run_cli(std::string(kTiny) + " --png " + dir.file("pics"));
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("where the time went"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cosine"), std::string::npos) << r.out;
  std::ifstream png(dir.file("pics/band-plan.png"), std::ios::binary);
  ASSERT_TRUE(png.good());
  char magic[8] = {};
  png.read(magic, 8);
  EXPECT_EQ(std::string(magic + 1, 3), "PNG");
}

TEST(CliDemo, QuietPrintsNothing) {
  const RunResult r = run_cli(std::string(kTiny) + " --quiet");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(CliDemo, BadPresetExitsTwo) { EXPECT_EQ(run_cli("demo --preset nope").exit_code, 2); }

TEST(CliDemo, TopLevelHelpPointsToDemo) {
  const RunResult r = run_cli("");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("tilesplash demo"), std::string::npos) << r.out;
  const RunResult help = run_cli("demo --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("Examples"), std::string::npos) << help.out;
}

TEST(CliPlan, PngWritesAPicture) {
  tilesplash::test::TempDir dir;
  const RunResult r = run_cli("plan --mask causal --q-len 4096 --json --png " + dir.file("c.png"));
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_TRUE(std::filesystem::exists(dir.file("c.png")));
  EXPECT_GT(std::filesystem::file_size(dir.file("c.png")), 50u);
}

}  // namespace

#endif  // TILESPLASH_CLI_PATH
