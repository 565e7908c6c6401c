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
    case Expr::Kind::apply: {
      if (diags_) return apply(e);
      if (auto it = memo_.find(&e); it != memo_.end()) return it->second;
      auto axes = apply(e);
      memo_.emplace(&e, axes);
      return axes;
    }
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
  if (e.op == Op::minimum && !e.axes.empty())
    return error(e.axis_locs.front(), "'min' is the element-wise minimum min(A, B) and takes no axes; there is no min "
                                      "reduction (write -max(-X; v))"),
           std::nullopt;
  if (e.op != Op::contract && e.op != Op::sum && e.op != Op::max && e.op != Op::mean && e.op != Op::softmax &&
      e.op != Op::layernorm && e.op != Op::rmsnorm && e.op != Op::logsumexp && e.op != Op::l2norm &&
      e.op != Op::gather && e.op != Op::pick && !is_positional(e.op) && !e.axes.empty())
    return error(e.axis_locs.front(), "'" + name + "' takes no axes after ';'"), std::nullopt;
  if (is_positional(e.op)) return positional(e);
  if (e.op == Op::gather || e.op == Op::pick) {
    if (!arity(2, 2) || !axes_known() || !no_bindings("")) return std::nullopt;
    return gather(e, args[0], args[1]);
  }

  switch (e.op) {
    case Op::contract: {
      if (!arity(1, 64) || !axes_known() || !no_bindings("")) return std::nullopt;
      AxisList all = axis_union(args);
      if (!axes_in(all, "reduced")) return std::nullopt;
      return remove(all);
    }
    case Op::sum: case Op::max: case Op::mean: case Op::logsumexp: {
      if (e.op == Op::max && e.args.size() != 1)
        return error(e.loc, "'max' takes one operand and the axes it reduces, max(X; v), or two operands and no axes, the "
                            "element-wise max(A, B); got " + std::to_string(e.args.size()) + " operand" +
                            (e.args.size() == 1 ? "" : "s") + (e.axes.empty() ? "" : " and axes")),
               std::nullopt;
      if (!arity(1, 1) || !axes_known() || !no_bindings("")) return std::nullopt;
      if (e.axes.empty())
        return error(e.loc, "'" + name + "' needs the axes it reduces after ';'" +
                                (e.op == Op::max ? " (or two operands: the element-wise max(A, B))" : "")),
               std::nullopt;
      if (!axes_in(args[0], "reduced")) return std::nullopt;
      return remove(args[0]);
    }
    case Op::softmax: case Op::layernorm: case Op::rmsnorm: case Op::l2norm: {
      std::size_t max_args = e.op == Op::softmax || e.op == Op::l2norm ? 1 : e.op == Op::rmsnorm ? 2 : 3;
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
    case Op::minimum: case Op::maximum:
      if (!arity(2, 2) || !no_bindings("")) return std::nullopt;
      return axis_union(args);
    case Op::pow: {
      if (!arity(2, 2) || !no_bindings("")) return std::nullopt;
      const Expr& p = *e.args[1];
      const bool number = p.kind == Expr::Kind::number ||
                          (p.kind == Expr::Kind::apply && p.op == Op::neg && p.args[0]->kind == Expr::Kind::number);
      if (!number)
        return error(p.loc, "the exponent of 'pow' must be a number, as in pow(X, 2) or pow(X, -0.5); write exp(P * log(X)) "
                            "for an array exponent"),
               std::nullopt;
      return args[0];
    }
    default:  // unary element-wise maps
      if (!arity(1, 1) || !no_bindings("")) return std::nullopt;
      return args[0];
  }
}

std::optional<std::int64_t> Typer::integer_option(const Expr& e, const std::string& key, std::int64_t lo, bool required, bool& ok) {
  const std::string name(op_name(e.op));
  std::optional<std::int64_t> value;
  bool seen = false;
  for (const auto& b : e.bindings) {
    if (b.key != key) continue;
    if (seen) return ok = error(b.loc, "option '" + key + "' of '" + name + "' is given twice"), std::nullopt;
    seen = true;
    const double v = b.number ? b.number->value : 0;
    if (!b.number || v != std::floor(v) || v < static_cast<double>(lo) || std::fabs(v) > 1099511627776.0)
      return ok = error(b.loc, "option '" + key + "' of '" + name + "' needs an integer" +
                                   (lo > 0 ? " of at least " + std::to_string(lo) : std::string(" (it may be negative)")) +
                                   ", as in " + key + "=" + (lo > 0 ? std::to_string(lo) : "-2") + "; got " +
                                   (b.number ? b.number->spelling : b.ident)),
             std::nullopt;
    value = static_cast<std::int64_t>(v);
  }
  if (!seen && required) ok = error(e.loc, "'" + name + "' needs the option '" + key + "='");
  return value;
}

std::optional<AxisList> Typer::gather(const Expr& e, const AxisList& rows, const AxisList& targets) {
  const std::string name(op_name(e.op));
  if (e.axes.size() != 1)
    return error(e.loc, "'" + name + "' picks along exactly one axis, given after ';': " + name + "(L, T; v)"), std::nullopt;
  const std::string& v = e.axes[0];
  if (!contains(rows, v))
    return error(e.axis_locs[0], "axis '" + v + "' of '" + name + "' is not an axis of its first operand (the array picked from)"),
           std::nullopt;
  const Expr& t = *e.args[1];
  if (contains(targets, v))
    return error(t.loc, "the targets of '" + name + "' have axis '" + v + "', the axis they index: they hold one index per " +
                            "entry of the other axes"),
           std::nullopt;
  for (const auto& a : targets)
    if (!contains(rows, a))
      return error(t.loc, "the targets of '" + name + "' have axis '" + a + "', which the array picked from lacks"), std::nullopt;
  std::optional<DType> dt;
  if (t.kind == Expr::Kind::ref) {
    if (const auto* in = d_.find_input(t.name)) dt = in->dtype;
    else if (const auto* st = d_.find_statement(t.name)) dt = st->dtype;
  }
  if (!dt || !is_integer_dtype(*dt))
    return error(t.loc, "the targets of '" + name + "' must name an array of an integer dtype (int32 holds a vocabulary " +
                            "index), as in " + name + "(L, T; v) with 'in T[t] : int32'" +
                            (dt ? "; '" + t.name + "' is " + std::string(dtype_name(*dt))
                             : t.kind == Expr::Kind::ref && d_.find_statement(t.name) ? "; '" + t.name + "' has no dtype label"
                                                                                       : std::string())),
           std::nullopt;
  if (e.op == Op::pick) return rows;
  AxisList out = rows;
  std::erase(out, v);
  return out;
}

std::optional<AxisList> Typer::positional(const Expr& e) {
  const std::string name(op_name(e.op));
  if (!e.args.empty()) return error(e.args[0]->loc, "'" + name + "' takes axis names, not expressions"), std::nullopt;
  const std::size_t want = e.op == Op::pos ? 1 : 2;
  if (e.axes.size() != want)
    return error(e.loc, e.op == Op::pos ? "'pos' takes one axis: pos(q)"
                        : e.op == Op::causal ? "'causal' takes two axes: causal(q, x)"
                                             : "'band' takes two axes: band(q, x; lo=L, hi=H)"),
           std::nullopt;
  bool ok = true;
  for (std::size_t i = 0; i < e.axes.size(); ++i) ok = check_axis_known(e.axes[i], e.axis_locs[i]) && ok;
  if (!ok) return std::nullopt;
  if (want == 2 && e.axes[0] == e.axes[1]) return error(e.axis_locs[1], "'" + name + "' needs two different axes"), std::nullopt;
  const char* allowed[2] = {e.op == Op::causal ? "window" : e.op == Op::band ? "lo" : "", e.op == Op::band ? "hi" : ""};
  for (const auto& b : e.bindings)
    if (b.key.empty() || (b.key != allowed[0] && b.key != allowed[1]))
      return error(b.loc, "'" + name + "' has no option '" + b.key + "'"), std::nullopt;
  if (e.op == Op::causal) integer_option(e, "window", 1, false, ok);
  if (e.op == Op::band) {
    auto lo = integer_option(e, "lo", -1099511627776, true, ok);
    auto hi = integer_option(e, "hi", -1099511627776, true, ok);
    if (lo && hi && *lo > *hi)
      ok = error(e.loc, "'band' keeps lo <= x - q <= hi: lo=" + std::to_string(*lo) + " is greater than hi=" + std::to_string(*hi) +
                            ", so the mask is empty");
  }
  if (!ok) return std::nullopt;
  return e.axes;
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
