// Pass derive-contraction-order: contractions of three or more operands split into pairwise ones,
// in the order the model prices cheapest. The contract is in contraction_order.hpp.
#include "derive/passes/contraction_order.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <set>

#include "diagrams/diagnostics.hpp"
#include "diagrams/graph_view.hpp"
#include "diagrams/printer.hpp"
#include "diagrams/typing.hpp"

namespace napkin {

namespace {

using Mask = std::uint64_t;  // one bit per operand: typing allows at most 64
constexpr double kInf = std::numeric_limits<double>::infinity();

/** One order: the pairwise steps in execution order, each the two operand sets it joins. */
struct Order {
  std::vector<std::pair<Mask, Mask>> steps;
  double flops = 0;
};

/** One contraction of three or more operands, as found in the verified diagram. */
struct Site {
  std::string statement;
  std::string text;                  ///< the contraction as written
  std::vector<AxisList> axes;        ///< per operand
  AxisList all_axes;                 ///< every operand axis, in order of first appearance
  std::vector<Mask> carriers;        ///< per entry of all_axes: the operands that carry it
  std::vector<std::string> labels;   ///< per operand, as written
  AxisList reduced;
  std::vector<Order> orders;         ///< cheapest FLOPs first
  std::vector<double> seconds;       ///< per order: the search's objective (seconds, or bytes), NaN where not priced
};

double size_of(const SizeMap& sizes, const std::string& axis) { return static_cast<double>(sizes.at(axis)); }

/** Whether an operand outside `m` carries `axis`. */
bool carried_outside(const Site& s, Mask m, const std::string& axis) {
  const auto it = std::find(s.all_axes.begin(), s.all_axes.end(), axis);
  return it != s.all_axes.end() && (s.carriers[static_cast<std::size_t>(it - s.all_axes.begin())] & ~m) != 0;
}

/** Axes of the operand set `m` once contracted (as a set, in all_axes order): a leaf's own axes;
 *  else every axis its leaves carry minus the reduced axes that no operand outside `m` carries. */
AxisList axes_of_set(const Site& s, Mask m) {
  AxisList out;
  for (std::size_t x = 0; x < s.all_axes.size(); ++x)
    if ((s.carriers[x] & m) != 0 &&
        (std::popcount(m) == 1 || !contains(s.reduced, s.all_axes[x]) || (s.carriers[x] & ~m) != 0))
      out.push_back(s.all_axes[x]);
  return out;
}

/** FLOPs of joining `a` and `b`: 2 per multiply-add over the union of their axes. */
double step_flops(const Site& s, Mask a, Mask b, const SizeMap& sizes) {
  double f = 2;
  for (const auto& x : axis_union({axes_of_set(s, a), axes_of_set(s, b)})) f *= size_of(sizes, x);
  return f;
}

/** Every binary tree over the operands of `m` (the first operand always in the left part, so that
 *  each unordered tree comes once). */
std::vector<Order> all_orders(Mask m) {
  if (std::popcount(m) == 1) return {Order{}};
  std::vector<Order> out;
  const Mask low = m & (~m + 1), rest = m ^ low;
  // Each split is `low | sub` against the remainder, sub a proper subset of the rest.
  for (Mask sub = rest;; sub = (sub - 1) & rest) {
    const Mask left = low | sub, right = m ^ left;
    if (right != 0)
      for (const auto& l : all_orders(left))
        for (const auto& r : all_orders(right)) {
          Order o = l;
          o.steps.insert(o.steps.end(), r.steps.begin(), r.steps.end());
          o.steps.emplace_back(left, right);
          out.push_back(std::move(o));
        }
    if (sub == 0) break;
  }
  return out;
}

/** The greedy order: repeatedly the pair of operand sets whose step costs the fewest FLOPs (ties
 *  to the smaller result, then to the earlier pair). */
Order greedy_order(const Site& s, const SizeMap& sizes) {
  std::vector<Mask> live;
  for (std::size_t i = 0; i < s.axes.size(); ++i) live.push_back(Mask{1} << i);
  Order o;
  while (live.size() > 1) {
    std::size_t bi = 0, bj = 1;
    double bf = kInf, bsize = kInf;
    for (std::size_t i = 0; i < live.size(); ++i)
      for (std::size_t j = i + 1; j < live.size(); ++j) {
        double f = step_flops(s, live[i], live[j], sizes), size = 1;
        for (const auto& a : axes_of_set(s, live[i] | live[j])) size *= size_of(sizes, a);
        if (f < bf || (f == bf && size < bsize)) bi = i, bj = j, bf = f, bsize = size;
      }
    o.steps.emplace_back(live[bi], live[bj]);
    live[bi] |= live[bj];
    live.erase(live.begin() + static_cast<std::ptrdiff_t>(bj));
  }
  return o;
}

/** The site of contraction `e` (three or more operands) in statement `stmt`, its orders ranked. */
Site analyse(const Expr& e, const std::string& stmt, Typer& typer, const SizeMap& sizes) {
  Site s;
  s.statement = stmt;
  s.text = print_expr(e);
  s.reduced = e.axes;
  for (const auto& a : e.args) {
    auto ax = typer.axes_of(*a);
    NAPKIN_ASSERT(ax) << "operand " << print_expr(*a) << " of a verified contraction has no axes";
    s.axes.push_back(*ax);
    s.labels.push_back(print_expr(*a));
  }
  s.all_axes = axis_union(s.axes);
  for (const auto& x : s.all_axes) {
    Mask m = 0;
    for (std::size_t i = 0; i < s.axes.size(); ++i)
      if (contains(s.axes[i], x)) m |= Mask{1} << i;
    s.carriers.push_back(m);
  }
  const Mask all = e.args.size() >= 64 ? ~Mask{0} : (Mask{1} << e.args.size()) - 1;
  s.orders = e.args.size() <= kExhaustiveOperands ? all_orders(all) : std::vector<Order>{greedy_order(s, sizes)};
  for (auto& o : s.orders)
    for (const auto& [a, b] : o.steps) o.flops += step_flops(s, a, b, sizes);
  std::stable_sort(s.orders.begin(), s.orders.end(), [](const Order& a, const Order& b) { return a.flops < b.flops; });
  s.seconds.assign(s.orders.size(), std::nan(""));
  return s;
}

/** "(A B) C" */
std::string describe(const Site& s, const Order& o) {
  std::map<Mask, std::string> text;
  for (std::size_t i = 0; i < s.labels.size(); ++i) text[Mask{1} << i] = s.labels[i];
  auto part = [&](Mask m) { return std::popcount(m) == 1 ? text[m] : "(" + text[m] + ")"; };
  for (const auto& [a, b] : o.steps) text[a | b] = part(a) + " " + part(b);
  return o.steps.empty() ? "" : text[o.steps.back().first | o.steps.back().second];
}

/** Rewrites a diagram for given choices of order, one per site in visiting order (statements in
 *  source order, nested contractions before the one that holds them). With `collect`, first finds
 *  the sites (the FLOP-cheapest order taken where `choice` has none). */
class Splitter {
 public:
  Splitter(const Program& p, const Diagram& d, const SizeMap& sizes) : p_(p), d_(d), sizes_(sizes), typer_(d, p.diagrams, nullptr) {}

  Diagram build(std::vector<Site>& sites, const std::vector<std::size_t>& choice, bool collect) {
    sites_ = &sites;
    choice_ = &choice;
    collect_ = collect;
    next_ = 0;
    used_.clear();
    for (const auto& [name, _] : p_.diagrams) used_.insert(name);
    for (const auto* a : d_.axes()) used_.insert(a->name);
    for (const auto* i : d_.inputs()) used_.insert(i->name);
    for (const auto* s : d_.statements()) used_.insert(s->name);
    Diagram out = d_;
    out.items.clear();
    for (const auto& item : d_.items) {
      const auto* st = std::get_if<Statement>(&item);
      if (!st) {
        out.items.push_back(item);
        continue;
      }
      statement_ = st;
      counter_ = 0;
      pending_.clear();
      Statement s = *st;
      s.expr = rewrite(st->expr);
      if (!pending_.empty()) std::swap(pending_.front().trivia.leading, s.trivia.leading);
      for (auto& n : pending_) out.items.emplace_back(std::move(n));
      out.items.emplace_back(std::move(s));
    }
    return out;
  }

 private:
  ExprPtr rewrite(const ExprPtr& e) {
    if (e->kind != Expr::Kind::apply) return e;
    std::vector<ExprPtr> args;
    bool changed = false;
    for (const auto& a : e->args) {
      args.push_back(rewrite(a));
      changed |= args.back().ptr != a.ptr;
    }
    if (e->op == Op::contract && e->args.size() >= 3) return split(*e, args);
    if (!changed) return e;
    Expr n = *e;
    n.args = std::move(args);
    return rebuild(n);
  }

  /** Contraction `e` with rewritten operands `args` as pairwise steps: new statements, and the
   *  last step in its place. */
  ExprPtr split(const Expr& e, const std::vector<ExprPtr>& args) {
    const std::size_t id = next_++;
    if (collect_) sites_->push_back(analyse(e, statement_->name, typer_, sizes_));
    const Site& site = sites_->at(id);
    const Order& order = site.orders.at(id < choice_->size() ? (*choice_)[id] : 0);
    std::map<Mask, std::pair<ExprPtr, AxisList>> part;
    for (std::size_t i = 0; i < args.size(); ++i) part[Mask{1} << i] = {args[i], site.axes[i]};
    for (std::size_t k = 0; k < order.steps.size(); ++k) {
      const auto [a, b] = order.steps[k];
      Expr c = e;
      c.args = {part[a].first, part[b].first};
      c.axes.clear();
      c.axis_locs.clear();
      AxisList joined = axis_union({part[a].second, part[b].second}), kept;
      for (std::size_t r = 0; r < e.axes.size(); ++r)
        if (contains(joined, e.axes[r]) && !carried_outside(site, a | b, e.axes[r])) {
          c.axes.push_back(e.axes[r]);
          if (r < e.axis_locs.size()) c.axis_locs.push_back(e.axis_locs[r]);
        }
      if (k + 1 == order.steps.size()) return rebuild(c);
      for (const auto& x : joined)
        if (!contains(c.axes, x)) kept.push_back(x);
      Statement s;
      s.name = fresh_name();
      s.axes = kept;
      s.axis_locs.assign(kept.size(), e.loc);
      s.expr = rebuild(c);
      s.loc = e.loc;
      part[a | b] = {make_ref(s.name, e.loc), kept};
      pending_.push_back(std::move(s));
    }
    NAPKIN_ASSERT(false) << "a contraction of " << args.size() << " operands has no steps";
    return {};
  }

  std::string fresh_name() {
    for (;;) {
      std::string n = statement_->name + "_c" + std::to_string(++counter_);
      if (used_.insert(n).second) return n;
    }
  }

  const Program& p_;
  const Diagram& d_;
  const SizeMap& sizes_;
  Typer typer_;
  std::vector<Site>* sites_ = nullptr;
  const std::vector<std::size_t>* choice_ = nullptr;
  bool collect_ = false;
  std::size_t next_ = 0;
  std::set<std::string> used_;
  const Statement* statement_ = nullptr;
  int counter_ = 0;
  std::vector<Statement> pending_;
};

std::string flop_text(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g FLOP", f);
  return buf;
}

/** The step that records site `s` split in order `chosen`, weighed against the others. */
Step step_of(const Site& s, std::size_t chosen, const SearchOptions& so) {
  const Order& o = s.orders[chosen];
  std::string detail = flop_text(o.flops);
  if (!std::isnan(s.seconds[chosen])) detail += ", predicted " + objective_text(s.seconds[chosen], so);
  std::string against;
  const std::size_t shown = std::min<std::size_t>(s.orders.size(), kModelled + 1);
  for (std::size_t i = 0; i < shown; ++i) {
    if (i == chosen) continue;
    against += (against.empty() ? "" : "; ") + flop_text(s.orders[i].flops) +
               (std::isnan(s.seconds[i]) ? "" : ", predicted " + objective_text(s.seconds[i], so)) + " for " + describe(s, s.orders[i]);
  }
  if (!against.empty()) detail += " against " + against;
  detail += " (" + std::to_string(s.orders.size()) + (s.axes.size() <= kExhaustiveOperands ? " orders weighed)" : " greedy order)");
  return {"derive-contraction-order", s.statement, s.text + " split as " + describe(s, o),
          "einsum associativity: a sum over an axis moves inside the product of the operands that carry it", detail};
}

}  // namespace

ContractionOrderResult order_contractions(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw,
                                          const ModelOptions& opt, const SearchOptions& so) {
  std::vector<Site> sites;
  std::vector<std::size_t> choice;
  Splitter splitter(p, d, sizes);
  ContractionOrderResult out{splitter.build(sites, choice, true), {}, false};
  if (sites.empty()) return out;
  out.changed = true;
  choice.assign(sites.size(), 0);
  auto price = [&](const std::vector<std::size_t>& c) {
    Diagram cand = splitter.build(sites, c, false);
    try {
      return objective(search_schedule(p, cand, sizes, hw, opt, so).cost, so);
    } catch (const UserError&) {
      return kInf;
    }
  };
  auto has_rival = [](const Site& s) { return s.orders.size() > 1 && s.orders[1].flops <= kFlopSlack * s.orders[0].flops; };
  if (std::any_of(sites.begin(), sites.end(), has_rival)) {
    std::size_t budget = kModelBudget - 1;
    double best = price(choice);
    for (std::size_t i = 0; i < sites.size(); ++i) {
      Site& s = sites[i];
      s.seconds[0] = best;
      for (std::size_t k = 1; k < s.orders.size() && k < kModelled && budget > 0; ++k) {
        if (s.orders[k].flops > kFlopSlack * s.orders[0].flops) break;
        std::vector<std::size_t> c = choice;
        c[i] = k;
        s.seconds[k] = price(c);
        --budget;
        if (s.seconds[k] < best) best = s.seconds[k], choice[i] = k;
      }
    }
  }
  out.diagram = splitter.build(sites, choice, false);
  for (std::size_t i = 0; i < sites.size(); ++i) out.steps.push_back(step_of(sites[i], choice[i], so));
  return out;
}

std::vector<Step> contraction_order_pass(const PassContext& c, KernelCandidate&, Diagram&) {
  for (const auto* s : c.diagram.statements())
    walk(*s->expr, [&](const Expr& n) {
      NAPKIN_ASSERT(n.kind != Expr::Kind::apply || n.op != Op::contract || n.args.size() < 3)
          << "statement " << s->name << " still holds a contraction of " << n.args.size()
          << " operands after derive-contraction-order";
    });
  return {};
}

}  // namespace napkin
