// The video parts of the command line, run as a user would: `route` on small
// custom geometries (JSON and table), its errors, and `plan` on a temporal
// SPEC (the permuted band plan plus the sink segment). No timing assertions.
#include <gtest/gtest.h>

#ifdef TILESPLASH_CLI_PATH

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "support/shell.h"
#include "tilesplash/methods.h"

namespace {

struct Result {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};

Result run(const std::string& args) {
  const std::string command = std::string(TILESPLASH_CLI_PATH) + " " + args + " 2>&1";
  const tilesplash::test::ShellResult shell = tilesplash::test::run_shell(command);
  Result result;
  result.exit_code = shell.exit_code;
  result.out = shell.out;
  return result;
}

TEST(VideoCli, RouteJsonReportsEveryHead) {
  const Result r = run(
      "route --geometry frames=12,height=6,width=6,text=16,text_at=before --head-dim 32 --heads 6 "
      "--seed 3 --compare-dense --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto json = nlohmann::json::parse(r.out);
  ASSERT_EQ(json.at("heads").size(), 6u);
  EXPECT_EQ(json.at("tokens").get<int>(), 448);
  for (const auto& head : json.at("heads")) {
    // The library's head report (head_fields), then route's own columns.
    for (const char* key : {"head", "choice", "routed", "mse", "mse_spatial", "mse_temporal",
                            "density", "tiles_visited", "seconds", "permute_seconds", "planted",
                            "dense_ms", "cosine_vs_dense"}) {
      EXPECT_TRUE(head.contains(key)) << key;
    }
    const std::string planted = head.at("planted");
    if (planted != "ambiguous") {
      EXPECT_EQ(head.at("choice").get<std::string>(), planted);
      EXPECT_GE(head.at("cosine_vs_dense").get<double>(), 0.99);
    }
    // Routed between the svg pair: both sampled MSEs, the choice the smaller.
    ASSERT_TRUE(head.at("routed").get<bool>());
    const auto& mse = head.at("mse");
    ASSERT_EQ(mse.size(), 2u);
    EXPECT_EQ(mse.at("spatial").get<double>(), head.at("mse_spatial").get<double>());
    EXPECT_LE(mse.at(head.at("choice").get<std::string>()).get<double>(),
              std::min(mse.at("spatial").get<double>(), mse.at("temporal").get<double>()));
  }
  for (const char* key : {"routing_share", "permute_share", "speedup", "band", "sparse_ms"}) {
    EXPECT_TRUE(json.contains(key)) << key;
  }
}

TEST(VideoCli, RouteTableAndWarmup) {
  const Result table = run("route --geometry frames=4,height=4,width=4 --head-dim 16 --heads 2");
  ASSERT_EQ(table.exit_code, 0) << table.out;
  for (const char* word :
       {"planted", "choice", "mse", "density", "sparse_ms", "routing_share", "permute_share"}) {
    EXPECT_NE(table.out.find(word), std::string::npos) << word << "\n" << table.out;
  }
  const Result warm =
      run("route --geometry frames=4,height=4,width=4 --head-dim 16 --heads 2 --dense-layers 1 "
          "--json");
  ASSERT_EQ(warm.exit_code, 0) << warm.out;
  const auto json = nlohmann::json::parse(warm.out);
  EXPECT_TRUE(json.at("warmup_dense").get<bool>());
  for (const auto& head : json.at("heads")) {
    EXPECT_EQ(head.at("choice").get<std::string>(), "dense");
    EXPECT_TRUE(head.at("mse_spatial").is_null());
  }
}

// Every registered method runs through `route --method`, each head on one
// of the method's masks, and the report names them.
TEST(VideoCli, RouteRunsEveryRegisteredMethod) {
  for (const tilesplash::MethodInfo& method : tilesplash::methods()) {
    const std::string name(method.name);
    const Result r =
        run("route --geometry frames=7,height=8,width=8 --head-dim 16 --heads 2 "
            "--density 0.3 --json --method " +
            name);
    ASSERT_EQ(r.exit_code, 0) << name << ": " << r.out;
    const auto json = nlohmann::json::parse(r.out);
    EXPECT_EQ(json.at("method").get<std::string>(), name);
    for (const auto& head : json.at("heads")) {
      const std::string choice = head.at("choice");
      if (!method.mask_names.empty()) {
        EXPECT_NE(std::find(method.mask_names.begin(), method.mask_names.end(), choice),
                  method.mask_names.end())
            << name << " chose " << choice;
      }
      EXPECT_EQ(head.at("routed").get<bool>(), !head.at("mse").empty()) << name;
    }
  }
  const Result bad = run("route --geometry frames=2,height=2,width=2 --method radial --band 3");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.out.find("applies to method 'svg' only"), std::string::npos) << bad.out;
}

// Pooled's options and the mix's families as flags: the heads run them, and a
// flag of another method or out of range is refused by name.
TEST(VideoCli, RouteTakesPooledFlagsAndMixFamilies) {
  const std::string geometry = "route --geometry frames=4,height=16,width=16 --head-dim 16 ";
  Result r = run(geometry + "--heads 2 --json --method pooled --p 1 --floor 2 --gate -1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // The parsed document outlives the loop (a range-for over a member of a
  // temporary would iterate freed memory).
  nlohmann::json json = nlohmann::json::parse(r.out);
  for (const auto& head : json.at("heads")) {
    EXPECT_EQ(head.at("choice").get<std::string>(), "pooled");
    EXPECT_EQ(head.at("family").get<std::string>(), "pooled");
  }
  for (const auto& [order, ran] : {std::pair{"frame", "original"}, {"token", "token-major"}}) {
    r = run(geometry + "--heads 2 --json --method pooled --order " + order);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    json = nlohmann::json::parse(r.out);
    for (const auto& head : json.at("heads")) EXPECT_EQ(head.at("order").get<std::string>(), ran);
  }
  r = run(geometry + "--heads 2 --json --method mix --families spatial,temporal,pooled");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  json = nlohmann::json::parse(r.out);
  for (const auto& head : json.at("heads")) {
    EXPECT_TRUE(head.at("routed").get<bool>());
    EXPECT_EQ(head.at("mse").size(), 2u);  // the shared candidates: spatial, temporal
  }
  const std::array<std::pair<const char*, const char*>, 6> bad = {{
      {"--method pooled --p 1.5", "--p: expected a number in (0, 1]"},
      {"--method pooled --order rows", "--order: rows not in {auto,frame,token}"},
      {"--method svg --order token", "order: applies to heads that rank their own pooled"},
      {"--method pooled --gate -2", "--gate: expected a number in [-1, 1]"},
      {"--method radial --floor 2", "floor: applies to heads that rank their own pooled"},
      {"--method mix --families spatial,svg2", "families[1]: expected"},
  }};
  for (const auto& [args, message] : bad) {
    const Result e = run(geometry + args);
    EXPECT_NE(e.exit_code, 0) << args;
    EXPECT_NE(e.out.find(message), std::string::npos) << args << ": " << e.out;
  }
}

TEST(VideoCli, RouteErrorsAreBadInput) {
  Result r = run("route --preset wan-999p");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("wan2.1-14b-720p"), std::string::npos) << r.out;
  r = run("route --preset wan2.1-1.3b-480p --geometry frames=2,height=2,width=2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("exactly one of --preset"), std::string::npos) << r.out;
  r = run("route --geometry frames=2,height=2 --head-dim 16");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("missing 'width'"), std::string::npos) << r.out;
  r = run("route --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("tilesplash route --preset"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hunyuan-720p"), std::string::npos) << r.out;
}

TEST(VideoCli, PlanOnTemporalSpecShowsThePermutedBand) {
  const std::string spec =
      "temporal:frames=6,height=5,width=7,text=13,text_at=after,density=0.3,sink";
  const Result r = run("plan --mask '" + spec + "' --q-len 223 --block-q 16 --block-kv 64 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json.at("plan_order").get<std::string>(), "token-major");
  EXPECT_EQ(json.at("plan_mask").get<std::string>().rfind("spatial:", 0), 0u);
  EXPECT_EQ(json.at("kept_pairs").get<long>() + json.at("sink_kept_pairs").get<long>(),
            json.at("mask_kept_pairs").get<long>());
  const Result wrong = run("plan --mask '" + spec + "' --q-len 200");
  EXPECT_EQ(wrong.exit_code, 2);
  EXPECT_NE(wrong.out.find("--q-len/--kv-len: mask temporal:"), std::string::npos) << wrong.out;
  EXPECT_NE(wrong.out.find("must both be 223"), std::string::npos) << wrong.out;
  const Result spatial =
      run("plan --mask 'spatial:frames=6,height=5,width=7,band=40,sink' --q-len 210 --json");
  ASSERT_EQ(spatial.exit_code, 0) << spatial.out;
  EXPECT_FALSE(nlohmann::json::parse(spatial.out).contains("plan_order"));
}

}  // namespace

#endif  // TILESPLASH_CLI_PATH
