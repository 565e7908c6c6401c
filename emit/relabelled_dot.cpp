#include "emit/relabelled_dot.hpp"

#include <fmt/core.h>

#include "derive/pass.hpp"

namespace napkin {

DotRelabelling relabelling_of(const SearchResult& r) {
  DotRelabelling out;
  for (const auto& k : r.kernels) {
    const std::string& name = k.plan.name;
    out.kernels.push_back(name);
    for (const auto& s : k.plan.fused()) out.kernel_of[s] = name;
    out.level[name] = k.cost.level;
    std::string moves;
    for (const auto& [a, ap] : k.cost.axes) {
      if (ap.kind == AxisPlan::Kind::group) out.axis_note[name][a] = "g" + std::to_string(ap.tile);
      if (ap.kind == AxisPlan::Kind::stream) out.axis_note[name][a] = "s" + std::to_string(ap.tile);
    }
    for (const auto& d : k.plan.directives) {
      if (d.kind == Directive::Kind::fuse) continue;
      moves += (moves.empty() ? "" : "; ") + directive_text(d);
    }
    out.caption[name] = "<font point-size=\"9\">" + (moves.empty() ? std::string("one launch") : moves) +
                        "<br align=\"left\"/>HBM " + human_bytes(k.cost.hbm_bytes) + " · L2→SMEM " +
                        human_bytes(k.cost.l2_to_smem_bytes) + " · SMEM→reg " + human_bytes(k.cost.smem_read_bytes) +
                        fmt::format(" · {:.1f} us", k.cost.t_total * 1e6) + "<br align=\"left\"/></font>";
  }
  return out;
}

}  // namespace napkin
