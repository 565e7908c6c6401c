#include "diagrams/weave.hpp"

#include "diagrams/diagnostics.hpp"
#include "diagrams/graph_view.hpp"

namespace napkin {

std::string_view role_name(AxisRole r) {
  switch (r) {
    case AxisRole::woven: return "woven";
    case AxisRole::reduced: return "reduced";
    case AxisRole::normalised: return "normalised";
  }
  return "?";
}

AxisRole StatementWeave::role(const std::string& axis) const {
  auto it = roles.find(axis);
  return it == roles.end() ? AxisRole::woven : it->second.role;
}

namespace {
int rank(AxisRole r) { return r == AxisRole::reduced ? 2 : r == AxisRole::normalised ? 1 : 0; }
}  // namespace

std::vector<StatementWeave> weave_analysis(const Program& p, const Diagram& d) {
  std::vector<StatementWeave> out;
  Typer typer(d, p.diagrams, nullptr);
  for (const auto* s : d.statements()) {
    StatementWeave w;
    w.statement = s;
    w.reads = referenced_arrays(*s->expr, d);
    auto mark = [&](const std::string& a, AxisRole r, Op op, const Expr* n) {
      auto it = w.roles.find(a);
      if (it == w.roles.end() || rank(r) > rank(it->second.role)) w.roles[a] = RoleSource{r, op, n};
    };
    for (const auto& a : s->axes) mark(a, AxisRole::woven, Op::add, nullptr);
    walk(*s->expr, [&](const Expr& n) {
      if (n.kind != Expr::Kind::apply) return;
      if (auto axes = typer.axes_of(n))
        for (const auto& a : *axes) mark(a, AxisRole::woven, Op::add, nullptr);
      for (const auto& arg : n.args)
        if (auto axes = typer.axes_of(*arg))
          for (const auto& a : *axes) mark(a, AxisRole::woven, Op::add, nullptr);
      switch (n.op) {
        case Op::contract: case Op::sum: case Op::max: case Op::mean:
          for (const auto& a : n.axes) mark(a, AxisRole::reduced, n.op, &n);
          break;
        case Op::softmax: case Op::layernorm: case Op::rmsnorm:
          for (const auto& a : n.axes) mark(a, AxisRole::normalised, n.op, &n);
          break;
        case Op::causal: w.causal_masks.push_back(&n); break;
        case Op::call: w.has_call = true; break;
        case Op::logsumexp: case Op::l2norm: case Op::gather:
          NAPKIN_ASSERT(false) << "weave analysis of an unexpanded " << op_name(n.op) << " (load with expand_builtins)";
          break;
        default: break;
      }
    });
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace napkin
