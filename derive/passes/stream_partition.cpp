// Pass derive-stream-partition. Contract: for a kernel with a `stream` directive, names the lemma
// that makes each fused statement streamable along the axis and its carried state (derive/lemmas).
// Writes `stream s` (`stream s twice` for two passes) on each streamed axis; a kernel without a
// stream is left unchanged and gives no step.
#include <algorithm>

#include "derive/labelled.hpp"
#include "derive/pass.hpp"

namespace napkin {

std::vector<Step> stream_partition_pass(const PassContext& c, std::size_t k, Diagram& ir) {
  const KernelChoice& kc = c.chosen.kernels.at(k);
  write_labels(ir, kc.plan, Directive::Kind::stream);
  auto st = kc.plan.stream();
  if (!st) return {};
  std::string license, state;
  for (const auto& u : kc.lemmas) {
    license += (license.empty() ? "" : "; ") + u.lemma + " for " + u.statement;
    if (u.lemma != "elementwise") {
      const Lemma& l = lemma(u.lemma);
      if (state.find(l.state) == std::string::npos) state += (state.empty() ? "" : "; ") + l.state + " [" + l.source + "]";
    }
  }
  const AxisPlan& ap = kc.cost.axes.at(st->first);
  (void)c;
  return {{"derive-stream-partition", kc.plan.name, "stream " + st->first + " by " + std::to_string(st->second),
           "lemma library (paper §3): " + license,
           std::to_string(ap.count) + " steps of " + std::to_string(ap.tile) + "; carried state: " + state +
               "; residency scales with " + std::to_string(ap.tile) + " instead of " + std::to_string(ap.extent)}};
}

}  // namespace napkin
