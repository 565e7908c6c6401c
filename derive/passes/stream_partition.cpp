// Pass derive-stream-partition. Parameters: the candidate's `stream` directives (checked with its
// group directives). Contract: checks that the lemma library makes every fused statement
// streamable along each streamed axis (kernel_illegal, the checker's rule: derive/lemmas) and
// keeps the lemmas; once priced, names the lemma of each statement and its carried state.
// Writes `stream s` (`stream s twice` for two passes) on each streamed axis; a kernel without a
// stream is left unchanged and gives no step.
#include <algorithm>

#include "derive/check_schedule.hpp"
#include "derive/labelled.hpp"
#include "derive/pass.hpp"

namespace napkin {

std::vector<Step> stream_partition_pass(const PassContext& c, KernelCandidate& k, Diagram& ir) {
  if (k.refused = kernel_illegal(c.diagram, c.opt, k.statements, k.params, k.escaping, &k.lemmas); !k.refused.empty()) return {};
  write_labels(ir, k.params, Directive::Kind::stream);
  auto st = k.params.stream();
  if (!st || !k.priced) return {};
  const KernelChoice& kc = *k.priced;
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
