// Pass derive-fusion. Parameters: the candidate's `fuse` statements. Contract: resolves them in
// the weave analysis (the statements and escaping arrays the later passes check against), refuses
// a call fused with anything or partitioned (call_illegal, the checker's rule; that the set is
// convex and in dataflow order is the partitioner's and the checker's, schedule-wide), rewrites the
// diagram into the kernel's own (kernel_diagram: its statements; what it reads from outside as
// inputs, what leaves it as outputs), for every kernel; once priced, reports the HBM traffic the
// fusion saves against the unfused schedule of the same statements (the streamed chain's lemmas
// are derive-stream-partition's). A one-statement kernel gives no step.
#include <algorithm>

#include "derive/check_schedule.hpp"
#include "derive/labelled.hpp"
#include "derive/pass.hpp"

namespace napkin {

std::vector<Step> fusion_pass(const PassContext& c, KernelCandidate& k, Diagram& ir) {
  auto fused = k.params.fused();
  k.statements.clear();
  for (const auto& s : fused)
    for (const auto& w : c.weave)
      if (w.statement->name == s) k.statements.push_back(&w);
  NAPKIN_ASSERT(k.statements.size() == fused.size()) << "kernel '" << k.params.name << "' fuses a statement the diagram lacks";
  k.escaping = escaping_arrays(c.diagram, k.statements, c.weave);
  if (k.refused = call_illegal(k.statements, k.params); !k.refused.empty()) return {};
  ir = kernel_diagram(c.program, c.diagram, c.weave, fused, k.params.name, c.opt);
  if (!k.priced || fused.size() < 2) return {};
  NAPKIN_ASSERT(c.unfused) << "derive-fusion reports against the unfused schedule";
  const KernelChoice& kc = *k.priced;
  double unfused_hbm = 0;
  for (const auto& u : c.unfused->kernels)
    for (const auto& s : u.plan.fused())
      if (std::find(fused.begin(), fused.end(), s) != fused.end()) unfused_hbm += u.cost.hbm_bytes;
  std::string names, kept;
  for (std::size_t i = 0; i < fused.size(); ++i) names += (i ? ", " : "") + fused[i];
  for (const auto& a : kc.cost.internal) kept += (kept.empty() ? "" : ", ") + a;
  auto st = kc.plan.stream();
  std::string why = st ? "the fused chain is streamable along " + st->first + " (every operation has a lemma) and keeps its outputs"
                       : "no axis is streamed; the fused statements share their tiles";
  return {{"derive-fusion", kc.plan.name, "fuse " + names, "Fusion Theorem (paper App. A.1): " + why,
           (kept.empty() ? std::string("no intermediate") : kept + " never leave" + (kc.cost.internal.size() == 1 ? "s" : "") +
                                                              " the SM") +
               "; HBM traffic " + human_bytes(unfused_hbm) + " unfused -> " + human_bytes(kc.cost.hbm_bytes) + " fused"}};
}

}  // namespace napkin
