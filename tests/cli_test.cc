// End-to-end tests of the tilesplash binary: run it as a user would and check
// its output and exit codes (no timing assertions: only that numbers are sane).
#include <gtest/gtest.h>

#ifdef TILESPLASH_CLI_PATH

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/shell.h"
#include "support/targets.h"
#include "tilesplash/attention.h"

namespace {

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs the CLI with `args` (already shell-quoted), after `env` assignments, and
// captures stdout through the pipe and stderr through a temporary file.
RunResult run_cli(const std::string& args, const std::string& env = "") {
  char err_path[] = "/tmp/tilesplash_cli_test_XXXXXX";
  const int fd = mkstemp(err_path);
  EXPECT_GE(fd, 0);
  close(fd);
  const std::string command =
      env + " " + std::string(TILESPLASH_CLI_PATH) + " " + args + " 2>" + err_path;
  const tilesplash::test::ShellResult shell = tilesplash::test::run_shell(command);
  RunResult result;
  result.exit_code = shell.exit_code;
  result.out = shell.out;
  std::ifstream err_file(err_path);
  result.err.assign(std::istreambuf_iterator<char>(err_file), std::istreambuf_iterator<char>());
  std::remove(err_path);
  return result;
}

TEST(Cli, NoArgumentsPrintsHelpWithExamples) {
  const RunResult r = run_cli("");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("plan"), std::string::npos);
  EXPECT_NE(r.out.find("bench"), std::string::npos);
  EXPECT_NE(r.out.find("Examples"), std::string::npos);
}

TEST(Cli, SubcommandHelpHasExample) {
  for (const char* command : {"plan", "bench"}) {
    const RunResult r = run_cli(std::string(command) + " --help");
    EXPECT_EQ(r.exit_code, 0) << command;
    EXPECT_NE(r.out.find("tilesplash " + std::string(command) + " --mask"), std::string::npos)
        << r.out;
  }
}

TEST(Cli, PlanCausalGoldenKinds) {
  const auto before = std::chrono::steady_clock::now();
  const RunResult r =
      run_cli("plan --mask causal --q-len 64 --block-q 16 --block-kv 16 --json --kinds");
  const double around =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - before).count();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  const std::vector<std::vector<std::string>> golden = {
      {"P", "E", "E", "E"}, {"F", "P", "E", "E"}, {"F", "F", "P", "E"}, {"F", "F", "F", "P"}};
  EXPECT_EQ(json.at("kinds").get<std::vector<std::vector<std::string>>>(), golden);
  EXPECT_EQ(json.at("distinct_partial").get<int>(), 1);
  EXPECT_EQ(json.at("full").get<int>(), 6);
  EXPECT_EQ(json.at("partial").get<int>(), 4);
  EXPECT_EQ(json.at("empty").get<int>(), 6);
  EXPECT_EQ(json.at("kept_pairs").get<int>(), 64 * 65 / 2);
  EXPECT_DOUBLE_EQ(json.at("density").get<double>(), 64.0 * 65 / 2 / (64 * 64));
  EXPECT_EQ(json.at("q_len").get<int>(), 64);
  EXPECT_EQ(json.at("kv_len").get<int>(), 64);
  EXPECT_EQ(json.at("block_q").get<int>(), 16);
  EXPECT_EQ(json.at("block_kv").get<int>(), 16);
  EXPECT_TRUE(json.at("mask").is_string());
  EXPECT_GT(json.at("plan_bytes").get<long long>(), 0);
  // The plan's own build time: inside the process's run.
  EXPECT_GT(json.at("build_seconds").get<double>(), 0.0);
  EXPECT_LT(json.at("build_seconds").get<double>(), around);
}

TEST(Cli, PlanTextPrintsTableAndGrid) {
  const RunResult r = run_cli("plan --mask causal --q-len 64 --block-q 16 --block-kv 16 --kinds");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("distinct_partial"), std::string::npos);
  EXPECT_NE(r.out.find("PEEE\nFPEE\nFFPE\nFFFP\n"), std::string::npos) << r.out;
}

TEST(Cli, BadMaskSpecExitsTwoWithMessage) {
  const RunResult r = run_cli("plan --mask nonsense --q-len 64");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(r.out.empty());
  EXPECT_EQ(r.err.rfind("tilesplash: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("--mask"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line expected: " << r.err;
}

TEST(Cli, BadNumbersExitTwoNamingTheOption) {
  const struct {
    const char* args;
    const char* option;
  } cases[] = {
      {"plan --mask causal --q-len abc", "--q-len"},
      {"plan --mask causal --q-len 0", "--q-len"},
      {"plan --mask causal --q-len 64 --block-kv -3", "--block-kv"},
      {"bench --mask causal --q-len 64 --head-dim 60 --dtype f32", "--head-dim"},
      {"bench --mask causal --q-len 64 --head-dim 64 --dtype f64", "--dtype"},
      {"bench --mask causal --q-len 64 --head-dim 64 --dtype f32 --block-kv 100", "--block-kv"},
      {"bench --mask causal --q-len 64 --head-dim 64 --dtype f32 --mask-mode x", "--mask-mode"},
  };
  for (const auto& c : cases) {
    const RunResult r = run_cli(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args;
    EXPECT_NE(r.err.find(c.option), std::string::npos) << c.args << ": " << r.err;
  }
}

TEST(Cli, MissingRequiredOptionExitsTwo) {
  const RunResult r = run_cli("plan --q-len 64");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--mask"), std::string::npos) << r.err;
}

TEST(Cli, KindsRefusesHugeGrids) {
  const RunResult r =
      run_cli("plan --mask causal --q-len 100000 --block-q 16 --block-kv 16 --kinds");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--kinds"), std::string::npos) << r.err;
}

TEST(Cli, BenchJsonHasKeysAndSaneValues) {
  const RunResult r = run_cli(
      "bench --mask causal --q-len 128 --head-dim 64 --dtype bf16 --threads 1 --block-q 32 "
      "--block-kv 64 --repeats 2 --compare-dense --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  for (const char* key : {"mask",
                          "q_len",
                          "kv_len",
                          "heads",
                          "head_dim",
                          "dtype",
                          "block_q",
                          "block_kv",
                          "mask_mode",
                          "threads",
                          "isa",
                          "repeats",
                          "kept_pairs",
                          "density",
                          "seconds",
                          "gflops",
                          "peak_gflops",
                          "peak_unit",
                          "efficiency",
                          "dense_seconds",
                          "sparse_vs_ideal",
                          "peak_gflops_per_thread",
                          "dense_efficiency"}) {
    EXPECT_TRUE(json.contains(key)) << key;
  }
  EXPECT_EQ(json.at("q_len").get<int>(), 128);
  EXPECT_EQ(json.at("kv_len").get<int>(), 128);
  EXPECT_EQ(json.at("threads").get<int>(), 1);
  EXPECT_EQ(json.at("dtype").get<std::string>(), "bf16");
  EXPECT_EQ(json.at("kept_pairs").get<int>(), 128 * 129 / 2);
  EXPECT_NEAR(json.at("density").get<double>(), 128.0 * 129 / 2 / (128 * 128), 1e-12);
  EXPECT_GT(json.at("seconds").get<double>(), 0.0);
  EXPECT_GT(json.at("gflops").get<double>(), 0.0);
  EXPECT_GT(json.at("peak_gflops").get<double>(), 0.0);
  EXPECT_GT(json.at("efficiency").get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(json.at("peak_gflops_per_thread").get<double>(),
                   json.at("peak_gflops").get<double>());  // one thread
  EXPECT_GT(json.at("dense_seconds").get<double>(), 0.0);
  EXPECT_GT(json.at("sparse_vs_ideal").get<double>(), 0.0);
  EXPECT_FALSE(json.at("isa").get<std::string>().empty());
  // The peak is that of the unit the products ran on (AMX, dot product or FMA).
  EXPECT_EQ(json.at("peak_unit"), json.at("pv_product"));
}

// The peak is measured on the same SIMD target as the kernel, so forcing a
// target through the environment must move both.
class CliPerTarget : public tilesplash::test::TargetTest {};

TEST_P(CliPerTarget, BenchFollowsForcedIsa) {
  const std::string& isa = GetParam();
  if (tilesplash::test::is_test_target(isa))
    GTEST_SKIP() << isa << " exists in the test binary only, not in the CLI";
  const RunResult r = run_cli(
      "bench --mask causal --q-len 64 --head-dim 64 --dtype bf16 --threads 1 --block-kv 64 "
      "--repeats 1 --json",
      "TILESPLASH_ISA=" + isa);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json.at("isa").get<std::string>(), isa);
  EXPECT_GT(json.at("peak_gflops").get<double>(), 0.0);
}

TILESPLASH_INSTANTIATE_FOR_TARGETS(CliPerTarget);

}  // namespace

#else  // TILESPLASH_CLI_PATH

TEST(Cli, Skipped) {
  GTEST_SKIP() << "the tilesplash CLI is not built (TILESPLASH_BUILD_TOOLS=OFF)";
}

#endif  // TILESPLASH_CLI_PATH
