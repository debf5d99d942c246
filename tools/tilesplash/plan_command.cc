// `tilesplash plan`: builds the tile plan of a mask over a shape and reports
// how many tiles the kernel would visit, with what mask work, at what cost to
// build; optionally the whole grid of tile kinds.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "commands.h"
#include "options.h"
#include "report.h"
#include "tile_png.h"
#include "tilesplash/mask.h"
#include "tilesplash/mask_spec.h"
#include "tilesplash/output_set.h"
#include "tilesplash/plan.h"
#include "tilesplash/video.h"
#include "tilesplash/video_plan.h"

namespace tilesplash::cli {
namespace {

// --kinds prints one letter per tile; beyond this many blocks per side the
// grid is no longer something to read, and it grows quadratically.
constexpr std::int64_t kMaxKindsBlocks = 4096;

struct PlanOptions {
  std::string mask;
  std::int64_t q_len = 0;
  std::int64_t kv_len = 0;  // 0: same as q_len
  std::int64_t block_q = 128;
  std::int64_t block_kv = 128;
  bool json = false;
  bool kinds = false;
  std::string png;  // --png FILE: picture of the tile map
};

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// A plan of billions of tokens takes minutes with nothing to show until it is
// done: while one is built, a line on stderr every few seconds says what is
// being planned and for how long, from the first second on a terminal, else
// once the plan has run past two seconds (short plans print nothing). The
// builder reports no fraction done, so the lines give the elapsed time and
// --help the time of the largest plans.
class PlanProgress {
 public:
  explicit PlanProgress(std::string what) : what_(std::move(what)), thread_([this] { run(); }) {}
  PlanProgress(const PlanProgress&) = delete;
  PlanProgress& operator=(const PlanProgress&) = delete;
  ~PlanProgress() {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    done_changed_.notify_all();
    thread_.join();
  }

 private:
  void run() {
    using namespace std::chrono_literals;
    const auto start = std::chrono::steady_clock::now();
    auto next = start + (isatty(STDERR_FILENO) != 0 ? 1s : 2s);
    std::unique_lock<std::mutex> lock(mutex_);
    while (!done_changed_.wait_until(lock, next, [this] { return done_; })) {
      const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
      std::cerr << fmt::format("tilesplash plan: building the plan of {}: {:.0f} s so far\n", what_,
                               elapsed.count())
                << std::flush;
      next += 5s;
    }
  }

  std::string what_;
  std::mutex mutex_;
  std::condition_variable done_changed_;
  bool done_ = false;
  std::thread thread_;  // last: it starts once the members above exist
};

nlohmann::ordered_json kinds_grid(const TilePlan& plan) {
  auto grid = nlohmann::ordered_json::array();
  for (std::int64_t qb = 0; qb < plan.num_q_blocks(); ++qb) {
    auto row = nlohmann::ordered_json::array();
    for (std::int64_t kb = 0; kb < plan.num_kv_blocks(); ++kb) {
      row.push_back(std::string(1, to_char(plan.kind(qb, kb))));
    }
    grid.push_back(std::move(row));
  }
  return grid;
}

void print_kinds_text(const nlohmann::ordered_json& record, std::ostream& out) {
  if (!record.contains("kinds")) return;
  out << "\nkinds (rows: q blocks, columns: kv blocks; E empty, P partial, F full):\n";
  std::string row;
  for (const auto& kinds : record["kinds"]) {
    row.clear();
    for (const auto& kind : kinds) row += kind.get<std::string>();
    out << row << '\n';
  }
}

void run_plan(const PlanOptions& options) {
  OutputSet outputs;  // checks the destination before any work
  if (!options.png.empty()) outputs.add_output(options.png, "--png");
  const std::int64_t kv_len = options.kv_len > 0 ? options.kv_len : options.q_len;
  if (options.kinds) {
    const std::int64_t q_blocks = ceil_div(options.q_len, options.block_q);
    const std::int64_t kv_blocks = ceil_div(kv_len, options.block_kv);
    if (q_blocks > kMaxKindsBlocks || kv_blocks > kMaxKindsBlocks) {
      throw std::invalid_argument(
          fmt::format("--kinds: the tile grid is {} x {} blocks; --kinds prints at most {} x {} "
                      "(use larger --block-q / --block-kv)",
                      q_blocks, kv_blocks, kMaxKindsBlocks, kMaxKindsBlocks));
    }
  }

  const Mask mask = parse_mask_spec(options.mask);
  // A video mask covers exactly its geometry's tokens (and a permuted one
  // plans its run-order mask over all of them): say so in the CLI's terms.
  try {
    mask.check_lengths(options.q_len, kv_len);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("--q-len/--kv-len: {}", e.what()));
  }
  const MaskPlan planned = [&] {
    const PlanProgress progress(fmt::format("{} x {} ({} x {} tiles of {} x {})", options.q_len,
                                            kv_len, ceil_div(options.q_len, options.block_q),
                                            ceil_div(kv_len, options.block_kv), options.block_q,
                                            options.block_kv));
    return plan_mask(mask, options.q_len, kv_len, {options.block_q, options.block_kv});
  }();
  const TilePlan& plan = *planned.plan;

  nlohmann::ordered_json record;
  for (const auto& field : plan_fields(planned)) {
    std::visit([&](const auto& value) { record[field.first] = value; }, field.second);
  }
  if (!options.png.empty()) {
    // Frame ticks only where the plan is in frame-major order (not a permuted one).
    TileMapOptions png_options;
    png_options.geometry = planned.frame_geometry;
    write_png(options.png, render_tile_map(plan, png_options));
    record["png"] = options.png;
  }

  Report report{std::move(record), {scalar_table, print_kinds_text}};
  if (options.kinds) report.record["kinds"] = kinds_grid(plan);
  emit(report, table_or_json(options.json), std::cout);
}

}  // namespace

Command add_plan_command(CLI::App& parent) {
  auto options = std::make_shared<PlanOptions>();
  CLI::App* app = parent.add_subcommand(
      "plan", "Build the tile plan of a mask and report its tile counts and cost");
  app->footer(
      "Tiles are empty (skipped), full (mask-free fast path) or partial (bitmasked);\n"
      "identical partial tiles are stored once (distinct_partial).\n\n"
      "Video SPECs (docs/masks.md) take GEOM = frames=F,height=h,width=w[,text=T,\n"
      "text_at=before|after] or preset=NAME and cover exactly its tokens. A temporal\n"
      "mask is planned as it runs, its band in token-major order (the sink as its own\n"
      "segment, sink_*); an sta mask in tile-major order (only full and empty tiles\n"
      "when the blocks divide its tiles); both add plan_order, plan_note, plan_mask,\n"
      "mask_kept_pairs and\n"
      "mask_density. A radial mask adds block_vote_density (the paper's block vote).\n\n"
      "Time: linear in the q-blocks and the tiles they keep. A plan of 2,000,000,000\n"
      "tokens (--mask local:left=128,right=128, 15.6 million q-blocks of 128, three\n"
      "tiles each) takes about 5 minutes (14 s per 100 million tokens on a loaded\n"
      "2-core Intel Xeon). A plan running past 2 s (1 s when stderr is a terminal)\n"
      "prints a line on stderr every 5 s with the time so far.\n\n"
      "Examples:\n"
      "  tilesplash plan --mask causal --q-len 64 --block-q 16 --block-kv 16 --kinds\n"
      "  tilesplash plan --mask 'local:left=4096,right=4096' --q-len 32760 --json\n"
      "  tilesplash plan --mask 'causal|random:density=0.1,seed=1' --q-len 4096 --kv-len 8192\n"
      "  tilesplash plan --mask causal --q-len 4096 --png causal.png\n"
      "  tilesplash plan --mask 'radial:preset=wan2.1-1.3b-480p,decay=0.2,sink' --q-len 32760 \\\n"
      "      --png radial.png\n"
      "  tilesplash plan --mask 'sta:frames=30,height=48,width=80,tile=6x8x8,window=3x3x3' \\\n"
      "      --q-len 115200 --block-q 384 --block-kv 384");

  app->add_option("--mask", options->mask, spec_synopsis())
      ->required()
      ->type_name("SPEC")
      ->check(mask_spec());
  app->add_option("--q-len", options->q_len, "Query sequence length")
      ->required()
      ->type_name("N")
      ->transform(integer_in(1, kMaxLength));
  app->add_option("--kv-len", options->kv_len, "Key/value sequence length (default: --q-len)")
      ->type_name("M")
      ->transform(integer_in(1, kMaxLength));
  app->add_option("--block-q", options->block_q, "Query rows per tile")
      ->type_name("BQ")
      ->capture_default_str()
      ->transform(integer_in(1, kMaxLength));
  app->add_option("--block-kv", options->block_kv, "Keys per tile")
      ->type_name("BK")
      ->capture_default_str()
      ->transform(integer_in(1, kMaxLength));
  app->add_flag("--json", options->json, "Print one JSON object instead of a table");
  app->add_flag("--kinds", options->kinds,
                fmt::format("Also print the grid of tile kinds (E/P/F), at most {} x {} tiles",
                            kMaxKindsBlocks, kMaxKindsBlocks));
  app->add_option("--png", options->png,
                  "Also write a PNG of the tile map (empty grey, partial orange, full blue)")
      ->type_name("FILE")
      ->check(non_empty("a file path"));

  return {app, [options] { run_plan(*options); }};
}

}  // namespace tilesplash::cli
