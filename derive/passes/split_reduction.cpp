// Pass derive-split-reduction: one reduced axis of a contraction split off into fp32 partials and
// a sum over them, where the model prices it faster. The contract is in split_reduction.hpp.
#include "derive/passes/split_reduction.hpp"

#include <algorithm>
#include <set>

#include "derive/rewrite_weighing.hpp"
#include "diagrams/graph_view.hpp"

namespace napkin {

namespace {

bool contains(const AxisList& axes, const std::string& a) { return std::find(axes.begin(), axes.end(), a) != axes.end(); }

/** True when `e` reads an array that carries axis `a` (an axis reference is a size: constant). */
bool carries(const Diagram& d, const Expr& e, const std::string& a) {
  bool found = false;
  walk(e, [&](const Expr& n) {
    if (n.kind != Expr::Kind::ref) return;
    if (const AxisList* ax = d.array_axes(n.name)) found |= contains(*ax, a);
  });
  return found;
}

/** The one pairwise contraction `e` is linear in (products, quotients with it in the numerator,
 *  negation, by factors free of every axis it reduces), or null. */
const Expr* linear_contraction(const Diagram& d, const Expr& e) {
  if (e.kind != Expr::Kind::apply) return nullptr;
  if (e.op == Op::contract) return e.args.size() == 2 ? &e : nullptr;
  if (e.op == Op::neg && e.args.size() == 1) return linear_contraction(d, *e.args[0]);
  if ((e.op != Op::mul && e.op != Op::div) || e.args.size() != 2) return nullptr;
  for (std::size_t i = 0; i < 2; ++i) {
    if (e.op == Op::div && i == 1) break;  // the contraction in the numerator only
    const Expr* c = linear_contraction(d, *e.args[i]);
    if (!c) continue;
    const Expr& other = *e.args[1 - i];
    for (const auto& r : c->axes)
      if (carries(d, other, r)) return nullptr;
    bool nested = false;
    walk(other, [&](const Expr& n) { nested |= n.kind == Expr::Kind::apply && n.op == Op::contract; });
    return nested ? nullptr : c;
  }
  return nullptr;
}

/** `e` with the contraction `target` reducing `axes` instead. */
ExprPtr without_axis(const ExprPtr& e, const Expr* target, const std::string& a) {
  if (e->kind != Expr::Kind::apply) return e;
  Expr n = *e;
  if (e.ptr.get() == target) {
    for (std::size_t i = 0; i < n.axes.size(); ++i)
      if (n.axes[i] == a) {
        n.axes.erase(n.axes.begin() + static_cast<std::ptrdiff_t>(i));
        if (i < n.axis_locs.size()) n.axis_locs.erase(n.axis_locs.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
    return rebuild(n);
  }
  for (auto& arg : n.args) arg = without_axis(arg, target, a);
  return rebuild(n);
}

/** The statements of `d` the split over `a` applies to (see the file comment). */
std::vector<const Statement*> eligible(const Diagram& d, const std::string& a) {
  std::vector<const Statement*> out;
  for (const auto* s : d.statements()) {
    const Expr* c = linear_contraction(d, *s->expr);
    if (c && c->axes.size() >= 2 && contains(c->axes, a) && !contains(s->axes, a)) out.push_back(s);
  }
  return out;
}

/** `d` with every statement of `split` split over `a`; `names` gets each partial's name. */
Diagram rewrite(const Program& p, const Diagram& d, const std::vector<const Statement*>& split, const std::string& a, std::vector<std::string>& names) {
  std::set<std::string> used = names_in_use(p, d);
  Diagram out = d;
  out.items.clear();
  for (const auto& item : d.items) {
    const auto* st = std::get_if<Statement>(&item);
    if (!st || std::find(split.begin(), split.end(), st) == split.end()) {
      out.items.push_back(item);
      continue;
    }
    const std::string name = fresh_name(used, st->name + "_" + a);
    names.push_back(name);
    Statement part;
    part.name = name;
    part.axes = st->axes;
    part.axes.insert(part.axes.empty() ? part.axes.end() : part.axes.end() - 1, a);  // Y's innermost axis stays innermost
    part.axis_locs.assign(part.axes.size(), st->loc);
    part.dtype = DType::fp32;
    part.expr = without_axis(st->expr, linear_contraction(d, *st->expr), a);
    part.loc = st->loc;
    Statement sum = *st;
    Expr red = *make_apply(Op::sum, {make_ref(name, st->loc)}, st->loc);
    red.axes = {a};
    red.axis_locs = {st->loc};
    sum.expr = rebuild(red);
    out.items.emplace_back(std::move(part));
    out.items.emplace_back(std::move(sum));
  }
  return out;
}


}  // namespace

SplitReductionResult split_reductions(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt,
                                      const SearchOptions& so, std::optional<WeighedSearch> prior) {
  SplitReductionResult out;
  std::vector<RewriteCandidate> sides;
  for (const auto* ax : d.axes()) {
    const auto it = sizes.find(ax->name);
    if (it == sizes.end() || it->second < 2 || it->second > hw.sm_count) continue;
    const auto split = eligible(d, ax->name);
    if (split.empty()) continue;
    RewriteCandidate s;
    s.axis = ax->name;
    s.diagram = std::make_shared<const Diagram>(rewrite(p, d, split, ax->name, s.names));
    sides.push_back(std::move(s));
  }
  if (sides.empty()) {
    out.kept = std::move(prior);
    return out;
  }
  RewriteWeighing w = weigh_rewrites(p, d, sides, sizes, hw, opt, so, std::move(prior));
  for (std::size_t i = 0; i < sides.size(); ++i) {
    const auto& s = sides[i];
    const std::string parts = joined_names(s.names);
    out.steps.push_back({"derive-split-reduction", parts,
                         w.best == i ? "split " + s.axis + " off: fp32 partials " + parts + " over " + s.axis + ", then a sum over " + s.axis
                                     : "no split over " + s.axis + " (" + (w.best ? "the split over " + sides[*w.best].axis : std::string("the diagram as given")) +
                                           " is predicted faster)",
                         "lemma associative-sum: a sum over two axes is a sum over one of sums over the other; a factor constant along " + s.axis +
                             " leaves the sum",
                         "predicted " + objective_text(s.weighed.objective, so) + " split against " + objective_text(w.given.objective, so) + " as given"});
  }
  keep_weighed(out, w, sides);
  return out;
}

std::vector<Step> split_reduction_pass(const PassContext&, KernelCandidate&, Diagram&) { return {}; }

}  // namespace napkin
