// The CLI at the edges a careful user reaches: outputs that would destroy an
// input or each other, destinations that cannot be written, masks that do not
// fit the tensors, non-finite option values, and messages that must name the
// option typed and the value expected. Every case is exit 2 with one line on
// stderr, found before any work, with every file left as it was.
#include <gtest/gtest.h>

#ifdef TILESPLASH_CLI_PATH

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "support/shell.h"
#include "tensor_io_files.h"
#include "tilesplash/tensor_io.h"

namespace tilesplash {
namespace {

class CliRobust : public ::testing::Test {
 protected:
  void SetUp() override {
    Tensor t = Tensor::zeros(DType::kF32, {2, 60, 16});
    for (std::int64_t i = 0; i < t.numel(); ++i) {
      const float x = static_cast<float>(i % 7) * 0.25f - 0.5f;
      std::memcpy(t.data.data() + i * 4, &x, 4);
    }
    for (const char* name : {"q.npy", "k.npy", "v.npy"}) write_npy(dir_.file(name), t);
    write_safetensors(dir_.file("a.safetensors"), {{"q", t}, {"k", t}, {"v", t}});
    original_ = test::read_bytes(dir_.file("q.npy"));
    original_st_ = test::read_bytes(dir_.file("a.safetensors"));
  }

  struct Result {
    int exit_code = -1;
    std::string err;
  };
  Result run(const std::string& args, const std::string& env = "") {
    const std::string err_path = dir_.file("stderr.txt");
    const test::ShellResult shell =
        test::run_shell(env + " " + TILESPLASH_CLI_PATH + " " + args + " >/dev/null 2>" + err_path);
    Result r{shell.exit_code, test::read_bytes(err_path)};
    std::filesystem::remove(err_path);
    return r;
  }
  std::string f(const std::string& name) const { return dir_.file(name); }
  std::string qkv() const {
    return "attend --q " + f("q.npy") + " --k " + f("k.npy") + " --v " + f("v.npy");
  }

  // Exit 2, one "tilesplash: error:" line containing every needle, inputs
  // unchanged and nothing but the inputs in the directory.
  void expect_refused(const Result& r, const std::vector<std::string>& needles) {
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.err.rfind("tilesplash: error: ", 0), 0u) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line expected: " << r.err;
    for (const std::string& needle : needles) {
      EXPECT_NE(r.err.find(needle), std::string::npos) << "'" << needle << "' not in " << r.err;
    }
    EXPECT_EQ(test::read_bytes(f("q.npy")), original_);
    EXPECT_EQ(test::read_bytes(f("a.safetensors")), original_st_);
    std::vector<std::string> names = dir_.entries();
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"a.safetensors", "k.npy", "q.npy", "v.npy"}));
  }

  test::TempDir dir_;
  std::string original_, original_st_;
};

TEST_F(CliRobust, OutputsNeverReplaceInputsOrEachOther) {
  expect_refused(run(qkv() + " --out " + f("q.npy")),
                 {"--out: '", "is the same file as the input --q"});
  expect_refused(run("attend --q " + f("a.safetensors:q") + " --k " + f("a.safetensors:k") +
                     " --v " + f("a.safetensors:v") + " --out " + f("a.safetensors:o")),
                 {"--out: ", "same file as the input --q"});
  expect_refused(run(qkv() + " --out " + f("o.npy") + " --lse " + f("o.npy")),
                 {"--lse: ", "same file as the output --out"});
  expect_refused(run(qkv() + " --out " + f("o.npy") + " --report " + f("v.npy")),
                 {"--report: ", "same file as the input --v"});
  expect_refused(run(qkv() + " --out " + f("o.npy") + " --report " + f("o.npy")),
                 {"--report: ", "same file as the output --out"});
}

TEST_F(CliRobust, UnwritableDestinationsAreFoundBeforeAnyWork) {
  expect_refused(run(qkv() + " --out " + f("o.npy") + " --lse " + f("missing/lse.npy")),
                 {"--lse: directory '", "does not exist"});
  expect_refused(run(qkv() + " --out " + f("o.npy") + " --report " + f("missing/r.json")),
                 {"--report: ", "does not exist"});
  expect_refused(run(qkv() + " --out " + dir_.file("")), {"--out: ", "expected path.npy"});
  std::filesystem::create_directories(f("d.npy"));
  const Result r = run(qkv() + " --out " + f("d.npy"));
  std::filesystem::remove(f("d.npy"));
  expect_refused(r, {"--out: '", "is a directory; expected a file path"});
  expect_refused(run("plan --mask causal --q-len 64 --png " + f("missing/p.png")),
                 {"--png: directory '", "does not exist"});
}

TEST_F(CliRobust, AllOutputsAreWrittenTogether) {
  const Result r = run(qkv() + " --out " + f("o.npy") + " --lse " + f("l.npy") + " --report " +
                       f("r.json") + " --quiet");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* name : {"o.npy", "l.npy", "r.json"}) {
    EXPECT_TRUE(std::filesystem::exists(f(name))) << name;
  }
  EXPECT_EQ(dir_.entries().size(), 7u) << "no temporary may be left behind";
}

TEST_F(CliRobust, MaskGeometryMustMatchTheTensors) {
  expect_refused(
      run(qkv() + " --out " + f("o.npy") + " --mask temporal:frames=3,height=4,width=4,band=8"),
      {"frames=3,height=4,width=4", "must both be 48; got q_len 60, kv_len 60"});
}

// CLI11's Range and PositiveNumber let NaN through; every float option is
// finite-checked, and the message gives the interval, not 300 digits.
TEST_F(CliRobust, NonFiniteAndOutOfRangeNumbersAreRefused) {
  const std::string out = " --out " + f("o.npy");
  const std::string route = out + " --route frames=3,height=4,width=5";
  const std::pair<std::string, std::string> cases[] = {
      {qkv() + out + " --scale nan",
       "--scale: expected a number in (0, 2.3586574359122396e+38], got 'nan'"},
      {qkv() + out + " --scale 0",
       "--scale: expected a number in (0, 2.3586574359122396e+38], got '0'"},
      {qkv() + out + " --scale inf",
       "--scale: expected a number in (0, 2.3586574359122396e+38], got 'inf'"},
      {qkv() + route + " --density nan", "--density: expected a number in (0, 1], got 'nan'"},
      {qkv() + route + " --density 0", "--density: expected a number in (0, 1], got '0'"},
      {"route --preset wan2.1-1.3b-480p --band-frames nan", "--band-frames: expected a number"},
      {"demo --density nan", "--density: expected a number in (0, 1], got 'nan'"},
      {"tune --preset wan2.1-1.3b-480p --head-dim 64 --dtype f32 --density nan", "--density: "},
      {"tune --mask causal --q-len 64 --head-dim 64 --dtype f32 --budget-seconds nan",
       "--budget-seconds: expected a number in [0.001, 1000000], got 'nan'"},
  };
  for (const auto& [args, needle] : cases) {
    SCOPED_TRACE(args);
    const Result r = run(args);
    EXPECT_LT(r.err.size(), 200u) << r.err;
    expect_refused(r, {needle});
  }
}

TEST_F(CliRobust, MessagesNameTheFileOptionOrVariable) {
  test::TempDir extra;  // apart, so expect_refused sees only the usual inputs
  const auto e = [&](const std::string& name) { return extra.file(name); };
  write_npy(e("d0.npy"), Tensor::zeros(DType::kF32, {2, 60, 0}));
  write_npy(e("l0.npy"), Tensor::zeros(DType::kF32, {2, 0, 16}));
  write_npy(e("k48.npy"), Tensor::zeros(DType::kF32, {2, 48, 16}));
  const std::string out = " --out " + f("o.npy");
  const auto same = [&](const std::string& file) {
    return "attend --q " + e(file) + " --k " + e(file) + " --v " + e(file) + out;
  };
  struct Case {
    std::string args, env;
    std::vector<std::string> needles;
  };
  const Case cases[] = {
      {same("d0.npy"), "", {"d0.npy': head dim is 0", "expected at least 1"}},
      {same("l0.npy"), "", {"l0.npy': sequence length is 0", "expected at least 1"}},
      {"attend --q " + f("q.npy") + " --k " + e("k48.npy") + " --v " + e("k48.npy") + out +
           " --route frames=3,height=4,width=5",
       "",
       {"k48.npy': --route frames=3,height=4,width=5 needs 60 tokens per head, the file has 48"}},
      {qkv() + out, "TILESPLASH_ISA=bogus", {"TILESPLASH_ISA: unknown target 'bogus'"}},
      {qkv() + out + " --route frames=100000,height=100000,width=100000",
       "",
       {"video geometry: frames * height"}},
      {qkv() + out + " --mask 'caus\xc3\xa4l'", "", {"unknown mask 'caus\xc3\xa4l'"}},
      {qkv() + out + " --mask '\xc3\xa4'", "", {"unknown mask '\xc3\xa4'"}},
      {qkv() + out + " --route ''", "", {"--route: expected a preset name"}},
      {qkv() + out + " --report ''", "", {"--report: expected a file path, got ''"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const Result r = run(c.args, c.env);
    EXPECT_EQ(r.err.find("video geometry: video geometry"), std::string::npos) << r.err;
    expect_refused(r, c.needles);
  }
}

// A path is quoted wherever an error shows it, inputs as outputs, with control
// bytes as \xNN: a newline cannot break the one-line rule and an escape
// sequence never reaches the terminal. Arguments are built by printf in the
// shell, so the CLI receives the raw bytes.
TEST_F(CliRobust, PathsInMessagesAreQuotedAndEscaped) {
  const std::string odd = "\"$(printf '" + f("odd") + "\\nname\\033[2J.npy')\"";
  const std::string shown = "'" + f("odd") + "\\x0aname\\x1b[2J.npy'";
  const std::string out = " --out " + f("o.npy");
  const std::pair<std::string, std::string> cases[] = {
      {"attend --q " + odd + " --k " + f("k.npy") + " --v " + f("v.npy") + out,
       shown + ": cannot open"},
      {qkv() + " --out " + odd + " --lse " + odd, "--lse: " + shown + " is the same file as"},
      {"plan --mask causal --q-len 64 --png " + f("missing") + "\"$(printf '\\033]0;x')\"/p.png",
       "--png: directory '" + f("missing") + "\\x1b]0;x' does not exist"},
  };
  for (const auto& [args, needle] : cases) {
    SCOPED_TRACE(args);
    const Result r = run(args);
    EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
    expect_refused(r, {needle});
  }
}

// route's --png is declared like every other output, so a destination that
// cannot be written is found before the heads run (not as exit 1 after them),
// and "" is refused instead of meaning "no picture".
TEST_F(CliRobust, RoutePictureDestinationIsCheckedBeforeAnyWork) {
  const std::string route =
      "route --geometry frames=3,height=4,width=4 --head-dim 16 --heads 2 --error 0.1 --png ";
  expect_refused(run(route + f("missing/heads.png")), {"--png: directory '", "does not exist"});
  std::filesystem::create_directories(f("d.png"));
  const Result r = run(route + f("d.png"));
  std::filesystem::remove(f("d.png"));
  expect_refused(r, {"--png: '", "is a directory; expected a file path"});
  expect_refused(run(route + "''"), {"--png: expected a file path, got ''"});
}

// The error-target flags are checked as the library checks VideoAttention's
// error=, densities= and band=: an empty value or a band beside a ladder is
// refused by name instead of running something else.
TEST_F(CliRobust, RouteErrorTargetFlagsAreCheckedLikeTheLibrary) {
  const std::string route = "route --geometry frames=3,height=4,width=4 --head-dim 16 --heads 2 ";
  const std::pair<std::string, std::string> cases[] = {
      {route + "--error ''", "--error: expected a relative L2 error > 0, got ''"},
      {route + "--error 0.1 --densities ''",
       "--densities: expected numbers in (0, 1] separated by commas, got ''"},
      {route + "--densities ''", "--densities: expected numbers in (0, 1]"},
      {route + "--error 0.1 --band 30", "--band: with --error the ladder's densities choose"},
      {route + "--error 0.1 --band-frames 1", "--band-frames: with --error the ladder's"},
      {route + "--densities 0.1,0.2", "--densities: a density ladder applies with --error only"},
  };
  for (const auto& [args, needle] : cases) {
    SCOPED_TRACE(args);
    expect_refused(run(args), {needle});
  }
}

// Integer options give both ends of their range, also past 2^31.
TEST_F(CliRobust, IntegerMessagesGiveTheWholeRange) {
  const Result r = run("plan --mask causal --q-len 2147483648");
  expect_refused(r, {"--q-len: expected an integer from 1 to 2147483647, got '2147483648'"});
  EXPECT_EQ(run("plan --mask causal --q-len 2147483647 --kv-len 64 --block-q 4096 --block-kv 64")
                .exit_code,
            0);
}

}  // namespace
}  // namespace tilesplash

#endif  // TILESPLASH_CLI_PATH
