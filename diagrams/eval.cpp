#include "diagrams/eval.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include "diagrams/graph_view.hpp"
#include "diagrams/typing.hpp"

namespace napkin {

namespace {

double op_sum(double a, double b) { return a + b; }
double op_max(double a, double b) { return std::fmax(a, b); }

SizeMap callee_sizes(const Program& p, const CallShape& s, const SizeMap& caller, SourceLoc at) {
  SizeMap bound;
  for (const auto& [callee_axis, caller_axis] : s.bind) bound[callee_axis] = caller.at(caller_axis);
  DiagnosticEngine diags;
  auto sizes = resolve_sizes(*s.callee, bound, diags, at);
  if (!sizes) throw UserError(diags.render());
  (void)p;
  return *sizes;
}

/** The call nodes of `e`, a call's arguments before the call, found without recursion. The
 *  evaluator and the estimate run each call from the statement's level, not from inside the
 *  expression's recursion: the stack then holds one expression's depth (at most 256, the parser's
 *  limit), not the sum of those of every enclosing call (up to kMaxCallDepth of them). */
std::vector<const Expr*> calls_innermost_first(const Expr& e) {
  std::vector<const Expr*> out;
  std::vector<std::pair<const Expr*, bool>> stack{{&e, false}};
  while (!stack.empty()) {
    auto [n, expanded] = stack.back();
    stack.pop_back();
    if (expanded) {
      if (n->kind == Expr::Kind::apply && n->op == Op::call) out.push_back(n);
      continue;
    }
    stack.push_back({n, true});
    for (auto it = n->args.rbegin(); it != n->args.rend(); ++it) stack.push_back({&**it, false});
  }
  return out;
}

/** Work of a callee at given sizes, by callee name and sizes: a diagram called from many places at
 *  the same sizes is estimated once (calls sharing callees would otherwise multiply). */
using WorkMemo = std::map<std::pair<std::string, SizeMap>, double>;

double option(const Expr& e, const std::string& key, double fallback) {
  for (const auto& b : e.bindings)
    if (b.key == key && b.number) return b.number->value;
  return fallback;
}

// ------------------------------------------------------------------ work estimate
class Estimator {
 public:
  Estimator(const Program& p, const Diagram& d, const SizeMap& s, WorkMemo& memo)
      : p_(p), d_(d), sizes_(s), typer_(d, p.diagrams, nullptr), memo_(memo) {}

  /** Work of every statement, plus one operation per element of each input made and of each
   *  statement stored: a diagram that only copies a large input is not free to evaluate. */
  double statements() {
    double w = 0;
    for (const auto* in : d_.inputs()) w += elements(in->axes);
    for (const auto* s : d_.statements()) {
      check_elements(s->axes, s->name);
      for (const Expr* c : calls_innermost_first(*s->expr)) call_work_[c] = call(*c);
      w += expr(*s->expr) + elements(s->axes);
    }
    return w;
  }

 private:
  double call(const Expr& e) {
    std::vector<AxisList> args;
    for (const auto& a : e.args) args.push_back(*typer_.axes_of(*a));
    auto shape = *typer_.call_shape(e, args);
    SizeMap inner = callee_sizes(p_, shape, sizes_, e.loc);
    auto key = std::make_pair(shape.callee->name, inner);
    auto it = memo_.find(key);
    if (it == memo_.end()) it = memo_.emplace(key, Estimator(p_, *shape.callee, inner, memo_).statements()).first;
    return elements(shape.woven) * it->second;
  }
  double elements(const AxisList& axes) {
    double n = 1;
    for (const auto& a : axes) n *= static_cast<double>(sizes_.at(a));
    return n;
  }
  void check_elements(const AxisList& axes, const std::string& what) {
    if (elements(axes) > static_cast<double>(kMaxEvalElements))
      throw UserError("array '" + what + "' of diagram '" + d_.name + "' would hold " +
                      std::to_string(static_cast<long long>(elements(axes))) +
                      " elements; the fp64 reference evaluator holds at most 2^28; shrink axes with --set");
  }
  double expr(const Expr& e) {
    if (e.kind != Expr::Kind::apply) return 0;
    double w = 0;
    std::vector<AxisList> args;
    for (const auto& a : e.args) {
      w += expr(*a);
      args.push_back(*typer_.axes_of(*a));
    }
    AxisList out = *typer_.axes_of(e);
    check_elements(out, std::string(e.op == Op::call ? e.callee : op_name(e.op)) + "(...)");  // intermediates too
    if (e.op == Op::contract) return w + elements(axis_union(args)) * static_cast<double>(e.args.size());
    if (e.op == Op::call) return w + call_work_.at(&e);
    return w + 4 * elements(out) + (args.empty() ? 0 : elements(args[0]));
  }

  const Program& p_;
  const Diagram& d_;
  const SizeMap& sizes_;
  Typer typer_;
  WorkMemo& memo_;
  std::map<const Expr*, double> call_work_;  ///< the current statement's calls, computed first
};

// ------------------------------------------------------------------ evaluation
class Evaluator {
 public:
  Evaluator(const Program& p, const Diagram& d, const SizeMap& s) : p_(p), d_(d), sizes_(s), typer_(d, p.diagrams, nullptr) {}

  std::map<std::string, Tensor> run(const std::map<std::string, Tensor>& inputs) {
    for (const auto* in : d_.inputs()) env_[in->name] = inputs.at(in->name);
    NamedGraph g = dataflow_graph(d_);
    auto order = g.topological_order();
    NAPKIN_ASSERT(order) << "evaluating a cyclic diagram";
    for (auto v : *order) {
      const Statement* s = d_.find_statement(g.names()[v]);
      if (!s) continue;  // an input
      called_.clear();
      for (const Expr* c : calls_innermost_first(*s->expr)) called_[c] = call(*c);
      Tensor t = permute(eval(*s->expr), s->axes);
      if (s->dtype) t = map1(t, [dt = *s->dtype](double x) { return round_to_dtype(x, dt); });
      env_[s->name] = std::move(t);
    }
    std::map<std::string, Tensor> out;
    for (const auto* o : d_.outputs()) out[o->name] = env_.at(o->name);
    return out;
  }

 private:
  Tensor eval(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::number: return Tensor::scalar(e.number.value);
      case Expr::Kind::ref:
        if (auto it = env_.find(e.name); it != env_.end()) return it->second;
        return Tensor::scalar(static_cast<double>(sizes_.at(e.name)));
      case Expr::Kind::apply: break;
    }
    std::vector<Tensor> a;
    if (e.op != Op::call)
      for (const auto& x : e.args) a.push_back(eval(*x));
    switch (e.op) {
      case Op::neg: return map1(a[0], [](double x) { return -x; });
      case Op::exp: return map1(a[0], [](double x) { return std::exp(x); });
      case Op::log: return map1(a[0], [](double x) { return std::log(x); });
      case Op::relu: return map1(a[0], [](double x) { return x > 0 ? x : 0.0; });
      case Op::gelu: return map1(a[0], [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); });
      case Op::gelu_tanh:
        return map1(a[0], [](double x) { return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); });
      case Op::silu: return map1(a[0], [](double x) { return x / (1 + std::exp(-x)); });
      case Op::sigmoid: return map1(a[0], [](double x) { return 1 / (1 + std::exp(-x)); });
      case Op::tanh: return map1(a[0], [](double x) { return std::tanh(x); });
      case Op::rsqrt: return map1(a[0], [](double x) { return 1 / std::sqrt(x); });
      case Op::sqrt: return map1(a[0], [](double x) { return std::sqrt(x); });
      case Op::abs: return map1(a[0], [](double x) { return std::fabs(x); });
      case Op::step: return map1(a[0], [](double x) { return std::isnan(x) ? x : x > 0 ? 1.0 : 0.0; });
      case Op::erf: return map1(a[0], [](double x) { return std::erf(x); });
      case Op::pow: return map2(a[0], a[1], [](double x, double p) { return std::pow(x, p); });
      case Op::minimum: return map2(a[0], a[1], [](double x, double y) { return std::fmin(x, y); });
      case Op::maximum: return map2(a[0], a[1], [](double x, double y) { return std::fmax(x, y); });
      case Op::add: return map2(a[0], a[1], [](double x, double y) { return x + y; });
      case Op::sub: return map2(a[0], a[1], [](double x, double y) { return x - y; });
      case Op::mul: return map2(a[0], a[1], [](double x, double y) { return x * y; });
      case Op::div: return map2(a[0], a[1], [](double x, double y) { return x / y; });
      case Op::cast: return map1(a[0], [dt = *e.dtype](double x) { return round_to_dtype(x, dt); });
      case Op::contract: {
        std::vector<const Tensor*> ops;
        for (const auto& t : a) ops.push_back(&t);
        return contract(ops, e.axes);
      }
      case Op::sum: return reduce(a[0], e.axes, 0.0, op_sum);
      case Op::max: return reduce(a[0], e.axes, -std::numeric_limits<double>::infinity(), op_max);
      case Op::mean: return mean(a[0], e.axes);
      case Op::softmax: {
        Tensor m = reduce(a[0], e.axes, -std::numeric_limits<double>::infinity(), op_max);
        Tensor ex = map2(a[0], m, [](double x, double mx) { return std::isinf(mx) ? 0.0 : std::exp(x - mx); });
        Tensor s = reduce(ex, e.axes, 0.0, op_sum);
        return map2(ex, s, [](double x, double sum) { return x / sum; });
      }
      case Op::layernorm: case Op::rmsnorm: return norm(e, a);
      case Op::logsumexp: {  // max + log(sum(exp(X - max))): NaN where every entry is -inf, as softmax
        Tensor m = reduce(a[0], e.axes, -std::numeric_limits<double>::infinity(), op_max);
        Tensor s = reduce(map2(a[0], m, [](double x, double mx) { return std::exp(x - mx); }), e.axes, 0.0, op_sum);
        return map2(m, s, [](double mx, double sum) { return mx + std::log(sum); });
      }
      case Op::l2norm: {
        const double eps = option(e, "eps", 1e-12);
        Tensor ss = reduce(map1(a[0], [](double x) { return x * x; }), e.axes, 0.0, op_sum);
        return permute(map2(a[0], ss, [eps](double x, double s) { return x / std::sqrt(s + eps); }), a[0].axes);
      }
      case Op::mask: return map2(a[0], a[1], [](double x, double m) { return m != 0 ? x : -std::numeric_limits<double>::infinity(); });
      case Op::causal: case Op::band: {
        Tensor t = Tensor::filled(e.axes, sizes_);
        const std::int64_t nx = t.shape[1];
        const MaskBand keep = mask_band(e);
        for (std::size_t i = 0; i < t.data.size(); ++i) {
          auto q = static_cast<std::int64_t>(i) / nx, x = static_cast<std::int64_t>(i) % nx;
          t.data[i] = x - q <= keep.hi && (!keep.lo || x - q >= *keep.lo) ? 1.0 : 0.0;
        }
        return t;
      }
      case Op::pick: return pick(e, a[0], a[1]);
      case Op::gather: return reduce(pick(e, a[0], a[1]), e.axes, 0.0, op_sum);  // one value and zeros: exact
      case Op::pos: {
        Tensor t = Tensor::filled(e.axes, sizes_);
        for (std::size_t i = 0; i < t.data.size(); ++i) t.data[i] = static_cast<double>(i);
        return t;
      }
      case Op::call: return called_.at(&e);
    }
    NAPKIN_ASSERT(false) << "unhandled operation " << op_name(e.op);
    return {};
  }

  /** pick(L, T; v): L where index(v) == T, 0 elsewhere (a select: an infinite L off the target
   *  stays out). Raises a located UserError at `e` for a target that is not an integer in
   *  [0, N_v), with the first such entry's index and value. */
  Tensor pick(const Expr& e, const Tensor& l, const Tensor& t) {
    const std::string& v = e.axes[0];
    const std::int64_t n = sizes_.at(v);
    for (std::int64_t i = 0; i < t.size(); ++i) {
      const double x = t.data[static_cast<std::size_t>(i)];
      if (x >= 0 && x < static_cast<double>(n) && x == std::floor(x)) continue;
      std::string at;
      for (std::size_t k = t.axes.size(), rest = static_cast<std::size_t>(i); k-- > 0; rest /= static_cast<std::size_t>(t.shape[k]))
        at = t.axes[k] + "=" + std::to_string(rest % static_cast<std::size_t>(t.shape[k])) + (at.empty() ? "" : ", ") + at;
      char value[40];
      std::snprintf(value, sizeof value, "%.17g", x);
      DiagnosticEngine diags;
      diags.error(e.loc, "target " + std::string(value) + (at.empty() ? "" : " at " + at) + " of '" + std::string(op_name(e.op)) +
                             "' is not an index along '" + v + "' (0 to " + std::to_string(n - 1) + ")");
      throw UserError(diags.render());
    }
    Tensor out = Tensor::filled(l.axes, sizes_);
    std::vector<std::int64_t> t_stride;
    for (const auto& ax : l.axes) t_stride.push_back(t.stride_of(ax));
    const auto v_at = static_cast<std::size_t>(std::find(l.axes.begin(), l.axes.end(), v) - l.axes.begin());
    std::vector<std::int64_t> idx(l.axes.size(), 0);
    for (std::size_t i = 0; i < l.data.size(); ++i) {
      std::int64_t ti = 0;
      for (std::size_t k = 0; k < idx.size(); ++k) ti += idx[k] * t_stride[k];
      if (static_cast<double>(idx[v_at]) == t.data[static_cast<std::size_t>(ti)]) out.data[i] = l.data[i];
      for (std::size_t k = idx.size(); k-- > 0;) {  // next row-major index
        if (++idx[k] < l.shape[k]) break;
        idx[k] = 0;
      }
    }
    return out;
  }

  Tensor mean(const Tensor& x, const AxisList& axes) {
    double n = static_cast<double>(product(x.sizes(), axes));
    return map1(reduce(x, axes, 0.0, op_sum), [n](double v) { return v / n; });
  }

  Tensor norm(const Expr& e, const std::vector<Tensor>& a) {
    double eps = option(e, "eps", 1e-5);
    Tensor y;
    if (e.op == Op::layernorm) {
      Tensor mu = mean(a[0], e.axes);
      Tensor centred = map2(a[0], mu, [](double x, double m) { return x - m; });
      Tensor var = mean(map1(centred, [](double x) { return x * x; }), e.axes);
      y = map2(centred, var, [eps](double c, double v) { return c / std::sqrt(v + eps); });
    } else {
      Tensor ms = mean(map1(a[0], [](double x) { return x * x; }), e.axes);
      y = map2(a[0], ms, [eps](double x, double m) { return x / std::sqrt(m + eps); });
    }
    if (a.size() > 1) y = map2(y, a[1], [](double x, double w) { return x * w; });
    if (a.size() > 2) y = map2(y, a[2], [](double x, double b) { return x + b; });
    return permute(y, a[0].axes);
  }

  Tensor call(const Expr& e) {
    std::vector<Tensor> args;
    std::vector<AxisList> arg_axes;
    for (const auto& x : e.args) {
      args.push_back(eval(*x));
      arg_axes.push_back(args.back().axes);
    }
    CallShape shape = *typer_.call_shape(e, arg_axes);
    SizeMap inner = callee_sizes(p_, shape, sizes_, e.loc);
    auto formals = shape.callee->inputs();
    Tensor result = Tensor::filled(shape.result, sizes_);
    Tensor woven = Tensor::filled(shape.woven, sizes_);
    std::vector<std::pair<std::string, std::int64_t>> at(shape.woven.size());
    for (std::int64_t w = 0; w < woven.size(); ++w) {
      std::int64_t rest = w;
      for (std::size_t i = shape.woven.size(); i-- > 0;) {
        at[i] = {shape.woven[i], rest % woven.shape[i]};
        rest /= woven.shape[i];
      }
      std::map<std::string, Tensor> inputs;
      for (std::size_t i = 0; i < formals.size(); ++i) {
        std::vector<std::pair<std::string, std::int64_t>> mine;
        for (const auto& f : at)
          if (contains(args[i].axes, f.first)) mine.push_back(f);
        AxisList caller_order;
        for (const auto& a : formals[i]->axes) caller_order.push_back(shape.bind.at(a));
        Tensor t = permute(slice(args[i], mine), caller_order);
        t.axes = formals[i]->axes;  // rename caller axes to the callee's
        inputs[formals[i]->name] = std::move(t);
      }
      Tensor out = std::move(Evaluator(p_, *shape.callee, inner).run(inputs).begin()->second);
      for (auto& a : out.axes) a = shape.bind.at(a);
      place(result, out, at);
    }
    return result;
  }

  const Program& p_;
  const Diagram& d_;
  const SizeMap& sizes_;
  Typer typer_;
  std::map<std::string, Tensor> env_;
  std::map<const Expr*, Tensor> called_;  ///< the current statement's calls, evaluated first
};

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

double estimate_work(const Program& p, const Diagram& d, const SizeMap& sizes) {
  WorkMemo memo;
  return Estimator(p, d, sizes, memo).statements();
}

Tensor random_input(const InputDecl& in, const SizeMap& sizes, std::uint64_t seed, std::optional<std::int64_t> index_bound) {
  Tensor t = Tensor::filled(in.axes, sizes);
  std::mt19937_64 gen(seed ^ fnv1a(in.name));
  auto uniform = [&] { return (static_cast<double>(gen() >> 11) + 0.5) * 0x1.0p-53; };  // (0, 1)
  const bool integer = is_integer_dtype(in.dtype);
  const double hi = in.dtype == DType::int8 ? 128 : in.dtype == DType::int4 ? 8 : 2147483648.0;
  for (std::size_t i = 0; i < t.data.size(); ++i) {
    double v;
    if (integer && index_bound) {
      v = std::floor(uniform() * static_cast<double>(*index_bound));
    } else if (integer) {
      v = std::floor(uniform() * 2 * hi) - hi;
    } else {
      double u1 = uniform(), u2 = uniform();
      v = std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
    }
    t.data[i] = round_to_dtype(v, in.dtype);
  }
  return t;
}

std::map<std::string, std::int64_t> target_bounds(const Diagram& d, const SizeMap& sizes) {
  std::map<std::string, std::int64_t> out;
  for (const auto* s : d.statements())
    walk(*s->expr, [&](const Expr& n) {
      if (n.kind != Expr::Kind::apply || (n.op != Op::gather && n.op != Op::pick) || n.args.size() != 2 || n.axes.size() != 1) return;
      const Expr& t = *n.args[1];
      auto size = sizes.find(n.axes[0]);
      if (t.kind != Expr::Kind::ref || !d.find_input(t.name) || size == sizes.end()) return;
      auto [it, fresh] = out.emplace(t.name, size->second);
      if (!fresh) it->second = std::min(it->second, size->second);
    });
  return out;
}

void check_eval_limits(const Program& p, const Diagram& d, const SizeMap& sizes) {
  for (const auto* in : d.inputs())
    if (product(sizes, in->axes) > kMaxEvalElements)
      throw UserError("input '" + in->name + "' of diagram '" + d.name + "' would hold " +
                      std::to_string(product(sizes, in->axes)) +
                      " elements; the fp64 reference evaluator holds at most 2^28; shrink axes with --set");
  double work = estimate_work(p, d, sizes);
  if (work > kMaxEvalWork)
    throw UserError("evaluating diagram '" + d.name + "' at these sizes needs about " + std::to_string(work / 1e9).substr(0, 6) +
                    "e9 scalar operations; the fp64 reference evaluator is for small sizes (at most 4e9); shrink axes with --set");
}

std::map<std::string, Tensor> evaluate(const Program& p, const Diagram& d, const SizeMap& sizes,
                                       const std::map<std::string, Tensor>& inputs) {
  check_eval_limits(p, d, sizes);
  return Evaluator(p, d, sizes).run(inputs);
}

}  // namespace napkin
