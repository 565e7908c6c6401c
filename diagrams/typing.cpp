#include "diagrams/typing.hpp"

#include <algorithm>
#include <cmath>
#include <set>

namespace napkin {

bool contains(const AxisList& l, const std::string& a) { return std::find(l.begin(), l.end(), a) != l.end(); }

AxisList axis_union(const std::vector<AxisList>& lists) {
  AxisList out;
  for (const auto& l : lists)
    for (const auto& a : l)
      if (!contains(out, a)) out.push_back(a);
  return out;
}

bool Typer::error(SourceLoc loc, const std::string& msg) {
  if (diags_) diags_->error(loc, msg);
  return false;
}

bool Typer::epsilon_in_range(const Expr& e, const std::string& name) {
  bool seen = false;
  for (const auto& b : e.bindings) {
    if (b.key != "eps") continue;
    if (seen) return error(b.loc, "option 'eps' of '" + name + "' is given twice");
    seen = true;
    if (!b.number) return error(b.loc, "option 'eps' of '" + name + "' needs a number, as in eps=1e-5");
    double v = b.number->value;
    if (!(v > 0) || !std::isfinite(v))
      return error(b.loc, "option 'eps' of '" + name + "' must be a positive number (it keeps sqrt(var + eps) from 0), got " +
                              b.number->spelling);
  }
  return true;
}

bool Typer::check_axis_known(const std::string& a, SourceLoc loc) {
  if (d_.find_axis(a)) return true;
  if (broken_ && broken_->count(d_.name + "." + a)) return false;
  return error(loc, "unknown axis '" + a + "'");
}

std::optional<AxisList> Typer::axes_of(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::number: return AxisList{};
    case Expr::Kind::ref: {
      if (const auto* axes = d_.array_axes(e.name)) return *axes;
      if (d_.find_axis(e.name)) {
        if (e.level) error(e.loc, "'" + e.name + "' is an axis (its size is a scalar) and cannot carry a memory level");
        return AxisList{};
      }
      if (broken_ && broken_->count(d_.name + "." + e.name)) return std::nullopt;
      error(e.loc, "undefined name '" + e.name + "': not an array or an axis of diagram '" + d_.name + "'");
      return std::nullopt;
    }
    case Expr::Kind::apply: return apply(e);
  }
  return std::nullopt;
}

std::optional<AxisList> Typer::apply(const Expr& e) {
  std::vector<AxisList> args;
  bool ok = true;
  for (const auto& a : e.args) {
    auto ax = axes_of(*a);
    ok = ok && ax.has_value();
    args.push_back(ax.value_or(AxisList{}));
  }
  if (!ok) return std::nullopt;
  std::string name(e.op == Op::call ? e.callee : op_name(e.op));
  auto arity = [&](std::size_t lo, std::size_t hi) {
    if (e.args.size() >= lo && e.args.size() <= hi) return true;
    std::string want = lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi);
    return error(e.loc, "'" + name + "' takes " + want + " operand" + (hi == 1 ? "" : "s") + ", got " +
                            std::to_string(e.args.size()));
  };
  auto axes_known = [&]() {
    bool good = true;
    for (std::size_t i = 0; i < e.axes.size(); ++i) good = check_axis_known(e.axes[i], e.axis_locs[i]) && good;
    return good;
  };
  auto no_bindings = [&](const char* allowed) {
    for (const auto& b : e.bindings)
      if (b.key != allowed) return error(b.loc, "'" + name + "' has no option '" + b.key + "'");
    return true;
  };
  auto axes_in = [&](const AxisList& operand, const char* what) {
    bool good = true;
    for (std::size_t i = 0; i < e.axes.size(); ++i)
      if (!contains(operand, e.axes[i]))
        good = error(e.axis_locs[i], "axis '" + e.axes[i] + "' " + what + " by '" + name +
                                         "' is not an axis of its operand" + (e.args.size() > 1 ? "s" : ""));
    return good;
  };
  auto remove = [&](AxisList l) {
    std::erase_if(l, [&](const std::string& a) { return contains(e.axes, a); });
    return l;
  };

  if (e.op == Op::call) {
    auto shape = call_shape(e, args);
    if (!shape) return std::nullopt;
    return shape->result;
  }
  if (e.op != Op::contract && e.op != Op::sum && e.op != Op::max && e.op != Op::mean && e.op != Op::softmax &&
      e.op != Op::layernorm && e.op != Op::rmsnorm && e.op != Op::causal && !e.axes.empty())
    return error(e.axis_locs.front(), "'" + name + "' takes no axes after ';'"), std::nullopt;

  switch (e.op) {
    case Op::contract: {
      if (!arity(1, 64) || !axes_known() || !no_bindings("")) return std::nullopt;
      AxisList all = axis_union(args);
      if (!axes_in(all, "reduced")) return std::nullopt;
      return remove(all);
    }
    case Op::sum: case Op::max: case Op::mean: {
      if (!arity(1, 1) || !axes_known() || !no_bindings("")) return std::nullopt;
      if (e.axes.empty()) return error(e.loc, "'" + name + "' needs the axes it reduces after ';'"), std::nullopt;
      if (!axes_in(args[0], "reduced")) return std::nullopt;
      return remove(args[0]);
    }
    case Op::softmax: case Op::layernorm: case Op::rmsnorm: {
      std::size_t max_args = e.op == Op::softmax ? 1 : e.op == Op::rmsnorm ? 2 : 3;
      if (!arity(1, max_args) || !axes_known() || !no_bindings(e.op == Op::softmax ? "" : "eps")) return std::nullopt;
      if (!epsilon_in_range(e, name)) return std::nullopt;
      if (e.axes.size() != 1)
        return error(e.loc, "'" + name + "' normalises over exactly one axis, given after ';'"), std::nullopt;
      if (!axes_in(args[0], "normalised over")) return std::nullopt;
      for (std::size_t i = 1; i < args.size(); ++i)
        for (const auto& a : args[i])
          if (!contains(args[0], a))
            return error(e.args[i]->loc, "the " + std::string(i == 1 ? "weight" : "bias") + " of '" + name +
                                             "' has axis '" + a + "', which its input lacks"),
                   std::nullopt;
      return args[0];
    }
    case Op::causal: {
      if (e.axes.size() != 2) return error(e.loc, "'causal' takes two axes: causal(q, x)"), std::nullopt;
      if (!axes_known() || !no_bindings("")) return std::nullopt;
      if (e.axes[0] == e.axes[1]) return error(e.axis_locs[1], "'causal' needs two different axes"), std::nullopt;
      return e.axes;
    }
    case Op::mask: {
      if (!arity(2, 2) || !no_bindings("")) return std::nullopt;
      for (const auto& a : args[1])
        if (!contains(args[0], a))
          return error(e.args[1]->loc, "the mask has axis '" + a + "', which the masked array lacks"), std::nullopt;
      return args[0];
    }
    case Op::cast:
      if (!e.dtype) return error(e.loc, "'cast' needs a dtype: cast(X, bf16)"), std::nullopt;
      if (!arity(1, 1) || !no_bindings("")) return std::nullopt;
      return args[0];
    case Op::add: case Op::sub: case Op::mul: case Op::div:
      if (!arity(2, 2)) return std::nullopt;
      return axis_union(args);
    default:  // unary element-wise maps
      if (!arity(1, 1) || !no_bindings("")) return std::nullopt;
      return args[0];
  }
}

std::optional<CallShape> Typer::call_shape(const Expr& e, const std::vector<AxisList>& args) {
  auto it = table_.find(e.callee);
  if (it == table_.end()) {
    error(e.loc, "unknown operation or diagram '" + e.callee + "'");
    return std::nullopt;
  }
  CallShape s;
  s.callee = it->second;
  const Diagram& callee = *s.callee;
  auto inputs = callee.inputs();
  auto outputs = callee.outputs();
  if (outputs.size() != 1) {
    error(e.loc, "diagram '" + callee.name + "' has " + std::to_string(outputs.size()) +
                     " outputs; only a diagram with one output can be called");
    return std::nullopt;
  }
  if (e.args.size() != inputs.size()) {
    error(e.loc, "diagram '" + callee.name + "' takes " + std::to_string(inputs.size()) + " inputs, got " +
                     std::to_string(e.args.size()));
    return std::nullopt;
  }
  if (!e.axes.empty()) {
    error(e.axis_locs.front(), "a call binds axes as 'callee_axis=caller_axis', not a bare axis");
    return std::nullopt;
  }
  bool ok = true;
  for (const auto& b : e.bindings) {
    if (!callee.find_axis(b.key)) ok = error(b.loc, "diagram '" + callee.name + "' has no axis '" + b.key + "'");
    else if (b.ident.empty()) ok = error(b.loc, "an axis binding needs an axis name: " + b.key + "=AXIS");
    else if (!check_axis_known(b.ident, b.loc)) ok = false;
    else s.bind[b.key] = b.ident;
  }
  if (!ok) return std::nullopt;
  std::set<std::string> image;
  for (std::size_t i = 0; i < inputs.size(); ++i)
    for (const auto& a : inputs[i]->axes) {
      const std::string& caller = s.bind.count(a) ? s.bind[a] : (s.bind[a] = a);
      image.insert(caller);
      if (!contains(args[i], caller)) {
        error(e.args[i]->loc, "argument " + std::to_string(i + 1) + " of '" + callee.name + "' lacks axis '" + caller +
                                  "' for the callee's axis '" + a + "'" +
                                  (caller == a ? " (bind it with " + a + "=AXIS after ';')" : ""));
        ok = false;
      }
    }
  if (!ok) return std::nullopt;
  for (std::size_t i = 0; i < args.size(); ++i) {
    AxisList bound_here;
    for (const auto& a : inputs[i]->axes) bound_here.push_back(s.bind[a]);
    for (const auto& a : args[i]) {
      if (image.count(a) && !contains(bound_here, a)) {
        error(e.args[i]->loc, "argument " + std::to_string(i + 1) + " of '" + callee.name + "' has axis '" + a +
                                  "', which is bound to a callee axis that input " + std::to_string(i + 1) + " lacks");
        return std::nullopt;
      }
      if (!image.count(a) && !contains(s.woven, a)) s.woven.push_back(a);
    }
  }
  const auto* out_axes = callee.array_axes(outputs[0]->name);
  if (!out_axes) return std::nullopt;  // the callee's own verification reports it
  for (const auto& a : *out_axes) {
    if (!s.bind.count(a)) {
      error(e.loc, "output axis '" + a + "' of '" + callee.name + "' is bound by none of its inputs");
      return std::nullopt;
    }
    if (contains(s.result, s.bind[a])) {
      error(e.loc, "the binding maps two output axes of '" + callee.name + "' to axis '" + s.bind[a] + "'");
      return std::nullopt;
    }
    s.result.push_back(s.bind[a]);
  }
  for (const auto& w : s.woven) s.result.push_back(w);
  return s;
}

}  // namespace napkin
