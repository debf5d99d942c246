// --p, --floor, --gate, --order and --families (method_flags.h).
#include "method_flags.h"

#include "options.h"
#include "tilesplash/pooled.h"

namespace tilesplash::cli {

void MethodFlags::apply(MethodOptions& options) const {
  if (p_option != nullptr && p_option->count() > 0) options.p = p;
  if (floor_option != nullptr && floor_option->count() > 0) options.floor = floor;
  if (gate_option != nullptr && gate_option->count() > 0) options.gate = gate;
  if (order_option != nullptr && order_option->count() > 0) {
    options.order = parse_pooled_order(order);
  }
  options.families = families;
}

void add_method_flags(CLI::App& app, MethodFlags& flags, const std::string& prefix) {
  const std::string pooled =
      prefix + "Pooled scores (--method pooled, or mix with pooled in --families): ";
  flags.p_option = app.add_option("--p", flags.p,
                                  pooled +
                                      "keep each query tile's key tiles to this cumulative "
                                      "pooled mass instead of --density, in (0, 1] (not with "
                                      "--error, whose ladder is p)")
                       ->type_name("P")
                       ->transform(number_in(0.0, 1.0, true));
  flags.floor_option =
      app.add_option("--floor", flags.floor, pooled + "key tiles kept per query tile at least")
          ->type_name("N")
          ->transform(integer_in(0, kMaxLength));
  flags.gate_option = app.add_option("--gate", flags.gate,
                                     pooled +
                                         "key tiles whose mean cosine to their mean key is below "
                                         "this are always kept, in [-1, 1]")
                          ->type_name("G")
                          ->transform(number_in(-1.0, 1.0));
  flags.order_option =
      app.add_option("--order", flags.order,
                     pooled +
                         "the row order each head cuts its tiles in: frame (frame-major), token "
                         "(token-major) or auto (each head the one that scores better; default)")
          ->type_name("ORDER")
          ->check(CLI::IsMember({"auto", "frame", "token"}));
  app.add_option("--families", flags.families,
                 prefix +
                     "mix: the methods it routes among, comma-separated (default: every mask "
                     "family; pooled adds each head's own pooled tiles)")
      ->type_name("NAMES")
      ->delimiter(',');
}

}  // namespace tilesplash::cli
