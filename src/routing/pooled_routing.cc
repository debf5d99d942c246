// A routed head whose choices include its own pooled selection (a mix with
// pooled among its families; front_door.h: decide_with_pooled). The shared
// candidates' masks are one stacked kernel call for every head (router.h);
// a pooled selection is made from the head's own Q and K, so it is scored
// per head instead, on the same sampled rows, and joins the head's table of
// (density, MSE) before the one rule decides. Nothing else of the router
// changes: its call, its chains and the shared candidates stay as they are.
#include <cmath>
#include <utility>
#include <vector>

#include "routing/front_door.h"
#include "routing/router.h"

namespace tilesplash {

RouteDecision VideoAttention::Impl::decide_with_pooled(
    const TensorView& q, const TensorView& k, const TensorView& v, std::int64_t h,
    const std::vector<std::int64_t>& rows, const std::optional<detail::KeyPadding>& keys,
    std::vector<double> mse, double power, const RoutePolicy& policy) {
  PooledOptions o = *options.pooled;
  const double scale = options.scale ? *options.scale : 1.0 / std::sqrt(double(q.dim));
  std::vector<PooledSelection> rungs;
  if (options.error) {
    // Its own ladder, p in each row order, as a pooled head alone steps over
    // (run_pooled).
    rungs = pooled_ladder_selections(geometry, q, k, h, scale, o, threads, context.get());
  } else {
    // At its density or p, in each row order: the rule keeps the better one.
    rungs = pooled_order_selections(geometry, q, k, h, scale, o, threads, context.get());
  }
  const std::vector<double> errors =
      pooled_sampled_errors(q, k, v, h, scale, rows, rungs, keys ? keys->limit : -1);
  // The shared candidates' decision fills the report's fields; the rule then
  // runs again over the candidates and the rungs together.
  RouteDecision decision = detail::decide(candidates, mse, power, policy);
  std::vector<double> densities;
  for (const MaskCandidate& c : candidates) densities.push_back(c.density);
  for (std::size_t i = 0; i < rungs.size(); ++i) {
    densities.push_back(rungs[i].density);
    // The rung's error as an MSE against the router's dense rows: errors
    // order like MSEs at one power, which is all the rule compares.
    mse.push_back(errors[i] * errors[i] * power);
    decision.mse.push_back(mse.back());
    decision.error.push_back(errors[i]);
  }
  const RouteChoice choice = decide_route(densities, mse, power, policy);
  decision.index = choice.index;
  decision.target_met = choice.target_met;
  if (choice.index >= candidates.size()) {
    decision.choice = detail::kPooledChoice;
    routed_pooled[static_cast<std::size_t>(h)] = std::move(rungs[choice.index - candidates.size()]);
  } else {
    decision.choice = HeadMask(candidates[choice.index].name);
  }
  return decision;
}

}  // namespace tilesplash
