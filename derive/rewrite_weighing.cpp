// Shared by the passes that rewrite the diagram before the search; see rewrite_weighing.hpp.
#include "derive/rewrite_weighing.hpp"

namespace napkin {

std::set<std::string> names_in_use(const Program& p, const Diagram& d) {
  std::set<std::string> used;
  for (const auto& [name, _] : p.diagrams) used.insert(name);
  for (const auto* x : d.axes()) used.insert(x->name);
  for (const auto* i : d.inputs()) used.insert(i->name);
  for (const auto* s : d.statements()) used.insert(s->name);
  return used;
}

std::string fresh_name(std::set<std::string>& used, const std::string& base) {
  std::string name = base;
  for (int i = 2; !used.insert(name).second; ++i) name = base + std::to_string(i);
  return name;
}

std::string joined_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

WeighedSearch given_search(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt,
                           const SearchOptions& so, std::optional<WeighedSearch> prior) {
  if (prior) return std::move(*prior);
  return weigh_search(p, d, sizes, hw, opt, so);
}

RewriteWeighing weigh_rewrites(const Program& p, const Diagram& d, std::vector<RewriteCandidate>& candidates, const SizeMap& sizes,
                               const Hardware& hw, const ModelOptions& opt, const SearchOptions& so, std::optional<WeighedSearch> prior,
                               const std::function<bool(const RewriteCandidate&)>& usable) {
  RewriteWeighing out;
  out.given = given_search(p, d, sizes, hw, opt, so, std::move(prior));
  double best = out.given.objective;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    auto& c = candidates[i];
    c.weighed = weigh_search(p, *c.diagram, sizes, hw, opt, so);
    if (c.weighed.objective < best && (!usable || usable(c))) {
      best = c.weighed.objective;
      out.best = i;
    }
  }
  return out;
}

void keep_weighed(RewriteResult& out, RewriteWeighing& w, std::vector<RewriteCandidate>& candidates) {
  if (w.best) {
    out.rewritten = candidates[*w.best].diagram;
    out.kept = std::move(candidates[*w.best].weighed);
  } else {
    out.kept = std::move(w.given);
  }
}

}  // namespace napkin
