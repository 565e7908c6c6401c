// Expansion of logsumexp, l2norm and gather into core operations (contract in builtins.hpp).
#include "diagrams/builtins.hpp"

#include <set>

#include "diagrams/typing.hpp"

namespace napkin {

namespace {

ExprPtr apply(Op op, std::vector<ExprPtr> args, SourceLoc loc, std::vector<std::string> axes = {}) {
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Kind::apply;
  e->op = op;
  e->loc = loc;
  e->args = std::move(args);
  e->axis_locs.assign(axes.size(), loc);
  e->axes = std::move(axes);
  return {std::move(e)};
}

class Expander {
 public:
  Expander(Diagram& d, const Program& p) : d_(d), typer_(d, p.diagrams, nullptr, &p.broken) {}

  void run() {
    std::vector<Item> items;
    for (const auto& item : d_.items) {
      if (const auto* s = std::get_if<Statement>(&item)) {
        Statement copy = *s;
        holder_ = s->name;
        copy.expr = rewrite(*s->expr, s->expr);
        for (auto& m : added_) items.emplace_back(std::move(m));
        added_.clear();
        items.emplace_back(std::move(copy));
      } else {
        items.push_back(item);
      }
    }
    d_.items = std::move(items);
  }

 private:
  /** `e` with its built-ins expanded; `self` when nothing below changes. */
  ExprPtr rewrite(const Expr& e, const ExprPtr& self) {
    if (e.kind != Expr::Kind::apply) return self;
    std::optional<AxisList> axes;
    if (e.op == Op::logsumexp || e.op == Op::l2norm || e.op == Op::gather) axes = typer_.axes_of(e);  // before the operands change
    std::vector<ExprPtr> args;
    bool changed = false;
    for (const auto& a : e.args) {
      args.push_back(rewrite(*a, a));
      changed |= args.back().ptr != a.ptr;
    }
    if (axes && e.op == Op::logsumexp) return logsumexp(e, args[0], *axes);
    if (axes && e.op == Op::l2norm) return l2norm(e, args[0]);
    if (axes && e.op == Op::gather) return gather(e, args);
    if (!changed) return self;
    auto out = std::make_shared<Expr>(e);
    out->args = std::move(args);
    return {std::move(out)};
  }

  ExprPtr logsumexp(const Expr& e, const ExprPtr& x, const AxisList& rows) {
    std::string name = holder_ + "_max";
    for (int i = 2; d_.array_axes(name) || d_.find_axis(name) || taken_.count(name); ++i) name = holder_ + "_max" + std::to_string(i);
    taken_.insert(name);
    Statement m;
    m.name = name;
    m.loc = e.loc;
    m.axes = rows;
    m.axis_locs.assign(rows.size(), e.loc);
    m.expr = apply(Op::max, {x}, e.loc, e.axes);
    added_.push_back(std::move(m));
    ExprPtr ref = make_ref(name, e.loc);
    ExprPtr sum = apply(Op::sum, {apply(Op::exp, {apply(Op::sub, {x, ref}, e.loc)}, e.loc)}, e.loc, e.axes);
    return apply(Op::add, {ref, apply(Op::log, {sum}, e.loc)}, e.loc);
  }

  ExprPtr l2norm(const Expr& e, const ExprPtr& x) {
    Number eps{1e-12, "1e-12"};
    for (const auto& b : e.bindings)
      if (b.key == "eps" && b.number) eps = *b.number;
    ExprPtr squares = apply(Op::sum, {apply(Op::mul, {x, x}, e.loc)}, e.loc, e.axes);
    ExprPtr scale = apply(Op::rsqrt, {apply(Op::add, {squares, make_number(eps, e.loc)}, e.loc)}, e.loc);
    return apply(Op::mul, {x, scale}, e.loc);
  }

  /** gather(L, T; v) as sum(pick(L, T; v); v): the one-hot contraction, folded by associative-sum. */
  ExprPtr gather(const Expr& e, const std::vector<ExprPtr>& args) {
    ExprPtr picked = apply(Op::pick, args, e.loc, e.axes);
    return apply(Op::sum, {picked}, e.loc, e.axes);
  }

  Diagram& d_;
  Typer typer_;
  std::string holder_;
  std::vector<Statement> added_;
  std::set<std::string> taken_;
};

}  // namespace

void expand_builtins(Program& p) {
  for (auto& f : p.files)
    for (auto& d : f->file.diagrams) {
      bool any = false;
      for (const auto* s : d.statements()) any |= has_unexpanded_builtin(*s->expr);
      if (any) Expander(d, p).run();
    }
}

bool has_unexpanded_builtin(const Expr& e) {
  if (e.kind != Expr::Kind::apply) return false;
  if (e.op == Op::logsumexp || e.op == Op::l2norm || e.op == Op::gather) return true;
  for (const auto& a : e.args)
    if (has_unexpanded_builtin(*a)) return true;
  return false;
}

}  // namespace napkin
