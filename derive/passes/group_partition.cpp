// Pass derive-group-partition. Parameters: the candidate's `weave` and `group` directives.
// Contract: checks that every fused statement is woven over each axis (paper §2.3; kernel_illegal,
// the checker's rule, on those directives alone), or reduces a grouped axis by a contraction whose
// blocks' partial sums the atomic-sum lemma lets meet in global memory (derive/lemmas.hpp) and, once priced, reports which inputs lack the
// axis and are therefore re-read by every group along it (the source of the memory dependence of
// the cost). Writes `group g` on each such axis (`group 1` for weave); no directive, no label.
#include <algorithm>

#include "derive/check_schedule.hpp"
#include "derive/labelled.hpp"
#include "derive/pass.hpp"

namespace napkin {

std::vector<Step> group_partition_pass(const PassContext& c, KernelCandidate& k, Diagram& ir) {
  KernelPlan partitions;
  for (const auto& dir : k.params.directives)
    if (dir.kind == Directive::Kind::weave || dir.kind == Directive::Kind::group) partitions.directives.push_back(dir);
  if (k.refused = kernel_illegal(c.diagram, c.opt, k.statements, partitions, k.escaping); !k.refused.empty()) return {};
  write_labels(ir, partitions, Directive::Kind::group);
  if (!k.priced) return {};
  const KernelChoice& kc = *k.priced;
  std::vector<Step> out;
  for (const auto& dir : partitions.directives) {
    if (dir.kind != Directive::Kind::weave && dir.kind != Directive::Kind::group) continue;
    for (const auto& axis : dir.names) {
      const AxisPlan& ap = kc.cost.axes.at(axis);
      std::vector<std::string> users, rereaders, atomic;
      for (const auto& s : kc.plan.fused())
        for (const auto& w : c.weave)
          if (w.statement->name == s && w.touches(axis)) (w.role(axis) == AxisRole::reduced ? atomic : users).push_back(s);
      for (const auto& in : kc.cost.inputs) {
        const auto& ax = *c.diagram.array_axes(in);
        if (std::find(ax.begin(), ax.end(), axis) == ax.end()) rereaders.push_back(in);
      }
      auto list = [](const std::vector<std::string>& v) {
        std::string s;
        for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
        return s;
      };
      std::string move = dir.kind == Directive::Kind::weave ? "weave " + axis : "group " + axis + " by " + std::to_string(dir.size);
      std::string detail = std::to_string(ap.count) + " groups of " + std::to_string(ap.tile) + " along " + axis;
      if (!rereaders.empty()) detail += "; " + list(rereaders) + " lack" + (rereaders.size() == 1 ? "s " : " ") + axis +
                                        " and " + (rereaders.size() == 1 ? "is" : "are") + " re-read by each group";
      std::string licence = "group partition (paper §2.3): " + axis + " is woven by " + list(users);
      if (!atomic.empty())
        licence += "; " + list(atomic) + " reduce" + (atomic.size() == 1 ? "s" : "") + " it, each block adding its partial sums into global memory by atomic adds (" +
                   lemma("atomic-sum").source + ")";
      out.push_back({"derive-group-partition", kc.plan.name, move, licence, detail});
    }
  }
  return out;
}

}  // namespace napkin
