#include "diagrams/verify.hpp"

#include <map>
#include <set>

#include "diagrams/graph_view.hpp"
#include "diagrams/lift.hpp"
#include "diagrams/limits.hpp"
#include "diagrams/typing.hpp"

namespace napkin {

namespace {

class DiagramVerifier {
 public:
  DiagramVerifier(const Program& p, const Diagram& d, DiagnosticEngine& diags)
      : p_(p), d_(d), diags_(diags), typer_(d, p.diagrams, &diags, &p.broken) {}

  void run(const SizeMap& overrides) {
    names();
    auto sizes = resolve_sizes(d_, overrides, diags_);
    for (const auto* in : d_.inputs()) axis_list(in->name, in->axes, in->axis_locs);
    for (const auto* s : d_.statements()) statement(*s, sizes ? &*sizes : nullptr);
    outputs();
    cycles();
    unused();
  }

 private:
  void names() {
    std::map<std::string, SourceLoc> seen;
    auto declare = [&](const std::string& n, SourceLoc loc, const char* what) {
      auto [it, inserted] = seen.emplace(n, loc);
      if (inserted) return;
      diags_.error(loc, std::string(what) + " '" + n + "' is already declared in diagram '" + d_.name + "'");
      diags_.note(it->second, "first declared here");
    };
    for (const auto* a : d_.axes()) declare(a->name, a->loc, "axis");
    for (const auto* i : d_.inputs()) declare(i->name, i->loc, "array");
    for (const auto* s : d_.statements()) declare(s->name, s->loc, "array");
  }

  bool axis_list(const std::string& array, const AxisList& axes, const std::vector<SourceLoc>& locs) {
    bool ok = true;
    for (std::size_t i = 0; i < axes.size(); ++i) {
      if (!d_.find_axis(axes[i])) {
        if (!p_.broken.count(d_.name + "." + axes[i]))
          diags_.error(locs[i], "unknown axis '" + axes[i] + "' in array '" + array + "'");
        ok = false;
      }
      for (std::size_t j = 0; j < i; ++j)
        if (axes[j] == axes[i]) {
          diags_.error(locs[i], "axis '" + axes[i] + "' appears twice in array '" + array + "'");
          ok = false;
        }
    }
    return ok;
  }

  void statement(const Statement& s, const SizeMap* sizes) {
    bool lhs_ok = axis_list(s.name, s.axes, s.axis_locs);
    auto rhs = typer_.axes_of(*s.expr);
    check_call_sizes(*s.expr, sizes);
    if (!lhs_ok || !rhs) return;
    if (sizes) check_call_lifts(s, *sizes);
    for (std::size_t i = 0; i < s.axes.size(); ++i)
      if (!contains(*rhs, s.axes[i]))
        diags_.error(s.axis_locs[i], "axis '" + s.axes[i] + "' of '" + s.name +
                                         "' does not come from its expression, whose axes are " + print(*rhs) +
                                         "; output axes must be derivable from the inputs");
    for (const auto& a : *rhs)
      if (!contains(s.axes, a) && d_.find_axis(a))  // an undeclared axis was reported where it was written
        diags_.error(s.expr->loc, "the expression for '" + s.name + "' has axis '" + a +
                                      "', which the result " + s.name + print(s.axes) +
                                      " lacks; reduce it (sum, contract) or add it to the result");
  }

  static std::string print(const AxisList& l) {
    std::string s = "[";
    for (std::size_t i = 0; i < l.size(); ++i) s += (i ? "," : "") + l[i];
    return s + "]";
  }

  /** A call binds callee axes to caller axes; a callee axis declared as a product must agree. */
  void check_call_sizes(const Expr& e, const SizeMap* sizes) {
    if (!sizes) return;
    walk(e, [&](const Expr& n) {
      if (n.kind != Expr::Kind::apply || n.op != Op::call) return;
      auto it = p_.diagrams.find(n.callee);
      if (it == p_.diagrams.end()) return;
      SizeMap bound;
      for (const auto* in : it->second->inputs())
        for (const auto& a : in->axes) {
          std::string caller = a;
          for (const auto& b : n.bindings)
            if (b.key == a && !b.ident.empty()) caller = b.ident;
          if (auto s = sizes->find(caller); s != sizes->end() && it->second->find_axis(a)) bound[a] = s->second;
        }
      resolve_sizes(*it->second, bound, diags_, n.loc);
    });
  }

  /** Each call of `s` (well typed) can be lifted over its woven axes (lift.hpp): that is how it
   *  is derived and run. Reported at the call. */
  void check_call_lifts(const Statement& s, const SizeMap& sizes) {
    walk(*s.expr, [&](const Expr& n) {
      if (n.kind != Expr::Kind::apply || n.op != Op::call) return;
      std::vector<AxisList> args;
      for (const auto& a : n.args) {
        auto ax = typer_.axes_of(*a);
        if (!ax) return;
        args.push_back(*ax);
      }
      auto shape = typer_.call_shape(n, args);
      if (!shape) return;
      for (const auto& w : shape->woven)
        if (!sizes.count(w)) return;
      try {
        lift_call(p_, n, *shape, args, sizes, s.name);
      } catch (const UserError& e) {
        diags_.error(n.loc, e.what());
      }
    });
  }

  void outputs() {
    auto outs = d_.outputs();
    bool out_dropped = false;
    for (const auto& b : p_.broken) out_dropped |= b.rfind(d_.name + ".", 0) == 0;
    if (outs.empty() && !out_dropped) diags_.error(d_.loc, "diagram '" + d_.name + "' has no output; declare one with 'out NAME : dtype'");
    std::set<std::string> seen;
    for (const auto* o : outs) {
      if (!d_.array_axes(o->name) && !p_.broken.count(d_.name + "." + o->name))
        diags_.error(o->loc, "'out " + o->name + "' names no array of diagram '" + d_.name + "'");
      if (!seen.insert(o->name).second) diags_.error(o->loc, "'" + o->name + "' is already an output");
    }
  }

  void cycles() {
    NamedGraph g = dataflow_graph(d_);
    auto cycle = g.find_cycle();
    if (cycle.empty()) return;
    std::string chain;
    for (auto v : cycle) chain += g.names()[v] + " -> ";
    chain += g.names()[cycle.front()];
    const Statement* s = d_.find_statement(g.names()[cycle.front()]);
    diags_.error(s ? s->loc : d_.loc, "cycle in diagram '" + d_.name + "': " + chain);
  }

  void unused() {
    std::set<std::string> read, axes_used;
    for (const auto* s : d_.statements()) {
      for (const auto& r : referenced_arrays(*s->expr, d_)) read.insert(r);
      axes_used.insert(s->axes.begin(), s->axes.end());
      walk(*s->expr, [&](const Expr& n) {
        axes_used.insert(n.axes.begin(), n.axes.end());
        if (n.kind == Expr::Kind::ref && d_.find_axis(n.name)) axes_used.insert(n.name);
        for (const auto& b : n.bindings) axes_used.insert(b.ident);
      });
    }
    for (const auto* o : d_.outputs()) read.insert(o->name);
    for (const auto* i : d_.inputs()) axes_used.insert(i->axes.begin(), i->axes.end());
    for (const auto* a : d_.axes())
      for (const auto& f : a->size) axes_used.insert(f.axis);
    for (const auto* i : d_.inputs())
      if (!read.count(i->name)) diags_.warning(i->loc, "input '" + i->name + "' is never used");
    for (const auto* s : d_.statements())
      if (!read.count(s->name)) diags_.warning(s->loc, "'" + s->name + "' is computed but never used");
    for (const auto* a : d_.axes())
      if (!axes_used.count(a->name)) diags_.warning(a->loc, "axis '" + a->name + "' is never used");
  }

  const Program& p_;
  const Diagram& d_;
  DiagnosticEngine& diags_;
  Typer typer_;
};

void composition_cycles(const Program& p, DiagnosticEngine& diags) {
  NamedGraph g = call_graph(p.diagrams);
  auto cycle = g.find_cycle();
  if (cycle.empty()) return;
  std::string chain;
  for (auto v : cycle) chain += g.names()[v] + " -> ";
  chain += g.names()[cycle.front()];
  // Report at the call that closes the cycle.
  const Diagram& caller = *p.diagrams.at(g.names()[cycle.back()]);
  SourceLoc at = caller.loc;
  for (const auto* s : caller.statements())
    walk(*s->expr, [&](const Expr& n) {
      if (n.kind == Expr::Kind::apply && n.op == Op::call && n.callee == g.names()[cycle.front()]) at = n.loc;
    });
  diags.error(at, "cycle through composition: " + chain);
}

}  // namespace

bool verify_program(const Program& p, DiagnosticEngine& diags, const Diagram* main, const SizeMap& overrides) {
  int before = diags.error_count();
  for (const auto& f : p.files)
    for (const auto& d : f->file.diagrams) DiagramVerifier(p, d, diags).run(&d == main ? overrides : SizeMap{});
  composition_cycles(p, diags);
  check_call_depth(p, diags);
  return diags.error_count() == before;
}

bool verify_diagram(const Program& p, const Diagram& d, DiagnosticEngine& diags, const SizeMap& overrides) {
  int before = diags.error_count();
  DiagramVerifier(p, d, diags).run(overrides);
  return diags.error_count() == before;
}

}  // namespace napkin
