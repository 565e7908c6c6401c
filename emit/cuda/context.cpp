#include "emit/cuda/context.hpp"

#include "lower/loop_band.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "diagrams/graph_view.hpp"

namespace napkin::cuda {

std::string ctype(DType t) {
  switch (t) {
    case DType::fp32: return "float";
    case DType::bf16: return "__nv_bfloat16";
    case DType::fp16: return "__half";
    case DType::fp8e4m3: return "__nv_fp8_e4m3";  // emit/cuda/device/fp8.cuh
    case DType::fp8e5m2: return "__nv_fp8_e5m2";
    case DType::int8: return "int8_t";  // emit/cuda/device/int8.cuh
    case DType::int32: return "int32_t";
    default: break;
  }
  throw UserError("emit --target cuda stores fp32, bf16, fp16, fp8e4m3, fp8e5m2 and int8 arrays (and int32 indices); " + std::string(dtype_name(t)) +
                  " is not supported yet (use --dtype or change the diagram's dtypes)");
}

void Code::line(const std::string& s) {
  if (s.empty()) {
    text += "\n";
    return;
  }
  text += std::string(2 * static_cast<std::size_t>(indent), ' ') + s + "\n";
}
void Code::open(const std::string& s) { line(s + " {"), ++indent; }
void Code::close(const std::string& tail) { --indent, line("}" + tail); }

std::string flit(double v) {
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "(-INFINITY)";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s + "f";
}

double eps_of(const Expr& e) {
  for (const auto& b : e.bindings)
    if (b.key == "eps" && b.number) return b.number->value;
  return 1e-5;
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

Context::Context(const Program& p, const Diagram& d, const Derivation& dv, EmitOptions opt)
    : p_(p), d_(d), dv_(dv), opt_(std::move(opt)), typer_(d, p.diagrams, nullptr), weave_(weave_analysis(p, d)) {}

DType emit_dtype(const Diagram& d, const std::string& array, const EmitOptions& opt) {
  return opt.reference ? DType::fp32 : storage_dtype(d, array, ModelOptions{});
}

bool stores_fp8(const Diagram& d, const Hardware& hw, const EmitOptions& opt) {
  std::vector<std::string> arrays;
  for (const auto* in : d.inputs()) arrays.push_back(in->name);
  for (const auto* st : d.statements()) arrays.push_back(st->name);
  bool any = false;
  for (const auto& a : arrays) {
    const DType t = emit_dtype(d, a, opt);
    if (t != DType::fp8e4m3 && t != DType::fp8e5m2) continue;
    if (!hw.tensor_rate(t))
      throw UserError("emit --target cuda: " + a + " is stored as " + std::string(dtype_name(t)) + ", but " + hw.name + " has no " +
                      std::string(dtype_name(t)) + " tensor cores (fp8 needs sm_89 or later; napkin's fp8 GEMM runs on wgmma, sm_90a: --hw h100)");
    any = true;
  }
  return any;
}

bool stores_int8(const Diagram& d, const Hardware& hw, const EmitOptions& opt) {
  if (opt.reference) return false;
  std::vector<std::string> arrays;
  for (const auto* in : d.inputs()) arrays.push_back(in->name);
  bool any = false;
  for (const auto* st : d.statements()) {
    arrays.push_back(st->name);
    any |= st->dtype == DType::int8;
    walk(*st->expr, [&](const Expr& e) { any |= e.kind == Expr::Kind::apply && e.op == Op::cast && e.dtype == DType::int8; });
  }
  for (const auto& a : arrays) {
    if (emit_dtype(d, a, opt) != DType::int8) continue;
    if (!hw.tensor_rate(DType::int8))
      throw UserError("emit --target cuda: " + a + " is stored as int8, but " + hw.name + " has no int8 tensor cores (napkin's int8 GEMM runs on mma.sync " +
                      "m16n8k32, sm_80 and later: --hw a100 or h100)");
    any = true;
  }
  return any;
}

DType Context::dtype(const std::string& array) const { return emit_dtype(d_, array, opt_); }

std::string horner(const AxisList& axes, const std::function<std::string(const std::string&)>& at, const std::string& sizes) {
  std::string s;
  for (const auto& a : axes) s = s.empty() ? at(a) : "(" + s + ") * " + sizes + a + " + " + at(a);
  return s.empty() ? "0" : s;
}

std::string Context::index(const std::string& array) const {
  return horner(axes(array), [](const std::string& a) { return "i_" + a; });
}

std::string Context::load(const std::string& array) const {
  if (axes(array).empty() && d_.find_input(array)) return "scalar_" + array;  // read once (declare_sizes)
  return "napkin::to_f(a." + array + "[" + index(array) + "])";
}

std::string Context::bounded_load(const std::string& array, const AxisList& edge) const {
  std::vector<std::string> in_range;
  for (const auto& ax : axes(array))
    if (std::find(edge.begin(), edge.end(), ax) != edge.end()) in_range.push_back("i_" + ax + " < N_" + ax);
  if (in_range.empty()) return load(array);
  return "(" + join(in_range, " && ") + " ? " + load(array) + " : 0.0f)";
}

NodeOverride bounded_loads(const Context& c, NodeOverride base, AxisList edge, std::vector<std::string> inlined) {
  return [&c, base = std::move(base), edge = std::move(edge), inlined = std::move(inlined)](const Expr& e) -> std::optional<std::string> {
    if (base)
      if (auto s = base(e)) return s;
    if (e.kind != Expr::Kind::ref || !c.diagram().array_axes(e.name)) return std::nullopt;
    if (std::find(inlined.begin(), inlined.end(), e.name) != inlined.end()) return std::nullopt;
    return c.bounded_load(e.name, edge);
  };
}

void Context::declare_sizes(Code& c) const {
  std::vector<std::string> parts;
  for (const auto* ax : d_.axes()) parts.push_back("N_" + ax->name + " = a.N_" + ax->name);
  c.line("[[maybe_unused]] const int64_t " + join(parts) + ";");
  // Scalar inputs (dequantisation scales) read once: the compiler repeats a load after every store
  // it cannot prove disjoint (the fp8 attention's PTX read sv again after each epilogue store, 32 times)
  for (const auto* in : d_.inputs())
    if (axes(in->name).empty()) c.line("[[maybe_unused]] const float scalar_" + in->name + " = napkin::to_f(a." + in->name + "[0]);");
}

std::string Context::value(const Expr& e, const NodeOverride& over, const std::vector<std::string>& inl) {
  if (over)
    if (auto s = over(e)) return *s;
  switch (e.kind) {
    case Expr::Kind::number: return flit(e.number.value);
    case Expr::Kind::ref: {
      if (!d_.array_axes(e.name)) return "static_cast<float>(N_" + e.name + ")";
      if (std::find(inl.begin(), inl.end(), e.name) != inl.end()) {
        const Statement* s = d_.find_statement(e.name);
        std::string v = value(*s->expr, over, inl);
        if (s->dtype && !opt_.reference) v = "napkin::round_to<" + ctype(*s->dtype) + ">(" + v + ")";
        return v;
      }
      return load(e.name);
    }
    case Expr::Kind::apply: break;
  }
  auto v = [&](std::size_t i) { return value(*e.args.at(i), over, inl); };
  switch (e.op) {
    case Op::neg: return "(-" + v(0) + ")";
    case Op::exp: return "expf(" + v(0) + ")";
    case Op::log: return "logf(" + v(0) + ")";
    case Op::relu: return "napkin::relu(" + v(0) + ")";
    case Op::gelu: return (opt_.reference ? "napkin::gelu_precise(" : "napkin::gelu(") + v(0) + ")";
    case Op::gelu_tanh: return (opt_.reference ? "napkin::gelu_tanh_precise(" : "napkin::gelu_tanh(") + v(0) + ")";
    case Op::silu: return "napkin::silu(" + v(0) + ")";
    case Op::sigmoid: return "napkin::sigmoid(" + v(0) + ")";
    case Op::tanh: return "tanhf(" + v(0) + ")";
    case Op::rsqrt: return "rsqrtf(" + v(0) + ")";
    case Op::sqrt: return "sqrtf(" + v(0) + ")";
    case Op::add: return "(" + v(0) + " + " + v(1) + ")";
    case Op::sub: return "(" + v(0) + " - " + v(1) + ")";
    case Op::mul: return "(" + v(0) + " * " + v(1) + ")";
    case Op::div: return "(" + v(0) + " / " + v(1) + ")";
    case Op::cast: return "napkin::round_to<" + ctype(*e.dtype) + ">(" + v(0) + ")";
    case Op::mask: return "(" + v(1) + " != 0.0f ? " + v(0) + " : -INFINITY)";
    case Op::abs: return "fabsf(" + v(0) + ")";
    case Op::step: return "napkin::step(" + v(0) + ")";
    case Op::erf: return "erff(" + v(0) + ")";
    case Op::pow: return "powf(" + v(0) + ", " + v(1) + ")";
    case Op::minimum: return "fminf(" + v(0) + ", " + v(1) + ")";
    case Op::maximum: return "fmaxf(" + v(0) + ", " + v(1) + ")";
    case Op::pos: return "static_cast<float>(i_" + e.axes[0] + ")";
    // The target compared as fp32: exact for indices below 2^24 (run_all refuses a larger N_v, unit.cpp).
    case Op::pick: return "(static_cast<float>(i_" + e.axes[0] + ") == " + v(1) + " ? " + v(0) + " : 0.0f)";
    case Op::causal: case Op::band: {
      const MaskBand keep = mask_band(e);
      if (!keep.lo && keep.hi == 0) return "(i_" + e.axes[1] + " <= i_" + e.axes[0] + " ? 1.0f : 0.0f)";
      return band_value(e, "(i_" + e.axes[1] + " - i_" + e.axes[0] + ")");
    }
    case Op::contract: case Op::sum: case Op::max: case Op::mean: return reduction(e, over, inl);
    case Op::softmax: case Op::layernorm: case Op::rmsnorm: return normaliser(e, over, inl);
    default: break;
  }
  NAPKIN_ASSERT(false) << "the CUDA emitter has no value for " << op_name(e.op) << " here";
  return {};
}

std::string Context::reduction(const Expr& e, const NodeOverride& over, const std::vector<std::string>& inl) {
  std::string term;
  for (const auto& a : e.args) term += (term.empty() ? "" : " * ") + value(*a, over, inl);
  if (term.empty()) term = "1.0f";
  std::string s = "([&]() -> float { float acc = " + std::string(e.op == Op::max ? "-INFINITY" : "0.0f") + "; ";
  for (const auto& x : e.axes) {
    // a band mask among the factors: only the steps inside it (lower/loop_band.hpp)
    const auto band = loop_band(e, x);
    const std::string o = band ? "i_" + band->outer : std::string();
    const std::string lo = band && band->lo ? "(" + o + " + int64_t{" + std::to_string(*band->lo) + "})" : "";
    const std::string hi = band && band->hi ? "(" + o + " + int64_t{" + std::to_string(*band->hi + 1) + "})" : "";
    const std::string begin = lo.empty() ? "0" : "(" + lo + " > 0 ? " + lo + " : int64_t{0})";
    const std::string end = hi.empty() ? "N_" + x : "(" + hi + " < N_" + x + " ? " + hi + " : N_" + x + ")";
    s += "for (int64_t i_" + x + " = " + begin + "; i_" + x + " < " + end + "; ++i_" + x + ") ";
  }
  s += e.op == Op::max ? "acc = fmaxf(acc, " + term + "); " : "acc += " + term + "; ";
  std::string count = "1.0f";
  for (const auto& x : e.axes) count += " * static_cast<float>(N_" + x + ")";
  s += e.op == Op::mean ? "return acc / (" + count + "); }())" : "return acc; }())";
  return s;
}

std::string Context::normaliser(const Expr& e, const NodeOverride& over, const std::vector<std::string>& inl) {
  const std::string& ax = e.axes[0];
  std::string xf = "x" + std::to_string(lambdas_++);
  std::string s = "([&]() -> float { auto " + xf + " = [&](int64_t i_" + ax + ") -> float { return " + value(*e.args[0], over, inl) +
                  "; }; ";
  std::string loop = "for (int64_t j = 0; j < N_" + ax + "; ++j) ";
  if (e.op == Op::softmax) {
    s += "float m = -INFINITY, l = 0.0f; " + loop + "m = fmaxf(m, " + xf + "(j)); ";
    // A row masked throughout (max -inf) is NaN, as exp(-inf - -inf) gives in the fp64 evaluator
    // (docs/diagram-language.md); returned early, so that no expf(-inf - -inf) is evaluated.
    s += "if (m == -INFINITY) return " + std::string(kNanF) + "; " + loop + "l += expf(" + xf + "(j) - m); ";
    s += "return expf(" + xf + "(i_" + ax + ") - m) / l; }())";
    return s;
  }
  std::string n = "static_cast<float>(N_" + ax + ")";
  if (e.op == Op::layernorm) {
    s += "float mu = 0.0f, var = 0.0f; " + loop + "mu += " + xf + "(j); mu /= " + n + "; ";
    s += loop + "var += (" + xf + "(j) - mu) * (" + xf + "(j) - mu); var /= " + n + "; ";
    s += "float y = (" + xf + "(i_" + ax + ") - mu) * rsqrtf(var + " + flit(eps_of(e)) + ")";
  } else {
    s += "float var = 0.0f; " + loop + "var += " + xf + "(j) * " + xf + "(j); var /= " + n + "; ";
    s += "float y = " + xf + "(i_" + ax + ") * rsqrtf(var + " + flit(eps_of(e)) + ")";
  }
  if (e.args.size() > 1) s += " * " + value(*e.args[1], over, inl);
  if (e.args.size() > 2) s += " + " + value(*e.args[2], over, inl);
  return s + "; return y; }())";
}

std::string band_value(const Expr& mask, const std::string& diff) {
  const MaskBand keep = mask_band(mask);
  std::string test = diff + " <= " + std::to_string(keep.hi);
  if (keep.lo) test += " && " + diff + " >= " + std::to_string(*keep.lo);
  return "(" + test + " ? 1.0f : 0.0f)";
}

}  // namespace napkin::cuda
