#include "emit/torch_emitter.hpp"

#include <fmt/core.h>

#include <set>

#include "diagrams/graph_view.hpp"
#include "diagrams/input_scales.hpp"
#include "diagrams/typing.hpp"
#include "emit/torch_runtime.hpp"

namespace napkin {

namespace {

/** Names the generated code uses besides the helpers (which start with '_'), Python's keywords
 *  and the builtins the helpers call: an array so named is renamed, and a diagram so named is
 *  entered as `run` only. */
const std::set<std::string>& reserved() {
  static const std::set<std::string> names{
      "torch", "math", "F", "n", "ref", "dev", "inputs", "sizes", "reference", "float", "False", "None", "True",
      "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif", "else", "except",
      "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass",
      "raise", "return", "try", "while", "with", "yield", "AXES", "SIZES", "DTYPES", "OUT_DTYPES", "INPUTS",
      "OUTPUTS", "DIAGRAM", "INPUT_FAN_IN", "INPUT_SCALES", "run",
      // builtins the helpers call, which a module-level function of a diagram's name would hide
      "abs", "all", "any", "dict", "getattr", "hasattr", "int", "isinstance", "len", "list", "max", "min", "range",
      "round", "str", "tuple", "zip", "ValueError", "RuntimeError", "OverflowError"};
  return names;
}

/** The Python name of an array: itself, or `a_` + itself when it is reserved or starts with `_`,
 *  `a_` or `tmp_` (so that the renaming is one to one, and `tmp_<k>` names temporaries). */
std::string py_name(const std::string& s) {
  if (reserved().count(s) || s.starts_with("_") || s.starts_with("a_") || s.starts_with("tmp_")) return "a_" + s;
  return s;
}

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

std::string py_number(double v) {
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

/** A Python tuple of strings or of literal text. */
std::string py_tuple(const std::vector<std::string>& items, bool quote) {
  std::string s = "(";
  for (std::size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + (quote ? quoted(items[i]) : items[i]);
  return s + (items.size() == 1 ? ",)" : ")");
}

/** One value of the generated code: a Python expression, with the axes of its trailing
 *  dimensions (a tensor), or a Python float (scalar). Tensor code is an atom (a name, a call or
 *  parenthesised), so that a method or an index can follow it. */
struct Value {
  std::string code;
  AxisList axes;
  bool scalar = false;
};

/** Negative index of axis `a` among a tensor's trailing axes. */
std::string dim_of(const AxisList& axes, const std::string& a) {
  for (std::size_t i = 0; i < axes.size(); ++i)
    if (axes[i] == a) return std::to_string(static_cast<long>(i) - static_cast<long>(axes.size()));
  NAPKIN_ASSERT(false) << "axis " << a << " not among the operand's axes";
  return {};
}

/** `v`'s tensor with trailing dimensions `want` (v's axes are a subset): permuted, with broadcast
 *  dimensions inserted for the axes it lacks, except leading ones where `exact_rank` says that no
 *  tensor has batch dimensions before its axes (the top diagram's function: broadcasting aligns
 *  from the right, and F.rms_norm then gets its 1-D weight). Scalars are returned as they are. */
std::string align(const Value& v, const AxisList& want, bool exact_rank) {
  if (v.scalar) return v.code;
  AxisList order;
  for (const auto& a : want)
    if (contains(v.axes, a)) order.push_back(a);
  NAPKIN_ASSERT(order.size() == v.axes.size()) << "aligning an operand to axes it does not fit";
  std::string c = v.code;
  if (order != v.axes) {
    std::vector<std::string> src, dst;
    for (const auto& a : v.axes) src.push_back(dim_of(v.axes, a)), dst.push_back(dim_of(order, a));
    c += ".movedim(" + py_tuple(src, false) + ", " + py_tuple(dst, false) + ")";
  }
  std::size_t skip = 0;
  while (exact_rank && skip < want.size() && !contains(v.axes, want[skip])) ++skip;
  if (order.size() + skip != want.size()) {
    c += "[...";
    for (std::size_t i = skip; i < want.size(); ++i) c += contains(v.axes, want[i]) ? ", :" : ", None";
    c += "]";
  }
  return c;
}

double option(const Expr& e, const std::string& key, double fallback) {
  for (const auto& b : e.bindings)
    if (b.key == key && b.number) return b.number->value;
  return fallback;
}

/** Writes the function `_d_<name>` of one diagram. */
class FunctionWriter {
 public:
  /** `top`: the selected diagram, whose function is called with inputs of exactly their axes. */
  FunctionWriter(const Program& p, const Diagram& d, bool top, DiagnosticEngine& diags)
      : d_(d), top_(top), typer_(d, p.diagrams, nullptr), diags_(diags) {}

  std::string run() {
    std::string out = "def _d_" + d_.name + "(inputs, n, ref, dev):\n";
    out += "    \"\"\"Diagram " + d_.name + ": sizes n (missing ones declared), reference mode ref, device dev.\"\"\"\n";
    out += "    n = _sizes(_DECL[" + quoted(d_.name) + "], None, None, n)\n";
    for (const auto* in : d_.inputs())
      out += "    " + py_name(in->name) + " = _load(inputs[" + quoted(in->name) + "], " + quoted(std::string(dtype_name(in->dtype))) + ", ref)\n";
    NamedGraph g = dataflow_graph(d_);
    auto order = g.topological_order();
    NAPKIN_ASSERT(order) << "emitting a cyclic diagram";
    for (auto v : *order)
      if (const Statement* s = d_.find_statement(g.names()[v])) out += "    " + statement(*s) + "\n";
    out += "    return {";
    auto outs = d_.outputs();
    for (std::size_t i = 0; i < outs.size(); ++i) out += (i ? ", " : "") + quoted(outs[i]->name) + ": " + py_name(outs[i]->name);
    return out + "}\n";
  }

 private:
  /** The statement's lines: its temporaries, then its assignment. */
  std::string statement(const Statement& s) {
    Value v = expr(*s.expr, &s.axes);
    std::string code = v.scalar ? "_tensor(" + v.code + ", dev)" : align(v, s.axes);
    if (s.dtype) code = "_cast(" + code + ", " + quoted(std::string(dtype_name(*s.dtype))) + ", ref)";
    std::string lines;
    for (const auto& t : temporaries_) lines += t + "\n    ";
    temporaries_.clear();
    return lines + py_name(s.name) + " = " + code;
  }

  /** Every 16th level of an expression goes into a temporary (`tmp_<k> = ...` before the
   *  statement): Python refuses more than 200 nested brackets, and the language allows 256
   *  levels of expression, each a few brackets deep here. */
  Value expr(const Expr& e, const AxisList* want = nullptr) {
    ++depth_;
    Value v = node(e, want);
    --depth_;
    if (e.kind != Expr::Kind::apply || depth_ == 0 || depth_ % 16 != 0) return v;
    std::string name = "tmp_" + std::to_string(next_temporary_++);
    temporaries_.push_back(name + " = " + v.code);
    v.code = name;
    return v;
  }

  Value node(const Expr& e, const AxisList* want) {
    switch (e.kind) {
      case Expr::Kind::number: return {py_number(e.number.value), {}, true};
      case Expr::Kind::ref:
        if (const auto* axes = d_.array_axes(e.name)) return {py_name(e.name), *axes, false};
        return {"float(n[" + quoted(e.name) + "])", {}, true};
      case Expr::Kind::apply: break;
    }
    switch (e.op) {
      case Op::contract: return contract(e, want);
      case Op::sum: case Op::max: case Op::mean: return reduction(e);
      case Op::softmax: {
        Value x = expr(*e.args[0]);
        return {"torch.softmax(" + x.code + ", dim=" + dim_of(x.axes, e.axes[0]) + ")", x.axes, false};
      }
      case Op::layernorm: case Op::rmsnorm: return norm(e);
      case Op::mask: return mask(e);
      case Op::causal: case Op::band: return {causal(e) + ".float()", e.axes, false};
      case Op::pos: return {"_pos(n[" + quoted(e.axes[0]) + "], dev)", e.axes, false};
      case Op::pick: {  // L where index(v) == T, 0 elsewhere (a pick outside sum(pick(...); v))
        Value l = expr(*e.args[0]), t = expr(*e.args[1]);
        const Value at{"_pos(n[" + quoted(e.axes[0]) + "], dev)", e.axes, false};
        return {"torch.where(" + align(at, l.axes) + " == " + align(t, l.axes) + ", " + l.code + ", 0.0)", l.axes, false};
      }
      case Op::pow: case Op::minimum: case Op::maximum: return binary(e);
      case Op::call: return call(e);
      case Op::cast: {
        Value x = expr(*e.args[0]);
        return {"_cast(" + x.code + ", " + quoted(std::string(dtype_name(*e.dtype))) + ", ref)", x.axes, x.scalar};
      }
      case Op::add: case Op::sub: case Op::mul: case Op::div: return binary(e);
      default: return unary(e);
    }
  }

  Value unary(const Expr& e) {
    Value x = expr(*e.args[0]);
    if (e.op == Op::neg) return {"(-" + x.code + ")", x.axes, x.scalar};
    std::string name(op_name(e.op));
    if (x.scalar) return {"_s_" + name + "(" + x.code + ")", {}, true};
    if (e.op == Op::gelu_tanh) return {"F.gelu(" + x.code + ", approximate='tanh')", x.axes, false};
    std::string fn = e.op == Op::gelu || e.op == Op::silu ? "F." + name : e.op == Op::step ? "_step" : "torch." + name;
    return {fn + "(" + x.code + ")", x.axes, false};
  }

  Value binary(const Expr& e) {
    Value a = expr(*e.args[0]), b = expr(*e.args[1]);
    if (e.op == Op::pow || e.op == Op::minimum || e.op == Op::maximum) {  // torch.fmin/fmax: NaN as the evaluator's std::fmin
      const std::string name = e.op == Op::pow ? "pow" : e.op == Op::minimum ? "fmin" : "fmax";
      if (a.scalar && b.scalar) return {"_s_" + name + "(" + a.code + ", " + b.code + ")", {}, true};
      if (b.scalar && e.op == Op::pow) return {"torch.pow(" + a.code + ", " + b.code + ")", a.axes, false};
      AxisList axes = axis_union({a.axes, b.axes});
      auto operand = [&](const Value& v) { return v.scalar ? "_tensor(" + v.code + ", dev)" : align(v, axes); };
      return {"torch." + name + "(" + operand(a) + ", " + operand(b) + ")", axes, false};
    }
    const char* sym = e.op == Op::add ? " + " : e.op == Op::sub ? " - " : e.op == Op::mul ? " * " : " / ";
    if (a.scalar && b.scalar)
      return {e.op == Op::div ? "_s_div(" + a.code + ", " + b.code + ")" : "(" + a.code + sym + b.code + ")", {}, true};
    AxisList axes = axis_union({a.axes, b.axes});
    return {"(" + align(a, axes) + sym + align(b, axes) + ")", axes, false};
  }

  Value reduction(const Expr& e) {
    const Expr& arg = *e.args[0];
    if (e.op == Op::sum && arg.kind == Expr::Kind::apply && arg.op == Op::pick && arg.axes == e.axes) {
      Value x = expr(*arg.args[0]), t = expr(*arg.args[1]);  // an expanded gather(L, T; v): torch.gather
      AxisList kept = x.axes;
      std::erase(kept, e.axes[0]);
      return {"_gather(" + x.code + ", " + dim_of(x.axes, e.axes[0]) + ", " + napkin::align(t, x.axes, false) + ")", kept, false};
    }
    Value x = expr(arg);
    std::vector<std::string> dims;
    AxisList kept;
    for (const auto& a : e.axes) dims.push_back(dim_of(x.axes, a));
    for (const auto& a : x.axes)
      if (!contains(e.axes, a)) kept.push_back(a);
    std::string method = e.op == Op::sum ? "sum" : e.op == Op::max ? "amax" : "mean";
    return {x.code + "." + method + "(dim=" + py_tuple(dims, false) + ")", kept, false};
  }

  Value contract(const Expr& e, const AxisList* want) {
    static const std::string letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    AxisList result = *typer_.axes_of(e);
    if (want && want->size() == result.size() && std::is_permutation(want->begin(), want->end(), result.begin())) result = *want;
    std::vector<Value> tensors;
    std::string scalars;
    for (const auto& arg : e.args) {
      Value v = expr(*arg);
      if (v.scalar) scalars += " * " + v.code;
      else tensors.push_back(std::move(v));
    }
    if (tensors.empty()) return {"(1.0" + scalars + ")", {}, true};
    std::vector<AxisList> lists;
    for (const auto& t : tensors) lists.push_back(t.axes);
    AxisList all = axis_union(lists);
    if (all.size() > letters.size()) {
      diags_.error(e.loc, "the torch target writes a contraction as torch.einsum, which names at most 52 axes; this one has " +
                              std::to_string(all.size()));
      return {"None", result, false};
    }
    auto subscripts = [&](const AxisList& axes) {
      std::string s = "...";
      for (const auto& a : axes) s += letters[static_cast<std::size_t>(std::find(all.begin(), all.end(), a) - all.begin())];
      return s;
    };
    std::string eq, args;
    for (const auto& t : tensors) eq += (eq.empty() ? "" : ",") + subscripts(t.axes), args += ", " + t.code;
    std::string code = "_einsum(\"" + eq + "->" + subscripts(result) + "\"" + args + ")";
    return {scalars.empty() ? code : "(" + code + scalars + ")", result, false};
  }

  Value norm(const Expr& e) {
    Value x = expr(*e.args[0]);
    const std::string& a = e.axes[0];
    std::string dim = dim_of(x.axes, a), eps = py_number(option(e, "eps", 1e-5));
    // A weight along the normalised axis alone goes into torch's fused kernel, and the bias too
    // when the weight did (y * W + B); any other weight or bias (more axes, a scalar) multiplies
    // or adds after it, aligned to X.
    std::string fused[2] = {"None", "None"}, after;
    for (std::size_t i = 1; i < e.args.size(); ++i) {
      Value w = expr(*e.args[i]);
      bool along = !w.scalar && w.axes == AxisList{a} && (i == 1 || fused[0] != "None");
      if (along) fused[i - 1] = w.code;
      else after += (i == 1 ? " * " : " + ") + align(w, x.axes);
    }
    std::string code = e.op == Op::layernorm ? "_layer_norm(" + x.code + ", " + dim + ", " + fused[0] + ", " + fused[1] + ", " + eps + ")"
                                             : "_rms_norm(" + x.code + ", " + dim + ", " + fused[0] + ", " + eps + ")";
    return {after.empty() ? code : "(" + code + after + ")", x.axes, false};
  }

  /** A boolean [q, x] tensor of where causal(q, x[; window=W]) or band(q, x; lo, hi) keeps. */
  std::string causal(const Expr& e) {
    const MaskBand keep = mask_band(e);
    return "_band(n[" + quoted(e.axes[0]) + "], n[" + quoted(e.axes[1]) + "], " + (keep.lo ? std::to_string(*keep.lo) : "None") +
           ", " + std::to_string(keep.hi) + ", dev)";
  }

  Value mask(const Expr& e) {
    Value x = expr(*e.args[0]);
    const Expr& m = *e.args[1];
    if (m.kind == Expr::Kind::apply && (m.op == Op::causal || m.op == Op::band)) {
      Value keep{causal(m), m.axes, false};
      return {x.code + ".masked_fill(~" + align(keep, x.axes) + ", -math.inf)", x.axes, false};
    }
    Value mv = expr(m);
    if (x.scalar) return {"(" + x.code + " if " + mv.code + " != 0 else -math.inf)", {}, true};
    if (mv.scalar) return {"(" + x.code + " if " + mv.code + " != 0 else torch.full_like(" + x.code + ", -math.inf))", x.axes, false};
    return {x.code + ".masked_fill(" + align(mv, x.axes) + " == 0, -math.inf)", x.axes, false};
  }

  Value call(const Expr& e) {
    std::vector<Value> args;
    std::vector<AxisList> arg_axes;
    for (const auto& a : e.args) args.push_back(expr(*a)), arg_axes.push_back(args.back().axes);
    CallShape shape = *typer_.call_shape(e, arg_axes);
    auto formals = shape.callee->inputs();
    std::string ins = "{";
    for (std::size_t i = 0; i < formals.size(); ++i) {
      AxisList want = shape.woven;
      for (const auto& f : formals[i]->axes) want.push_back(shape.bind.at(f));
      std::string code = args[i].scalar ? "_tensor(" + args[i].code + ", dev)" : align(args[i], want);
      ins += (i ? ", " : "") + quoted(formals[i]->name) + ": " + code;
    }
    std::string bound = "{";
    for (const auto& [callee_axis, caller_axis] : shape.bind)
      bound += (bound.size() > 1 ? ", " : "") + quoted(callee_axis) + ": n[" + quoted(caller_axis) + "]";
    const std::string& out = shape.callee->outputs().front()->name;
    std::string code = "_d_" + shape.callee->name + "(" + ins + "}, " + bound + "}, ref, dev)[" + quoted(out) + "]";
    if (!shape.woven.empty()) {
      std::vector<std::string> sizes;
      for (const auto& w : shape.woven) sizes.push_back("n[" + quoted(w) + "]");
      code = "_woven(" + code + ", " + py_tuple(sizes, false) + ", " + std::to_string(shape.result.size() - shape.woven.size()) + ")";
    }
    return {code, shape.result, false};
  }

  std::string align(const Value& v, const AxisList& want) const { return napkin::align(v, want, top_); }

  const Diagram& d_;
  bool top_;
  Typer typer_;
  DiagnosticEngine& diags_;
  int depth_ = 0;               ///< levels of the expression being written above the current node
  int next_temporary_ = 0;      ///< tmp_<k> names, numbered through the function
  std::vector<std::string> temporaries_;  ///< the current statement's, in evaluation order
};

/** `d` and every diagram it calls, callees first, each once. */
void reachable(const Program& p, const Diagram& d, std::vector<const Diagram*>& out) {
  if (std::find(out.begin(), out.end(), &d) != out.end()) return;
  for (const auto* s : d.statements())
    for (const auto& name : called_diagrams(*s->expr)) reachable(p, *p.diagrams.at(name), out);
  out.push_back(&d);
}

std::string declarations(const std::vector<const Diagram*>& ds) {
  std::string out = "# Axis declarations per diagram: (axis, factors of its size), a factor a size or an earlier axis.\n_DECL = {\n";
  for (const auto* d : ds) {
    out += "    " + quoted(d->name) + ": (";
    for (const auto* a : d->axes()) {
      std::vector<std::string> factors;
      for (const auto& f : a->size) factors.push_back(f.axis.empty() ? std::to_string(f.literal) : quoted(f.axis));
      out += "(" + quoted(a->name) + ", " + py_tuple(factors, false) + "), ";
    }
    out += "),\n";
  }
  return out + "}\n";
}

/** INPUT_FAN_IN (input -> tuple of axis names and literal integers whose product is its fan-in;
 *  empty: scale 1) and INPUT_SCALES (input -> 1/sqrt(fan-in) at SIZES): the scales test inputs are
 *  drawn at (diagrams/input_scales.hpp), the same as napkin bench's. */
std::string input_scale_constants(const Program& p, const Diagram& d, const SizeMap& sizes) {
  const std::vector<InputScale> scales = input_scales(p, d, sizes);
  std::string fan = "INPUT_FAN_IN = {", sc = "INPUT_SCALES = {";
  for (std::size_t i = 0; i < scales.size(); ++i) {
    std::vector<std::string> factors;
    for (const auto& f : scales[i].factors) factors.push_back(f.axis.empty() ? std::to_string(f.literal) : quoted(f.axis));
    fan += (i ? ", " : "") + quoted(scales[i].input) + ": " + py_tuple(factors, false);
    sc += (i ? ", " : "") + quoted(scales[i].input) + ": " + fmt::format("{:.17g}", scales[i].scale());
  }
  return fan + "}\n" + sc + "}\n";
}

std::string constants(const Program& p, const Diagram& d, const SizeMap& sizes) {
  std::string out = "DIAGRAM = " + quoted(d.name) + "\n";
  std::vector<std::string> ins, outs;
  for (const auto* in : d.inputs()) ins.push_back(in->name);
  for (const auto* o : d.outputs()) outs.push_back(o->name);
  out += "INPUTS = " + py_tuple(ins, true) + "\nOUTPUTS = " + py_tuple(outs, true) + "\n";
  out += "AXES = {\n";
  for (const auto* in : d.inputs()) out += "    " + quoted(in->name) + ": " + py_tuple(in->axes, true) + ",\n";
  for (const auto* s : d.statements()) out += "    " + quoted(s->name) + ": " + py_tuple(s->axes, true) + ",\n";
  out += "}\nSIZES = {";
  bool first = true;
  for (const auto* a : d.axes()) out += (first ? "" : ", ") + quoted(a->name) + ": " + std::to_string(sizes.at(a->name)), first = false;
  out += "}\nDTYPES = {";
  for (std::size_t i = 0; i < ins.size(); ++i) out += (i ? ", " : "") + quoted(ins[i]) + ": " + quoted(std::string(dtype_name(d.inputs()[i]->dtype)));
  out += "}\nOUT_DTYPES = {";
  for (std::size_t i = 0; i < outs.size(); ++i) out += (i ? ", " : "") + quoted(outs[i]) + ": " + quoted(std::string(dtype_name(d.outputs()[i]->dtype)));
  return out + "}\n" + input_scale_constants(p, d, sizes);
}

std::string entry(const Diagram& d) {
  bool plain = py_name(d.name) == d.name;
  std::string name = plain ? d.name : "run";
  std::string out = "def " + name + "(inputs, sizes=None, *, reference=False):\n";
  out += "    \"\"\"Diagram " + d.name + ": its outputs by name, from inputs by name (see the module's docstring).\"\"\"\n";
  out += "    n = _sizes(_DECL[DIAGRAM], {k: AXES[k] for k in INPUTS}, inputs, sizes)\n";
  out += "    dev = _device(inputs)\n";
  out += "    out = _d_" + d.name + "(inputs, n, reference, dev)\n";
  out += "    return {k: _store(out[k], OUT_DTYPES[k], reference, dev) for k in OUTPUTS}\n";
  if (plain) out += "\n\nrun = " + name + "\n";
  return out;
}

}  // namespace

std::string emit_torch(const Program& p, const Diagram& d, const SizeMap& sizes, DiagnosticEngine& diags) {
  std::vector<const Diagram*> ds;
  reachable(p, d, ds);
  std::string out = "# Generated by napkin (emit --target torch) from diagram " + d.name + ".\n";
  out += "\"\"\"Diagram " + d.name + " computed with PyTorch as eager PyTorch computes it: `" + (py_name(d.name) == d.name ? d.name : std::string("run")) +
         "(inputs)` returns its outputs.\n\n"
         "inputs: name -> tensor, axes as in AXES, stored as DTYPES says (bf16 as torch.bfloat16, fp8 as\n"
         "torch.float8_*, int8 and int4 as torch.int8); sizes come from the shapes, then `sizes`, then SIZES'\n"
         "declarations. reference=True computes in fp32 and returns fp32 outputs, unrounded.\n\"\"\"\n";
  out += torch_runtime();
  out += "\n" + declarations(ds) + "\n" + constants(p, d, sizes);
  for (const auto* x : ds) out += "\n\n" + FunctionWriter(p, *x, x == &d, diags).run();
  out += "\n\n" + entry(d);
  return out;
}

}  // namespace napkin
