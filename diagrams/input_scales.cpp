#include "diagrams/input_scales.hpp"

#include <cmath>
#include <map>

#include "diagrams/diagnostics.hpp"
#include "diagrams/typing.hpp"

namespace napkin {

double InputScale::scale() const { return 1.0 / std::sqrt(static_cast<double>(fan_in)); }

namespace {

using Factors = std::vector<SizeFactor>;

/** One diagram of the call tree as the walk sees it: its sizes, which top-level input each of its
 *  inputs is (empty: computed by a caller), and each of its axes written in the top-level axes. */
struct Frame {
  const Diagram* d = nullptr;
  SizeMap sizes;
  std::map<std::string, std::string> origin;
  std::map<std::string, Factors> axis_factors;
};

class ScaleWalker {
 public:
  ScaleWalker(const Program& p, std::map<std::string, InputScale>& out) : p_(p), out_(out) {}

  /** Walks every statement of f.d. The contractions and calls of a statement are found without
   *  recursion and calls are followed from here: the stack holds one frame per call level, not the
   *  depths of the enclosing expressions (as the evaluator, diagrams/eval.cpp). */
  void diagram(const Frame& f) {
    for (const auto* st : f.d->statements()) {
      std::vector<const Expr*> todo{&*st->expr}, calls;
      while (!todo.empty()) {
        const Expr* e = todo.back();
        todo.pop_back();
        for (const auto& a : e->args) todo.push_back(&*a);
        if (e->kind == Expr::Kind::apply && e->op == Op::contract) contraction(f, *e);
        if (e->kind == Expr::Kind::apply && e->op == Op::call) calls.push_back(e);
      }
      for (const Expr* c : calls) call(f, *c);
    }
  }

 private:
  /** The top-level input `e` is, "" when `e` is an array computed inside the diagram; `constant`
   *  tells an axis size or a number (neither computed nor an input). */
  static std::string origin_of(const Frame& f, const Expr& e, bool& constant) {
    constant = e.kind == Expr::Kind::number || (e.kind == Expr::Kind::ref && f.d->find_axis(e.name) && !f.d->array_axes(e.name));
    if (e.kind != Expr::Kind::ref || !f.d->find_input(e.name)) return {};
    return f.origin.at(e.name);
  }

  /** Whether `e` names a statement of `d` whose values sum to 1 along one of `axes` (a softmax
   *  along it): a contraction over that axis with it is an average, not a sum, and leaves its
   *  partners' magnitude as it is (attention's P V). */
  static bool distribution_over(const Diagram& d, const Expr& e, const std::vector<std::string>& axes) {
    if (e.kind != Expr::Kind::ref) return false;
    const Statement* s = d.find_statement(e.name);
    return s && s->expr->kind == Expr::Kind::apply && s->expr->op == Op::softmax && contains(axes, s->expr->axes[0]);
  }

  void contraction(const Frame& f, const Expr& e) {
    std::vector<std::string> origins;
    std::vector<bool> computed;
    for (const auto& a : e.args) {
      bool constant = false;
      origins.push_back(origin_of(f, *a, constant));
      computed.push_back(origins.back().empty() && !constant);
    }
    for (std::size_t i = 0; i < e.args.size(); ++i) {
      if (origins[i].empty()) continue;
      bool partner_computed = false;
      for (std::size_t j = 0; j < e.args.size(); ++j) partner_computed |= j != i && computed[j] && !distribution_over(*f.d, *e.args[j], e.axes);
      if (!partner_computed) continue;
      const AxisList& own = *f.d->array_axes(e.args[i]->name);
      std::int64_t fan_in = 1;
      Factors factors;
      for (const auto& a : e.axes) {
        if (!contains(own, a)) continue;
        fan_in *= f.sizes.at(a);
        const Factors& fa = f.axis_factors.at(a);
        factors.insert(factors.end(), fa.begin(), fa.end());
      }
      InputScale& s = out_.at(origins[i]);
      if (fan_in > s.fan_in) s.fan_in = fan_in, s.factors = factors;
    }
  }

  void call(const Frame& f, const Expr& e) {
    Typer typer(*f.d, p_.diagrams, nullptr);
    std::vector<AxisList> arg_axes;
    for (const auto& a : e.args) arg_axes.push_back(typer.axes_of(*a).value_or(AxisList{}));
    const auto shape = typer.call_shape(e, arg_axes);
    if (!shape) return;  // verified diagrams type; nothing to follow otherwise
    SizeMap bound;
    for (const auto& [callee_axis, caller_axis] : shape->bind) bound[callee_axis] = f.sizes.at(caller_axis);
    DiagnosticEngine diags;
    auto sizes = resolve_sizes(*shape->callee, bound, diags, e.loc);
    if (!sizes) throw UserError(diags.render());
    Frame inner{shape->callee, *sizes, {}, {}};
    const auto formals = shape->callee->inputs();
    for (std::size_t i = 0; i < formals.size() && i < e.args.size(); ++i) {
      bool constant = false;
      inner.origin[formals[i]->name] = origin_of(f, *e.args[i], constant);
    }
    for (const auto* a : shape->callee->axes()) {
      auto b = shape->bind.find(a->name);
      if (b != shape->bind.end()) inner.axis_factors[a->name] = f.axis_factors.at(b->second);
      else inner.axis_factors[a->name] = {SizeFactor{"", inner.sizes.at(a->name), {}}};
    }
    diagram(inner);
  }

  const Program& p_;
  std::map<std::string, InputScale>& out_;
};

}  // namespace

std::vector<InputScale> input_scales(const Program& p, const Diagram& d, const SizeMap& sizes) {
  std::map<std::string, InputScale> by_name;
  Frame top{&d, sizes, {}, {}};
  for (const auto* in : d.inputs()) by_name[in->name] = InputScale{in->name, 1, {}}, top.origin[in->name] = in->name;
  for (const auto* a : d.axes()) top.axis_factors[a->name] = {SizeFactor{a->name, 1, {}}};
  ScaleWalker(p, by_name).diagram(top);
  std::vector<InputScale> out;
  for (const auto* in : d.inputs()) out.push_back(by_name.at(in->name));
  return out;
}

std::string describe_input_scales(const std::vector<InputScale>& scales) {
  std::string scaled, plain;
  for (const auto& s : scales) {
    if (s.fan_in > 1) scaled += (scaled.empty() ? "" : ", ") + s.input + " 1/sqrt(" + std::to_string(s.fan_in) + ")";
    else plain += (plain.empty() ? "" : ", ") + s.input;
  }
  if (scaled.empty()) return "all 1";
  return plain.empty() ? scaled : scaled + "; " + plain + " 1";
}

}  // namespace napkin
