// Pass derive-weave-analysis. Contract: reads the weave analysis of every statement; returns one
// step per statement naming the axes it is woven over, reduces and normalises. Writes no label
// (weaving is read from the diagram, not chosen);
// runs first, once per diagram.
#include <algorithm>

#include "derive/pass.hpp"

namespace napkin {

std::vector<Step> weave_analysis_pass(const PassContext& c, KernelCandidate&, Diagram&) {
  std::vector<Step> out;
  for (const auto& w : c.weave) {
    std::vector<std::string> woven, reduced, normalised;
    for (const auto* a : c.diagram.axes()) {
      if (!w.touches(a->name)) continue;
      const RoleSource& r = w.roles.at(a->name);
      if (r.role == AxisRole::woven) woven.push_back(a->name);
      else if (r.role == AxisRole::reduced) reduced.push_back(a->name + " (" + std::string(op_name(r.op)) + ")");
      else normalised.push_back(a->name + " (" + std::string(op_name(r.op)) + ")");
    }
    auto list = [](const std::vector<std::string>& v) {
      std::string s;
      for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
      return s;
    };
    std::string detail = "woven over " + (woven.empty() ? std::string("nothing") : list(woven));
    if (!reduced.empty()) detail += "; reduces " + list(reduced);
    if (!normalised.empty()) detail += "; normalises along " + list(normalised);
    if (w.has_call) detail += "; calls another diagram (derived separately)";
    out.push_back({"derive-weave-analysis", "", w.statement->name, "NCD weaving (paper §2.1)", detail});
  }
  return out;
}

}  // namespace napkin
