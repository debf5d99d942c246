// `tilesplash attend`: runs block-sparse attention on Q, K, V read from .npy or
// .safetensors files (e.g. activations dumped from a real model) and writes
// the output (and optionally the LSE) back in the input's layout, so the
// kernel can be checked against PyTorch without any glue code. Every head
// uses one --mask, or --route routes each head as the video front door does.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "commands.h"
#include "options.h"
#include "progress.h"
#include "report.h"
#include "tilesplash/attention.h"
#include "tilesplash/batched_attention.h"
#include "tilesplash/kernel_limits.h"
#include "tilesplash/mask_spec.h"
#include "tilesplash/output_set.h"
#include "tilesplash/plan.h"
#include "tilesplash/plan_cache.h"
#include "tilesplash/routing.h"
#include "tilesplash/routing_layout.h"
#include "tilesplash/tensor_io.h"
#include "tilesplash/threading.h"
#include "tilesplash/video.h"

namespace tilesplash::cli {
namespace {

struct AttendOptions {
  std::string q, k, v, out, lse, report;
  std::string layout = "hnd";
  std::string mask;
  std::string route;
  std::string method = "svg";  // with --route
  double density = 0.25;
  double scale = 0.0;  // 0: default 1/sqrt(d)
  std::int64_t block_q = 128;
  std::int64_t block_kv = 128;
  std::int64_t threads = 0;
  std::string out_dtype;  // empty: the input's
  std::string precision = "default";
  bool json = false;
  bool quiet = false;
};

// Where an output goes: a .npy path, or a .safetensors path and tensor name.
struct OutputSpec {
  std::string path;
  std::optional<std::string> tensor;  // set for .safetensors
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

OutputSpec parse_output(const std::string& spec, const std::string& option,
                        const std::string& default_name) {
  if (ends_with(spec, ".npy")) return {spec, std::nullopt};
  const std::string ext = ".safetensors";
  const std::size_t at = spec.rfind(ext);
  if (at != std::string::npos && at > 0) {
    const std::string rest = spec.substr(at + ext.size());
    if (rest.empty()) return {spec, default_name};
    if (rest.size() > 1 && rest[0] == ':') return {spec.substr(0, at + ext.size()), rest.substr(1)};
  }
  throw std::invalid_argument(
      fmt::format("{}: expected path.npy, path.safetensors or path.safetensors:name, got {}",
                  option, quoted_name(spec)));
}

void stage_output(OutputSet& outputs, const OutputSpec& spec, Tensor tensor) {
  if (!spec.tensor) {
    outputs.stage_npy(spec.path, tensor);
  } else {
    std::vector<std::pair<std::string, Tensor>> tensors;
    tensors.emplace_back(*spec.tensor, std::move(tensor));
    outputs.stage_safetensors(spec.path, tensors);
  }
}

void run_attend(const AttendOptions& options) {
  using Clock = std::chrono::steady_clock;
  const Layout layout = *parse_layout(options.layout);
  const OutputSpec out_spec = parse_output(options.out, "--out", "out");
  const std::optional<OutputSpec> lse_spec =
      options.lse.empty() ? std::nullopt
                          : std::optional<OutputSpec>(parse_output(options.lse, "--lse", "lse"));
  // No output may replace an input or another output, and every destination
  // must be writable, before any work; all outputs are committed together.
  OutputSet outputs;
  outputs.add_input(tensor_spec_file(options.q), "--q");
  outputs.add_input(tensor_spec_file(options.k), "--k");
  outputs.add_input(tensor_spec_file(options.v), "--v");
  outputs.add_output(out_spec.path, "--out");
  if (lse_spec) outputs.add_output(lse_spec->path, "--lse");
  if (!options.report.empty()) outputs.add_output(options.report, "--report");
  // Everything that can be checked is checked before any work starts.
  std::optional<Mask> mask;
  std::optional<VideoGeometry> geometry;
  if (!options.route.empty()) {
    geometry = parse_video_shape(options.route).geometry;
  } else {
    mask = parse_mask_spec(options.mask.empty() ? "dense" : options.mask);
  }

  const Tensor q = read_tensor(options.q);
  const Tensor k = read_tensor(options.k);
  const Tensor v = read_tensor(options.v);
  check_qkv(q, k, v, layout, {options.q, options.k, options.v});
  const LayoutDims qd = layout_dims(q, layout, options.q);
  const LayoutDims kd = layout_dims(k, layout, options.k);
  const LayoutDims vd = layout_dims(v, layout, options.v);
  for (const auto& [file, len] : {std::pair{options.q, qd.len}, std::pair{options.k, kd.len}}) {
    if (geometry && len != geometry->tokens()) {
      throw InputError(fmt::format("{}: --route {} needs {} tokens per head, the file has {}",
                                   quoted_name(file), geometry->to_string(), geometry->tokens(),
                                   len));
    }
  }
  const DType out_dtype = options.out_dtype.empty() ? q.dtype : *parse_dtype(options.out_dtype);
  Tensor out = Tensor::zeros(out_dtype, layout_shape(layout, {qd.batch, qd.heads, qd.len, vd.dim}));
  std::vector<std::int64_t> lse_shape = {qd.heads, qd.len};
  if (layout != Layout::kHND) lse_shape.insert(lse_shape.begin(), qd.batch);
  Tensor lse = Tensor::zeros(DType::kF32, lse_shape);
  float* lse_data = reinterpret_cast<float*>(lse.data.data());

  const BlockSizes blocks{options.block_q, options.block_kv};
  AttentionOptions attention_options;
  if (options.scale > 0.0) attention_options.scale = static_cast<float>(options.scale);
  attention_options.threads = static_cast<int>(options.threads);
  attention_options.precision = *parse_precision(options.precision);  // checked by the option

  nlohmann::ordered_json record;
  record["q"] = options.q;
  record["q_shape"] = shape_to_string(q.shape);
  record["k_shape"] = shape_to_string(k.shape);
  record["v_shape"] = shape_to_string(v.shape);
  record["layout"] = options.layout;
  record["dtype"] = std::string(to_string(q.dtype));
  record["out"] = options.out;
  record["out_dtype"] = std::string(to_string(out_dtype));
  record["batch"] = qd.batch;
  record["heads"] = qd.heads;
  record["q_len"] = qd.len;
  record["kv_len"] = kd.len;
  record["block_q"] = options.block_q;
  record["block_kv"] = options.block_kv;
  record["isa"] = active_isa();
  record["precision"] = options.precision;

  const auto start = Clock::now();
  Progress progress("attend", qd.batch * qd.heads, progress_wanted(options.quiet));
  const LayoutArgs args{layout, strided(q), strided(k), strided(v), mutable_strided(out), lse_data};
  const BatchProgress advance = [&](std::int64_t first, std::int64_t count) {
    progress.set_detail(fmt::format("batch {}", first + count - 1));
    progress.advance(count * qd.heads);
  };
  auto head_rows = nlohmann::ordered_json::array();
  const auto context = std::make_shared<ThreadingContext>(static_cast<int>(options.threads));
  if (mask) {
    MaskedAttentionOptions masked;
    masked.attention = attention_options;
    masked.block_q = blocks.block_q;
    masked.block_kv = blocks.block_kv;
    PlanCache plans;
    masked.plans = &plans;
    masked.progress = advance;
    AttentionRunner runner(context);
    const MaskedAttentionResult result = masked_attention(runner, *mask, args, masked);
    record["mask"] = mask->to_string();
    record["density"] = result.plan->stats().density;
    record["plan_seconds"] = result.plan->stats().build_seconds;
  } else {
    VideoAttentionOptions video_options =
        method_attention_options(options.method, *geometry, {options.density});
    video_options.blocks = blocks;
    video_options.threads = static_cast<int>(options.threads);
    video_options.scale = attention_options.scale;
    video_options.precision = attention_options.precision;
    VideoAttention attention(*geometry, video_options, context);
    record["route"] = geometry->to_string();
    record["method"] = options.method;
    record["band"] = attention.band();
    double kept = 0.0;
    const std::vector<LayerReport> reports = layout_video_attention(attention, args, 0, 0, advance);
    for (std::size_t b = 0; b < reports.size(); ++b) {
      for (const HeadReport& head : reports[b].heads) {
        nlohmann::ordered_json row;
        row["batch"] = static_cast<std::int64_t>(b);
        row.update(to_json(head_fields(head, attention.candidates())));
        kept += head.density;
        head_rows.push_back(std::move(row));
      }
    }
    record["density"] = kept / static_cast<double>(qd.batch * qd.heads);
  }
  progress.finish();
  record["seconds"] = std::chrono::duration<double>(Clock::now() - start).count();

  stage_output(outputs, out_spec, std::move(out));
  if (lse_spec) stage_output(outputs, *lse_spec, std::move(lse));
  if (!options.report.empty()) {
    nlohmann::ordered_json report = record;
    report["heads_table"] = head_rows;
    outputs.stage(options.report, report.dump(2) + "\n");
  }
  outputs.commit();
  if (options.quiet) return;
  if (options.json) {
    if (!head_rows.empty()) record["heads_table"] = std::move(head_rows);
    print_json(record, std::cout);
    return;
  }
  print_table(record, std::cout);
}

}  // namespace

Command add_attend_command(CLI::App& parent) {
  auto options = std::make_shared<AttendOptions>();
  CLI::App* app = parent.add_subcommand(
      "attend", "Run sparse attention on Q, K, V from .npy / .safetensors files");
  app->footer(
      "FILE is path.npy or path.safetensors[:tensor_name]. The output has the input's\n"
      "layout and dtype (--out-dtype f32 to override); --lse writes the log-sum-exp\n"
      "per row as f32 [heads, N] (hnd) or [batch, heads, N]. Without --mask or --route\n"
      "attention is dense. Malformed files exit with status 2 and nothing is written.\n\n"
      "Examples:\n"
      "  tilesplash attend --q q.npy --k k.npy --v v.npy --out o.npy --mask causal\n"
      "  tilesplash attend --q qkv.safetensors:q --k qkv.safetensors:k --v qkv.safetensors:v \\\n"
      "      --layout bhnd --out o.safetensors:o --route wan2.1-1.3b-480p --report heads.json\n"
      "  tilesplash attend --q q.npy --k k.npy --v v.npy --out o.npy \\\n"
      "      --route frames=4,height=8,width=8 --density 0.3 --method mix --out-dtype f32\n\n" +
      methods_text());
  app->add_option("--q", options->q, "Queries")->required()->type_name("FILE");
  app->add_option("--k", options->k, "Keys")->required()->type_name("FILE");
  app->add_option("--v", options->v, "Values")->required()->type_name("FILE");
  app->add_option("--out", options->out,
                  "Output file (.npy or .safetensors[:name], default name "
                  "'out')")
      ->required()
      ->type_name("FILE");
  app->add_option("--lse", options->lse, "Also write the log-sum-exp (f32)")
      ->type_name("FILE")
      ->check(non_empty("a file path"));
  app->add_option("--layout", options->layout, "hnd [H,N,d], bhnd [B,H,N,d] or bnhd [B,N,H,d]")
      ->capture_default_str()
      ->check(CLI::IsMember({"hnd", "bhnd", "bnhd"}));
  CLI::Option* mask = app->add_option("--mask", options->mask,
                                      "Mask SPEC every head uses (see `tilesplash plan --help`)")
                          ->type_name("SPEC")
                          ->check(mask_spec());
  CLI::Option* route =
      app->add_option("--route", options->route,
                      "Run every head under --method (default svg: routed spatial/temporal) on\n"
                      "this video shape: a preset name or\n"
                      "frames=F,height=h,width=w[,text=T,text_at=before|after]")
          ->type_name("GEOMETRY_OR_PRESET")
          ->check(non_empty("a preset name or frames=F,height=h,width=w"))
          ->excludes(mask);
  add_density_option(*app, options->density, "With --route: target mask density")->needs(route);
  add_method_option(*app, options->method, "With --route: ")->needs(route);
  app->add_option("--scale", options->scale, "Softmax scale (default 1/sqrt(d))")
      ->type_name("X")
      ->transform(number_in(0.0, kernel_limits::kMaxScale, true));
  add_tile_options(*app, options->block_q, options->block_kv);
  add_threads_option(*app, options->threads);
  add_precision_option(*app, options->precision);
  app->add_option("--out-dtype", options->out_dtype, "Output dtype (default: the input's)")
      ->type_name("DTYPE")
      ->check(dtype_name());
  app->add_option("--report", options->report, "Write a JSON report (per-head table with --route)")
      ->type_name("FILE.json")
      ->check(non_empty("a file path"));
  app->add_flag("--json", options->json, "Print one JSON object instead of a table");
  app->add_flag("--quiet", options->quiet, "No progress bar and no summary");
  return {app, [options] { run_attend(*options); }};
}

}  // namespace tilesplash::cli
