// Pass derive-divisibility (the step it reports; the constraints are in derive/divisibility.cpp).
// Contract: lists, for each partitioned axis of a kernel, the LCM its tile size must be a multiple
// of and the reasons; says when a whole axis does not divide and is predicated. Writes no label:
// the sizes it constrains are the group and stream labels already written; refuses nothing (an
// edge that does not divide is predicated). Reports only once the candidate is priced.
#include <algorithm>

#include "derive/divisibility.hpp"
#include "derive/pass.hpp"

namespace napkin {

std::vector<Step> divisibility_pass(const PassContext& c, KernelCandidate& k, Diagram&) {
  if (!k.priced) return {};
  const KernelChoice& kc = *k.priced;
  std::vector<const StatementWeave*> stmts;
  for (const auto& s : kc.plan.fused())
    for (const auto& w : c.weave)
      if (w.statement->name == s) stmts.push_back(&w);
  std::string warp_axis;
  for (const auto* a : c.diagram.axes())
    if (kc.cost.axes.count(a->name) && kc.cost.axes.at(a->name).kind == AxisPlan::Kind::group && kc.cost.axes.at(a->name).tile > 1) {
      warp_axis = a->name;
      break;
    }
  std::vector<std::string> hbm = kc.cost.inputs;
  hbm.insert(hbm.end(), kc.cost.outputs.begin(), kc.cost.outputs.end());
  auto div = divisibility(c.program, c.diagram, stmts, hbm, c.hw, c.opt, kc.plan.warps(), warp_axis);
  std::string detail;
  for (const auto& [axis, dv] : div) {
    if (!kc.cost.axes.count(axis) || kc.cost.axes.at(axis).kind == AxisPlan::Kind::whole) continue;
    const AxisPlan& ap = kc.cost.axes.at(axis);
    std::string reasons;
    for (const auto& r : dv.reasons) reasons += (reasons.empty() ? "" : ", ") + r;
    detail += (detail.empty() ? "" : "; ") + axis + " multiple of " + std::to_string(dv.lcm) + " = lcm(" + reasons + ")";
    if (ap.tile % dv.lcm != 0 || ap.extent % ap.tile != 0) detail += " [tile " + std::to_string(ap.tile) + " of " + std::to_string(ap.extent) + ": edges predicated]";
  }
  if (detail.empty()) detail = "no constraint (no partitioned axis is coalesced or an MMA dimension)";
  return {{"derive-divisibility", kc.plan.name, "tile sizes", "paper §5.2; PTX ISA 9.7.14 (mma.sync shapes)", detail}};
}

}  // namespace napkin
