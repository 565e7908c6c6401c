// Inlining calls (contract: inline_calls.hpp).
#include "diagrams/inline_calls.hpp"

#include <algorithm>
#include <functional>
#include <set>

#include "diagrams/diagnostics.hpp"
#include "diagrams/graph_view.hpp"
#include "diagrams/lift.hpp"
#include "diagrams/sizes.hpp"

namespace napkin {

namespace {

/** A call of `e` none of whose arguments holds a call, or nullptr when `e` calls nothing. */
const Expr* innermost_call(const Expr& e) {
  for (const auto& a : e.args)
    if (const Expr* c = innermost_call(*a)) return c;
  return e.kind == Expr::Kind::apply && e.op == Op::call ? &e : nullptr;
}

/** `e` with its axis `from` renamed `to` (an axis of the same size): contract(e, band(from, to;
 *  lo=0, hi=0); from), the product with the identity matrix, exact for finite values. */
ExprPtr twin_copy(const ExprPtr& e, const std::string& from, const std::string& to, SourceLoc loc) {
  auto band = std::make_shared<Expr>();
  band->kind = Expr::Kind::apply, band->op = Op::band, band->loc = loc;
  band->axes = {from, to};
  band->axis_locs = {loc, loc};
  band->bindings = {Binding{"lo", "", Number{0, "0"}, loc}, Binding{"hi", "", Number{0, "0"}, loc}};
  ExprPtr c = make_apply(Op::contract, {e, ExprPtr{std::move(band)}}, loc);
  auto n = std::make_shared<Expr>(*c);
  n->axes = {from};
  n->axis_locs = {loc};
  return {std::move(n)};
}

/** The renaming of a lifted callee's names into the caller's. */
struct Renaming {
  std::map<std::string, std::string> axis;   ///< lifted axis -> caller axis
  std::map<std::string, ExprPtr> array;      ///< lifted array -> caller expression (a reference)

  std::string axis_of(const std::string& a) const {
    auto it = axis.find(a);
    return it == axis.end() ? a : it->second;
  }
  std::vector<std::string> axes_of(const std::vector<std::string>& l) const {
    std::vector<std::string> out;
    for (const auto& a : l) out.push_back(axis_of(a));
    return out;
  }
  ExprPtr expr(const ExprPtr& e) const {
    if (e->kind == Expr::Kind::ref) {
      if (auto it = array.find(e->name); it != array.end()) return it->second;
      if (auto it = axis.find(e->name); it != axis.end()) return make_ref(it->second, e->loc, e->level);
      return e;
    }
    if (e->kind != Expr::Kind::apply) return e;
    auto n = std::make_shared<Expr>(*e);
    for (auto& a : n->args) a = expr(a);
    n->axes = axes_of(n->axes);
    for (auto& b : n->bindings)
      if (!b.ident.empty()) b.ident = axis_of(b.ident);
    return {std::move(n)};
  }
};

/** Inlines the call `call` (innermost) of statement `caller` of `d`; returns the new diagram. */
Diagram inline_one(const Program& p, const Diagram& d, const Statement& caller, const Expr& call) {
  Typer typer(d, p.diagrams, nullptr);
  std::vector<AxisList> arg_axes;
  for (const auto& a : call.args) arg_axes.push_back(*typer.axes_of(*a));
  const CallShape shape = *typer.call_shape(call, arg_axes);
  DiagnosticEngine diags;
  const SizeMap sizes = resolve_sizes(d, {}, diags).value_or(SizeMap{});
  const LiftedCallee lifted = lift_call(p, call, shape, arg_axes, sizes, caller.name);
  const Diagram& callee = lifted.diagram;

  std::set<std::string> taken = declared_names(d);
  Renaming ren;
  ren.axis = caller_axes(lifted, shape);
  std::vector<Item> new_axes, new_statements;
  // Callee axes bound to a caller axis that another callee axis binds too (q=s, x=s): each such
  // axis after the first gets an axis of its own, `<callee>_<axis>` = that caller axis in size.
  std::map<std::string, std::string> twin_of;  // new caller axis -> the caller axis it copies
  {
    std::set<std::string> images;
    for (const auto& [callee_axis, caller_axis] : shape.bind) {
      if (images.insert(caller_axis).second) continue;
      AxisDecl a;
      a.name = claim_name(shape.callee->name + "_" + callee_axis, taken);
      a.size = {SizeFactor{caller_axis, 1, call.loc}};
      a.trivia.trailing = "the callee's axis " + callee_axis + ", bound like " + caller_axis + " (" + caller.name + ")";
      a.loc = call.loc;
      twin_of[a.name] = caller_axis;
      ren.axis[callee_axis] = a.name;
      new_axes.emplace_back(std::move(a));
    }
  }
  for (const auto* a : callee.axes()) {
    if (ren.axis.count(a->name)) continue;
    std::string n = taken.count(a->name) ? claim_name(shape.callee->name + "_" + a->name, taken) : claim_name(a->name, taken);
    ren.axis[a->name] = n;
    AxisDecl copy = *a;
    copy.name = n;
    for (auto& f : copy.size)
      if (!f.axis.empty()) f.axis = ren.axis_of(f.axis);
    new_axes.emplace_back(std::move(copy));
  }
  const auto formals = callee.inputs();
  for (std::size_t i = 0; i < formals.size(); ++i) {
    const ExprPtr& arg = call.args[i];
    ExprPtr value = arg;
    AxisList axes = arg_axes[i];
    for (const auto& k : formals[i]->axes) {  // an argument read along a twin axis: copied onto it
      const std::string& twin = ren.axis_of(k);
      if (!twin_of.count(twin)) continue;
      value = twin_copy(value, twin_of.at(twin), twin, call.loc);
      std::replace(axes.begin(), axes.end(), twin_of.at(twin), twin);
    }
    if (value.ptr == arg.ptr && arg->kind == Expr::Kind::ref && !arg->level && d.array_axes(arg->name)) {
      ren.array[formals[i]->name] = arg;
      continue;
    }
    Statement s;
    s.name = claim_name(caller.name + "_arg" + std::to_string(i + 1), taken);
    s.axes = axes;
    s.axis_locs.assign(s.axes.size(), arg->loc);
    s.expr = value;
    s.loc = arg->loc;
    ren.array[formals[i]->name] = make_ref(s.name, arg->loc);
    new_statements.emplace_back(std::move(s));
  }
  const std::string& result = callee.outputs().front()->name;
  const bool whole = caller.expr.ptr.get() == &call;
  std::string result_name;
  for (const auto* s : callee.statements()) {
    std::string n = s->name == result && whole ? caller.name
                    : claim_name(caller.name + "_" + (s->name == result ? shape.callee->name : s->name), taken);
    if (s->name == result) result_name = n;
    ren.array[s->name] = make_ref(n, call.loc);
  }
  for (const auto* s : callee.statements()) {
    Statement copy = *s;
    copy.expr = ren.expr(s->expr);
    copy.axes = ren.axes_of(s->axes);
    copy.trivia = {};
    if (s->name == result && whole) {
      copy.name = caller.name;
      copy.axes = caller.axes, copy.axis_locs = caller.axis_locs;
      copy.dtype = caller.dtype, copy.level = caller.level, copy.trivia = caller.trivia, copy.loc = caller.loc;
    } else {
      copy.name = ren.array.at(s->name)->name;
    }
    new_statements.emplace_back(std::move(copy));
  }

  Diagram out = d;
  out.items.clear();
  bool axes_placed = false;
  const auto& items = d.items;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const bool last_axis = std::holds_alternative<AxisDecl>(items[i]) &&
                           (i + 1 == items.size() || !std::holds_alternative<AxisDecl>(items[i + 1]));
    const auto* s = std::get_if<Statement>(&items[i]);
    if (s && s->name == caller.name) {
      out.items.insert(out.items.end(), new_statements.begin(), new_statements.end());
      if (!whole) {
        Statement rest = *s;
        rest.expr = replace_node(s->expr, &call, make_ref(result_name, call.loc));
        out.items.emplace_back(std::move(rest));
      }
    } else {
      out.items.push_back(items[i]);
    }
    if (last_axis && !axes_placed) {
      out.items.insert(out.items.end(), new_axes.begin(), new_axes.end());
      axes_placed = true;
    }
  }
  NAPKIN_ASSERT(axes_placed || new_axes.empty()) << "inlining into " << d.name << ": no axis declaration to follow";
  return out;
}

}  // namespace

Diagram inline_calls(const Program& p, const Diagram& d) {
  Diagram cur = d;
  for (;;) {
    const Statement* caller = nullptr;
    const Expr* call = nullptr;
    for (const auto* s : cur.statements())
      if ((call = innermost_call(*s->expr))) {
        caller = s;
        break;
      }
    if (!caller) return cur;
    cur = inline_one(p, cur, *caller, *call);
  }
}

}  // namespace napkin
