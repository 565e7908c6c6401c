// Pass derive-atomic-accumulation: contractions given fp32 accumulators that blocks grouping the
// reduced axis add into by atomic adds, where the model prices it faster. The contract is in
// atomic_accumulation.hpp.
#include "derive/passes/atomic_accumulation.hpp"

#include <algorithm>
#include <set>

#include "derive/lemmas.hpp"
#include "derive/rewrite_weighing.hpp"
#include "diagrams/weave.hpp"

namespace napkin {

namespace {

/** The statement T of `w`'s contraction over `a` that makes it eligible (the file comment), or "". */
std::string eligible_tile(const std::vector<StatementWeave>& weave, const StatementWeave& w, const std::string& a) {
  const auto reducers = reducers_over(*w.statement->expr, a);
  if (reducers.size() != 1 || reducers[0]->op != Op::contract || reducers[0]->axes.size() != 1) return "";
  for (const auto& [axis, r] : w.roles)
    if (axis != a && r.role != AxisRole::woven) return "";
  if (w.statement->dtype == DType::fp32) return "";  // already an accumulator: no copy needed
  for (const auto& arg : reducers[0]->args) {
    if (arg->kind != Expr::Kind::ref) continue;
    const StatementWeave* t = nullptr;
    for (const auto& x : weave)
      if (x.statement->name == arg->name) t = &x;
    if (!t || !t->touches(a) || t->role(a) != AxisRole::woven) continue;
    for (const auto& z : weave) {
      if (&z == &w || std::find(z.reads.begin(), z.reads.end(), t->statement->name) == z.reads.end()) continue;
      if (!z.touches(a) || z.role(a) != AxisRole::woven) continue;
      if (std::any_of(z.roles.begin(), z.roles.end(), [](const auto& kv) { return kv.second.role == AxisRole::reduced; })) return t->statement->name;
    }
  }
  return "";
}

/** `d` with each statement of `chosen` split into an fp32 accumulator and a copy; `names` gets
 *  each accumulator's name. Empty where an accumulator would not meet the lemma's conditions. */
std::optional<Diagram> rewrite(const Program& p, const Diagram& d, const std::vector<const Statement*>& chosen, const std::string& a,
                               std::vector<std::string>& names) {
  std::set<std::string> used = names_in_use(p, d);
  Diagram out = d;
  out.items.clear();
  for (const auto& item : d.items) {
    const auto* st = std::get_if<Statement>(&item);
    if (!st || std::find(chosen.begin(), chosen.end(), st) == chosen.end()) {
      out.items.push_back(item);
      continue;
    }
    const std::string name = fresh_name(used, st->name + "_acc");
    names.push_back(name);
    Statement acc = *st;
    acc.name = name;
    acc.dtype = DType::fp32;
    acc.level.reset();
    acc.trivia = {};
    Statement copy = *st;
    copy.expr = make_ref(name, st->loc);
    out.items.emplace_back(std::move(acc));
    out.items.emplace_back(std::move(copy));
  }
  const auto weave = weave_analysis(p, out);
  for (const auto& w : weave)
    if (std::find(names.begin(), names.end(), w.statement->name) != names.end() && !atomic_problem(w, a, DType::fp32).empty()) return std::nullopt;
  return out;
}

/** True when the best schedule of `c` adds up an accumulator by atomic adds: a kernel computing
 *  one groups the axis it reduces (else the search streamed it: the rewrite is only a copy). */
bool adds_atomically(const RewriteCandidate& c) {
  const SearchResult* r = c.weighed.best();
  if (!r) return false;
  for (const auto& k : r->kernels) {
    const auto fused = k.plan.fused();
    const auto g = k.plan.group(c.axis);
    if (!g || *g < 2) continue;
    for (const auto& n : c.names)
      if (std::find(fused.begin(), fused.end(), n) != fused.end()) return true;
  }
  return false;
}

}  // namespace

AtomicAccumulationResult atomic_accumulations(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt,
                                              const SearchOptions& so, std::optional<WeighedSearch> prior) {
  AtomicAccumulationResult out;
  std::vector<RewriteCandidate> sides;
  if (hw.l2_atomic_bandwidth_bytes_per_s > 0) {  // else the model cannot price the adds: no candidate (cost.cpp says so of a schedule)
    const auto weave = weave_analysis(p, d);
    for (const auto* ax : d.axes()) {
      std::vector<const Statement*> chosen;
      for (const auto& w : weave)
        if (w.touches(ax->name) && w.role(ax->name) == AxisRole::reduced && !eligible_tile(weave, w, ax->name).empty()) chosen.push_back(w.statement);
      if (chosen.empty()) continue;
      RewriteCandidate s;
      s.axis = ax->name;
      auto rewritten = rewrite(p, d, chosen, ax->name, s.names);
      if (!rewritten) continue;
      s.diagram = std::make_shared<const Diagram>(std::move(*rewritten));
      sides.push_back(std::move(s));
    }
  }
  if (sides.empty()) {
    out.kept = std::move(prior);
    return out;
  }
  RewriteWeighing w = weigh_rewrites(p, d, sides, sizes, hw, opt, so, std::move(prior), adds_atomically);
  for (std::size_t i = 0; i < sides.size(); ++i) {
    const auto& s = sides[i];
    const std::string accs = joined_names(s.names);
    std::string what;
    if (w.best == i) what = "fp32 accumulators " + accs + " that thread blocks grouping " + s.axis + " add into by atomic adds, then a copy each";
    else if (!adds_atomically(s)) what = "no atomic accumulation over " + s.axis + " (the best schedule with " + accs + " does not group " + s.axis + " across thread blocks: a copy, no atomic adds)";
    else what = "no atomic accumulation over " + s.axis + " (" + (w.best ? "the accumulation over " + sides[*w.best].axis : std::string("the diagram as given")) +
                " is predicted faster)";
    out.steps.push_back({"derive-atomic-accumulation", accs, what,
                         "lemma atomic-sum (" + lemma("atomic-sum").source + "): the blocks' partial sums, added in any order, are the sum",
                         "predicted " + objective_text(s.weighed.objective, so) + " with the accumulators against " +
                             objective_text(w.given.objective, so) + " as given"});
  }
  keep_weighed(out, w, sides);
  return out;
}

std::vector<Step> atomic_accumulation_pass(const PassContext&, KernelCandidate&, Diagram&) { return {}; }

}  // namespace napkin
