// Pass derive-warp-recursion. Parameters: the candidate's `warps` directive (at most 32:
// warps_illegal, the checker's rule). Contract: splits a kernel's thread-block tile over its warps along
// the first grouped axis (a group partition one level down, paper §2.3) and reports each warp's
// rows and register tile. Writes `warps w` on the axis the split runs along (labelled.hpp); a
// kernel without a warps directive (a call) is left unchanged; one without a grouped axis gives
// no step.
#include <algorithm>

#include "derive/check_schedule.hpp"
#include "derive/labelled.hpp"
#include "derive/pass.hpp"

namespace napkin {

std::vector<Step> warp_recursion_pass(const PassContext& c, KernelCandidate& k, Diagram& ir) {
  if (const Directive* w = k.params.find(Directive::Kind::warps))
    if (k.refused = warps_illegal(*w); !k.refused.empty()) return {};
  write_labels(ir, k.params, Directive::Kind::warps);
  if (!k.priced) return {};
  const KernelChoice& kc = *k.priced;
  for (const auto* a : c.diagram.axes()) {
    auto it = kc.cost.axes.find(a->name);
    if (it == kc.cost.axes.end() || it->second.kind != AxisPlan::Kind::group || it->second.tile <= 1) continue;
    int w = kc.plan.warps();
    std::int64_t rows = (it->second.tile + w - 1) / w;
    return {{"derive-warp-recursion", kc.plan.name, "warps " + std::to_string(w),
             "group partition one level down (paper §2.3)",
             "each of " + std::to_string(w) + " warps owns " + std::to_string(rows) + " of the " +
                 std::to_string(it->second.tile) + " " + a->name + " rows of the tile; register tile " +
                 human_bytes(kc.cost.register_bytes / w) + " per warp (" + std::to_string(kc.cost.registers_per_thread) +
                 " registers per thread)"}};
  }
  return {};
}

}  // namespace napkin
