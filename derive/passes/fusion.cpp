// Pass derive-fusion. Contract: for a kernel of two or more statements, checks that its set is
// convex and that the fused chain is streamable along its streamed axis (the checker's rules) and
// reports the HBM traffic the fusion saves against the unfused schedule of the same statements.
// Rewrites the diagram into the kernel's own (kernel_diagram: its statements; what it reads from
// outside as inputs, what leaves it as outputs), for every kernel; a one-statement kernel gives
// no step.
#include <algorithm>

#include "derive/check_schedule.hpp"
#include "derive/labelled.hpp"
#include "derive/pass.hpp"

namespace napkin {

std::vector<Step> fusion_pass(const PassContext& c, std::size_t k, Diagram& ir) {
  const KernelChoice& kc = c.chosen.kernels.at(k);
  auto fused = kc.plan.fused();
  ir = kernel_diagram(c.program, c.diagram, c.weave, fused, kc.plan.name, c.opt);
  if (fused.size() < 2) return {};
  double unfused_hbm = 0;
  for (const auto& u : c.unfused.kernels)
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
