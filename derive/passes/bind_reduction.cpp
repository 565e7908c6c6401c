// Pass derive-bind-reduction: reductions read inside maps over their own axis bound to statements
// of their own, where the model prices it faster. The contract is in bind_reduction.hpp.
#include "derive/passes/bind_reduction.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <set>

#include "derive/rewrite_weighing.hpp"
#include "diagrams/printer.hpp"
#include "diagrams/typing.hpp"
#include "lower/rows_form.hpp"

namespace napkin {

namespace {

/** One statistic the rewrite binds: `name[axes] : fp32 = expr`, read by `reader`. */
struct BoundStatistic {
  std::string name, reader, text;
  AxisList axes;
  ExprPtr expr;
};

class Binder {
 public:
  Binder(const Program& p, const Diagram& d) : d_(d), typer_(d, p.diagrams, nullptr), used_(names_in_use(p, d)) {}

  /** The rewritten diagram, each statistic placed before the statement that reads it. */
  Diagram build() {
    Diagram out = d_;
    out.items.clear();
    for (const auto& item : d_.items) {
      const auto* st = std::get_if<Statement>(&item);
      if (!st || is_normaliser(*st->expr) || is_one_axis_reduction(*st->expr)) {
        out.items.push_back(item);
        continue;
      }
      Statement s = *st;
      std::map<std::string, const BoundStatistic*> mine;  // this statement's bindings by the reduction's text
      s.expr = rewrite(st->expr, *st, mine);
      for (const auto& b : bindings)
        if (b.reader == st->name) {
          Statement stat;
          stat.name = b.name;
          stat.axes = b.axes;
          stat.axis_locs.assign(b.axes.size(), st->loc);
          stat.dtype = DType::fp32;
          stat.expr = b.expr;
          stat.loc = st->loc;
          out.items.emplace_back(std::move(stat));
        }
      out.items.emplace_back(std::move(s));
    }
    return out;
  }

  std::deque<BoundStatistic> bindings;  ///< a deque: the per-statement maps keep pointers into it

 private:
  ExprPtr rewrite(const ExprPtr& e, const Statement& st, std::map<std::string, const BoundStatistic*>& mine) {
    if (e->kind != Expr::Kind::apply) return e;
    if (is_one_axis_reduction(*e) && contains(st.axes, e->axes[0]) && std::all_of(e->args.begin(), e->args.end(), [](const ExprPtr& a) { return elementwise_tree(*a); }))
      if (const BoundStatistic* b = bind(e, st, mine)) return make_ref(b->name, e->loc);
    if (e->op == Op::call) return e;  // a call's arguments are the callee's business
    Expr n = *e;
    bool changed = false;
    for (auto& a : n.args) {
      ExprPtr r = rewrite(a, st, mine);
      changed |= r.ptr != a.ptr;
      a = r;
    }
    return changed ? rebuild(n) : e;
  }

  /** The binding of reduction `r` read by `st` (made on first sight), or null where r's axes
   *  cannot be typed. */
  const BoundStatistic* bind(const ExprPtr& ptr, const Statement& st, std::map<std::string, const BoundStatistic*>& mine) {
    const Expr& r = *ptr;
    const std::string text = print_expr(r);
    if (auto it = mine.find(text); it != mine.end()) return it->second;
    const auto axes = typer_.axes_of(r);
    if (!axes) return nullptr;
    AxisList ordered;
    for (const auto& a : st.axes)
      if (contains(*axes, a)) ordered.push_back(a);
    if (ordered.size() != axes->size()) return nullptr;  // an axis S lacks: not a statistic of S's rows
    bindings.push_back({fresh_name(used_, st.name + "_" + std::string(op_name(r.op))), st.name, text, ordered, ptr});
    return mine[text] = &bindings.back();
  }

  const Diagram& d_;
  Typer typer_;
  std::set<std::string> used_;
};

/** Rounds of binding at most (each binds the reductions the last one left element-wise): a
 *  bound on nesting that no diagram of ours reaches. */
constexpr int kMaxRounds = 8;

}  // namespace

BindReductionResult bind_reductions(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt,
                                    const SearchOptions& so, std::optional<WeighedSearch> prior) {
  // Rounds until nothing is left to bind: a reduction whose argument held another (a softmax written
  // out, sum(exp(X - max(X; m)); m)) is element-wise once the inner one is bound.
  std::vector<BoundStatistic> all;
  auto rewritten = std::make_shared<Diagram>(d);
  for (int round = 0; round < kMaxRounds; ++round) {
    Binder b(p, *rewritten);
    Diagram next = b.build();
    if (b.bindings.empty()) break;
    all.insert(all.end(), b.bindings.begin(), b.bindings.end());
    *rewritten = std::move(next);
  }
  BindReductionResult out;
  if (all.empty()) {
    out.kept = std::move(prior);
    return out;
  }
  std::vector<RewriteCandidate> sides(1);
  sides[0].diagram = rewritten;
  for (const auto& x : all) sides[0].names.push_back(x.name);
  RewriteWeighing w = weigh_rewrites(p, d, sides, sizes, hw, opt, so, std::move(prior));
  const bool changed = w.best.has_value();
  const std::string detail = "predicted " + objective_text(sides[0].weighed.objective, so) + " with the statistics bound against " +
                             objective_text(w.given.objective, so) + " as written";
  for (const auto& x : all)
    out.steps.push_back({"derive-bind-reduction", x.name,
                         x.reader + " reads " + x.text + " inside a map over its reduced axis" +
                             (changed ? ": bound to " + x.name + print_axes(x.axes) + " : fp32, a statistic its rows kernel computes in a first walk"
                                      : ": left in place (as written is predicted faster)"),
                         "a reduction's value is the same wherever it is read: naming it is exact (let-binding)", detail});
  keep_weighed(out, w, sides);
  return out;
}

std::vector<Step> bind_reduction_pass(const PassContext&, KernelCandidate&, Diagram&) { return {}; }

}  // namespace napkin
