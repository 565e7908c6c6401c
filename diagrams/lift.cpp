// Lifting a callee over a call's woven axes (contract: lift.hpp).
#include "diagrams/lift.hpp"

#include <set>

#include "diagrams/graph_view.hpp"
#include "diagrams/printer.hpp"

namespace napkin {

namespace {

/** The entries of `order` that are in `have`, in `order`'s order. */
AxisList in_order(const AxisList& order, const std::set<std::string>& have) {
  AxisList out;
  for (const auto& a : order)
    if (have.count(a)) out.push_back(a);
  return out;
}

/** `axes` with `front` put before them (and `loc` as the location of each added axis). */
void prepend(std::vector<std::string>& axes, std::vector<SourceLoc>& locs, const AxisList& front, SourceLoc loc) {
  axes.insert(axes.begin(), front.begin(), front.end());
  locs.insert(locs.begin(), front.size(), loc);
}

/** Woven axes (lifted names) of every array of `d`: inputs as given, statements the union of
 *  what they read, to a fixed point (statements may be written before the arrays they read). */
std::map<std::string, std::set<std::string>> woven_of_arrays(const Diagram& d, std::map<std::string, std::set<std::string>> of) {
  const auto statements = d.statements();
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto* s : statements) {
      auto& mine = of[s->name];
      for (const auto& r : referenced_arrays(*s->expr, d))
        for (const auto& w : of[r]) changed |= mine.insert(w).second;
    }
  }
  return of;
}

}  // namespace

LiftedCallee lift_call(const Program& p, const Expr& call, const CallShape& shape, const std::vector<AxisList>& arg_axes,
                       const SizeMap& caller_sizes, const std::string& statement) {
  const Diagram& callee = *shape.callee;
  const std::string where = "the call of " + callee.name + " in '" + statement + "'";
  LiftedCallee out;
  std::set<std::string> taken = declared_names(callee);
  std::map<std::string, std::string> lifted_name;  // caller woven axis -> its name in the lift
  for (const auto& w : shape.woven) {
    std::string n = claim_name(w, taken);
    lifted_name[w] = n;
    out.woven.push_back(n);
    out.caller_axis[n] = w;
  }
  for (const auto& [callee_axis, caller] : shape.bind) out.caller_axis[callee_axis] = caller;

  // Which woven axes each array gets: an input those of its argument, a statement those it reads.
  const auto formals = callee.inputs();
  NAPKIN_ASSERT(formals.size() == arg_axes.size()) << where << ": " << arg_axes.size() << " argument axis lists";
  std::map<std::string, std::set<std::string>> seed;
  for (std::size_t j = 0; j < formals.size(); ++j)
    for (const auto& a : arg_axes[j])
      if (lifted_name.count(a)) seed[formals[j]->name].insert(lifted_name.at(a));
  const auto woven_of = woven_of_arrays(callee, std::move(seed));
  auto woven_axes = [&](const std::string& array) {
    auto it = woven_of.find(array);
    return in_order(out.woven, it == woven_of.end() ? std::set<std::string>{} : it->second);
  };

  Diagram& d = out.diagram;
  d.name = callee.name;
  for (const auto& w : out.woven) d.name += (&w == &out.woven.front() ? "_over_" : "_") + w;
  d.trivia = callee.trivia;
  d.loc = callee.loc;
  for (std::size_t i = 0; i < out.woven.size(); ++i) {
    AxisDecl a;
    a.name = out.woven[i];
    a.size = {SizeFactor{"", caller_sizes.at(shape.woven[i]), call.loc}};
    a.trivia.trailing = "woven: the caller's axis " + shape.woven[i];
    a.loc = call.loc;
    d.items.emplace_back(std::move(a));
  }
  for (const auto& item : callee.items) {
    Item copy = item;
    if (auto* in = std::get_if<InputDecl>(&copy)) prepend(in->axes, in->axis_locs, woven_axes(in->name), call.loc);
    if (auto* s = std::get_if<Statement>(&copy)) prepend(s->axes, s->axis_locs, woven_axes(s->name), call.loc);
    d.items.push_back(std::move(copy));
  }
  const std::string& result = callee.outputs().front()->name;
  if (woven_axes(result) != out.woven)
    throw UserError(where + " is woven over " + print_axes(shape.woven) + ", but " + callee.name + "'s output " + result +
                    " does not depend on every one of them: compute the call over the axes its output depends on, then broadcast");
  // Every statement typed in the lift: its expression has exactly its (lifted) axes. Calls inside
  // are typed, not lifted, so this costs no recursion; verify_diagram(p, d) then holds (lift_test).
  DiagnosticEngine diags;
  Typer typer(d, p.diagrams, &diags);
  for (const auto* s : d.statements()) {
    auto axes = typer.axes_of(*s->expr);
    if (!diags.has_errors() && axes && std::set<std::string>(axes->begin(), axes->end()) != std::set<std::string>(s->axes.begin(), s->axes.end()))
      diags.error(s->loc, "'" + s->name + "' would have the axes " + print_axes(*axes) + ", not " + print_axes(s->axes));
    if (diags.has_errors()) {
      throw UserError(where + " cannot be woven over " + print_axes(shape.woven) + ": in " + callee.name + " lifted over them, " +
                      diags.diagnostics().front().message);
    }
  }
  return out;
}

std::map<std::string, std::string> caller_axes(const LiftedCallee& lifted, const CallShape& shape) {
  NAPKIN_ASSERT(lifted.woven.size() == shape.woven.size()) << "lift of " << lifted.diagram.name << " used for a call woven over "
                                                            << print_axes(shape.woven);
  std::map<std::string, std::string> out;
  for (std::size_t i = 0; i < shape.woven.size(); ++i) out[lifted.woven[i]] = shape.woven[i];
  for (const auto& [callee_axis, caller] : shape.bind) out[callee_axis] = caller;
  return out;
}

}  // namespace napkin
