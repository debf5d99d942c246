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
#include "names.h"
#include "options.h"
#include "progress.h"
#include "report.h"
#include "tilesplash/attention.h"
#include "tilesplash/batched_attention.h"
#include "tilesplash/kernel_limits.h"
#include "tilesplash/mask_spec.h"
#include "tilesplash/methods.h"
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
  std::string method = std::string(default_method());  // with --route
  double density = 0.25;
  double scale = 0.0;  // 0: default 1/sqrt(d)
  std::int64_t block_q = 128;
  std::int64_t block_kv = 128;
  std::int64_t threads = 0;
  std::string out_dtype;  // empty: the input's
  std::string precision = "default";
  bool compensate = false;
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

// ---- resolve -----------------------------------------------------------------

// Where the outputs go. No output may replace an input or another output, and
// every destination must be writable, before any work; all outputs are
// committed together.
struct Destinations {
  OutputSpec out;
  std::optional<OutputSpec> lse;
  OutputSet outputs;
};

void check_destinations(const AttendOptions& options, Destinations& to) {
  to.out = parse_output(options.out, "--out", "out");
  if (!options.lse.empty()) to.lse = parse_output(options.lse, "--lse", "lse");
  to.outputs.add_input(tensor_spec_file(options.q), "--q");
  to.outputs.add_input(tensor_spec_file(options.k), "--k");
  to.outputs.add_input(tensor_spec_file(options.v), "--v");
  to.outputs.add_output(to.out.path, "--out");
  if (to.lse) to.outputs.add_output(to.lse->path, "--lse");
  if (!options.report.empty()) to.outputs.add_output(options.report, "--report");
}

// The inputs read and checked, and the outputs they are attended into.
struct AttendSetup {
  Layout layout = Layout::kHND;
  std::optional<Mask> mask;               // --mask (dense without --route)
  std::optional<VideoGeometry> geometry;  // --route
  Tensor q, k, v, out, lse;
  LayoutDims qd, kd;
  AttentionOptions attention;
};

void read_inputs(const AttendOptions& options, AttendSetup& setup) {
  setup.q = read_tensor(options.q);
  setup.k = read_tensor(options.k);
  setup.v = read_tensor(options.v);
  check_qkv(setup.q, setup.k, setup.v, setup.layout, {options.q, options.k, options.v});
  setup.qd = layout_dims(setup.q, setup.layout, options.q);
  setup.kd = layout_dims(setup.k, setup.layout, options.k);
  const LayoutDims vd = layout_dims(setup.v, setup.layout, options.v);
  for (const auto& [file, len] :
       {std::pair{options.q, setup.qd.len}, std::pair{options.k, setup.kd.len}}) {
    if (setup.geometry && len != setup.geometry->tokens()) {
      throw InputError(fmt::format("{}: --route {} needs {} tokens per head, the file has {}",
                                   quoted_name(file), setup.geometry->to_string(),
                                   setup.geometry->tokens(), len));
    }
  }
  const LayoutDims& qd = setup.qd;
  const DType out_dtype =
      options.out_dtype.empty() ? setup.q.dtype : *parse_dtype(options.out_dtype);
  setup.out =
      Tensor::zeros(out_dtype, layout_shape(setup.layout, {qd.batch, qd.heads, qd.len, vd.dim}));
  std::vector<std::int64_t> lse_shape = {qd.heads, qd.len};
  if (setup.layout != Layout::kHND) lse_shape.insert(lse_shape.begin(), qd.batch);
  setup.lse = Tensor::zeros(DType::kF32, lse_shape);
}

AttendSetup resolve(const AttendOptions& options) {
  AttendSetup setup;
  setup.layout = *parse_layout(options.layout);
  // Everything that can be checked is checked before any work starts.
  if (!options.route.empty()) {
    setup.geometry = parse_video_shape(options.route).geometry;
  } else {
    setup.mask = parse_mask_spec(options.mask.empty() ? "dense" : options.mask);
  }
  read_inputs(options, setup);
  if (options.scale > 0.0) setup.attention.scale = static_cast<float>(options.scale);
  setup.attention.threads = static_cast<int>(options.threads);
  setup.attention.precision = *parse_precision(options.precision);  // checked by the option
  setup.attention.compensate = options.compensate;
  return setup;
}

// ---- run -----------------------------------------------------------------------

// Every head under one mask: its density and plan time into the record.
void run_masked(const AttendOptions& options, const AttendSetup& setup, const LayoutArgs& args,
                const BatchProgress& advance, const std::shared_ptr<ThreadingContext>& context,
                nlohmann::ordered_json& record) {
  MaskedAttentionOptions masked;
  masked.attention = setup.attention;
  masked.block_q = options.block_q;
  masked.block_kv = options.block_kv;
  PlanCache plans;
  masked.plans = &plans;
  masked.progress = advance;
  const std::unique_ptr<AttentionBackend> backend = make_backend("cpu", context);
  const MaskedAttentionResult result = masked_attention(*backend, *setup.mask, args, masked);
  record["mask"] = setup.mask->to_string();
  record["density"] = result.plan->stats().density;
  record["plan_seconds"] = result.plan->stats().build_seconds;
}

// Every head routed by the video front door: a row a head, the mean density.
nlohmann::ordered_json run_routed(const AttendOptions& options, const AttendSetup& setup,
                                  const LayoutArgs& args, const BatchProgress& advance,
                                  const std::shared_ptr<ThreadingContext>& context,
                                  nlohmann::ordered_json& record) {
  VideoAttentionOptions video_options =
      method_attention_options(options.method, *setup.geometry, {options.density});
  video_options.blocks = {options.block_q, options.block_kv};
  video_options.threads = static_cast<int>(options.threads);
  video_options.scale = setup.attention.scale;
  video_options.precision = setup.attention.precision;
  video_options.compensate = setup.attention.compensate;
  VideoAttention attention(*setup.geometry, video_options, context);
  record["route"] = setup.geometry->to_string();
  record["method"] = options.method;
  record["band"] = attention.band();
  double kept = 0.0;
  auto rows = nlohmann::ordered_json::array();
  const std::vector<LayerReport> reports = layout_video_attention(attention, args, 0, 0, advance);
  for (std::size_t b = 0; b < reports.size(); ++b) {
    for (const HeadReport& head : reports[b].heads) {
      nlohmann::ordered_json row;
      row["batch"] = static_cast<std::int64_t>(b);
      row.update(to_json(head_fields(head, attention.candidates())));
      kept += head.density;
      rows.push_back(std::move(row));
    }
  }
  record["density"] = kept / static_cast<double>(setup.qd.batch * setup.qd.heads);
  return rows;
}

// Runs every head, the record's run fields and the head rows (routed) filled.
nlohmann::ordered_json run(const AttendOptions& options, AttendSetup& setup,
                           nlohmann::ordered_json& record) {
  using Clock = std::chrono::steady_clock;
  const LayoutDims& qd = setup.qd;
  const auto start = Clock::now();
  Progress progress("attend", qd.batch * qd.heads, progress_wanted(options.quiet));
  float* lse_data = reinterpret_cast<float*>(setup.lse.data.data());
  const LayoutArgs args{setup.layout,     strided(setup.q),           strided(setup.k),
                        strided(setup.v), mutable_strided(setup.out), lse_data};
  const BatchProgress advance = [&](std::int64_t first, std::int64_t count) {
    progress.set_detail(fmt::format("batch {}", first + count - 1));
    progress.advance(count * qd.heads);
  };
  auto rows = nlohmann::ordered_json::array();
  const auto context = std::make_shared<ThreadingContext>(static_cast<int>(options.threads));
  if (setup.mask) {
    run_masked(options, setup, args, advance, context, record);
  } else {
    rows = run_routed(options, setup, args, advance, context, record);
  }
  progress.finish();
  record["seconds"] = std::chrono::duration<double>(Clock::now() - start).count();
  return rows;
}

// ---- report ----------------------------------------------------------------------

nlohmann::ordered_json report_inputs(const AttendOptions& options, const AttendSetup& setup) {
  nlohmann::ordered_json record;
  record["q"] = options.q;
  record["q_shape"] = shape_to_string(setup.q.shape);
  record["k_shape"] = shape_to_string(setup.k.shape);
  record["v_shape"] = shape_to_string(setup.v.shape);
  record["layout"] = options.layout;
  record["dtype"] = std::string(to_string(setup.q.dtype));
  record["out"] = options.out;
  record["out_dtype"] = std::string(to_string(setup.out.dtype));
  record["batch"] = setup.qd.batch;
  record["heads"] = setup.qd.heads;
  record["q_len"] = setup.qd.len;
  record["kv_len"] = setup.kd.len;
  record["block_q"] = options.block_q;
  record["block_kv"] = options.block_kv;
  record["isa"] = active_isa();
  record["precision"] = options.precision;
  record["compensate"] = options.compensate;
  return record;
}

// The outputs, and the --report file (the record with the head rows, empty
// under --mask), committed together.
void write_outputs(const AttendOptions& options, Destinations& to, AttendSetup& setup,
                   const Report& report, const nlohmann::ordered_json& rows) {
  stage_output(to.outputs, to.out, std::move(setup.out));
  if (to.lse) stage_output(to.outputs, *to.lse, std::move(setup.lse));
  if (!options.report.empty()) {
    nlohmann::ordered_json file = report.record;
    file["heads_table"] = rows;
    to.outputs.stage(options.report, file.dump(2) + "\n");
  }
  to.outputs.commit();
}

void run_attend(const AttendOptions& options) {
  Destinations to;
  check_destinations(options, to);
  AttendSetup setup = resolve(options);
  Report report;
  report.record = report_inputs(options, setup);
  nlohmann::ordered_json rows = run(options, setup, report.record);
  write_outputs(options, to, setup, report, rows);
  if (!rows.empty()) report.record["heads_table"] = std::move(rows);
  const Format format = options.quiet  ? Format::kNone
                        : options.json ? Format::kJson
                                       : Format::kTable;
  emit(report, format, std::cout);
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
      ->check(CLI::IsMember(names_of(kLayouts)));
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
  add_compensate_option(*app, options->compensate);
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
