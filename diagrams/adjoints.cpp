// The adjoint rules of reverse mode (contract and sources: adjoints.hpp).
#include "diagrams/adjoints.hpp"

#include <charconv>
#include <cmath>

#include "diagrams/diagnostics.hpp"

namespace napkin::grad {

namespace {

bool is_number(const Term& t, double v) { return t.e->kind == Expr::Kind::number && t.e->number.value == v; }

AxisList minus(const AxisList& l, const AxisList& drop) {
  AxisList out;
  for (const auto& a : l)
    if (!contains(drop, a)) out.push_back(a);
  return out;
}

AxisList intersect(const AxisList& l, const AxisList& keep) {
  AxisList out;
  for (const auto& a : l)
    if (contains(keep, a)) out.push_back(a);
  return out;
}

Term reduction(Op op, const Term& x, const AxisList& axes) {
  auto n = std::make_shared<Expr>();
  n->kind = Expr::Kind::apply;
  n->op = op;
  n->args = {x.e};
  n->axes = axes;
  n->axis_locs.assign(axes.size(), SourceLoc{});
  return {ExprPtr{std::move(n)}, minus(x.axes, axes)};
}

/** The value of a pow exponent: a number or the negation of one (typing.cpp's rule). */
double exponent(const Expr& p) {
  if (p.kind == Expr::Kind::number) return p.number.value;
  NAPKIN_ASSERT(p.kind == Expr::Kind::apply && p.op == Op::neg && p.args[0]->kind == Expr::Kind::number) << "pow exponent";
  return -p.args[0]->number.value;
}

/** The number `v` as a Term the parser would read back: negative values as neg(number). */
Term signed_number(double v) { return v < 0 ? neg(number(-v)) : number(v); }

/** Indicator of the mask M != 0: causal and band are 0 or 1 already; an array through step(abs(M)). */
Term indicator(const Expr& m, const RuleContext& ctx) {
  Term v = ctx.value(m);
  if (m.kind == Expr::Kind::apply && (m.op == Op::causal || m.op == Op::band)) return v;
  return unary(Op::step, unary(Op::abs, v));
}

std::optional<Term> elementwise_unary(const Expr& node, const RuleContext& ctx) {
  const Term& c = ctx.cot;
  const Expr& arg = *node.args[0];
  auto x = [&] { return ctx.value(arg); };
  auto y = [&] { return ctx.value(node); };
  auto mul = [](const Term& a, const Term& b) { return binary(Op::mul, a, b); };
  switch (node.op) {
    case Op::neg: return neg(c);
    case Op::cast: return c;
    case Op::step: return std::nullopt;
    case Op::exp: return mul(c, y());
    case Op::log: return binary(Op::div, c, x());
    case Op::relu: return mul(c, unary(Op::step, x()));
    case Op::abs: return mul(c, binary(Op::sub, unary(Op::step, x()), unary(Op::step, neg(x()))));
    case Op::sigmoid: return mul(c, mul(y(), binary(Op::sub, number(1), y())));
    case Op::tanh: return mul(c, binary(Op::sub, number(1), mul(y(), y())));
    case Op::sqrt: return mul(c, binary(Op::div, number(0.5), y()));
    case Op::rsqrt: return neg(mul(c, mul(number(0.5), mul(mul(y(), y()), y()))));
    case Op::erf: return mul(c, mul(number(1.1283791670955126), unary(Op::exp, neg(mul(x(), x())))));
    case Op::silu: {
      Term s = unary(Op::sigmoid, x());
      return mul(c, mul(s, binary(Op::add, number(1), mul(x(), binary(Op::sub, number(1), s)))));
    }
    case Op::gelu: {  // Phi(x) + x phi(x): 1/sqrt(2) and 1/sqrt(2 pi)
      Term cdf = mul(number(0.5), binary(Op::add, number(1), unary(Op::erf, mul(x(), number(0.7071067811865476)))));
      Term pdf = mul(unary(Op::exp, neg(mul(mul(number(0.5), x()), x()))), number(0.3989422804014327));
      return mul(c, binary(Op::add, cdf, mul(x(), pdf)));
    }
    case Op::gelu_tanh: {  // (1 + t)/2 + x/2 (1 - t^2) k (1 + 3 c x^2), t = tanh(k (x + c x^3))
      const double k = 0.7978845608028654, cubic = 0.044715;
      Term x2 = mul(x(), x());
      Term t = unary(Op::tanh, mul(number(k), binary(Op::add, x(), mul(number(cubic), mul(x2, x())))));
      Term slope = mul(number(0.5 * k), binary(Op::add, number(1), mul(number(3 * cubic), x2)));
      Term half_cdf = mul(number(0.5), binary(Op::add, number(1), t));
      return mul(c, binary(Op::add, half_cdf, mul(mul(x(), slope), binary(Op::sub, number(1), mul(t, t)))));
    }
    default: return std::nullopt;
  }
}

std::optional<Term> elementwise_binary(const Expr& node, std::size_t i, const RuleContext& ctx) {
  const Term& c = ctx.cot;
  const AxisList full = ctx.axes_of(node);
  const AxisList target = ctx.axes_of(*node.args[i]);
  auto a = [&] { return ctx.value(*node.args[0]); };
  auto b = [&] { return ctx.value(*node.args[1]); };
  auto mul = [](const Term& x, const Term& y) { return binary(Op::mul, x, y); };
  auto out = [&](const Term& t) { return unbroadcast(t, target, full); };
  switch (node.op) {
    case Op::add: return out(c);
    case Op::sub: return out(i == 0 ? c : neg(c));
    case Op::mul: return out(mul(c, i == 0 ? b() : a()));
    case Op::div:
      if (i == 0) return out(binary(Op::div, c, b()));
      return out(neg(binary(Op::div, mul(c, a()), mul(b(), b()))));
    case Op::minimum: case Op::maximum: {  // fmin(a, b) picks a unless b < a; fmax unless b > a
      Term d = node.op == Op::minimum ? binary(Op::sub, a(), b()) : binary(Op::sub, b(), a());
      Term b_picked = unary(Op::step, d);
      return out(mul(c, i == 0 ? binary(Op::sub, number(1), b_picked) : b_picked));
    }
    case Op::pow: {
      if (i == 1) return std::nullopt;
      const double p = exponent(*node.args[1]);
      if (p == 1) return c;
      Term power = p == 2 ? a() : binary(Op::pow, a(), signed_number(p - 1));
      return mul(c, mul(signed_number(p), power));
    }
    default: return std::nullopt;
  }
}

std::optional<Term> reductions(const Expr& node, std::size_t i, const RuleContext& ctx) {
  const Term& c = ctx.cot;
  switch (node.op) {
    case Op::sum: return c;
    case Op::mean: {
      Term count = axis_size(node.axes.front());
      for (std::size_t k = 1; k < node.axes.size(); ++k) count = binary(Op::mul, count, axis_size(node.axes[k]));
      return binary(Op::div, c, count);
    }
    case Op::max: {  // to every element equal to the max: 1 - step(max - X)
      Term x = ctx.value(*node.args[0]);
      return binary(Op::mul, c, binary(Op::sub, number(1), unary(Op::step, binary(Op::sub, ctx.value(node), x))));
    }
    case Op::logsumexp: {
      Term x = ctx.value(*node.args[0]);
      return binary(Op::mul, c, unary(Op::exp, binary(Op::sub, x, ctx.value(node))));
    }
    case Op::contract: {
      // The cotangent's scalar factors (c = core * s * ..) go outside: contract(core, ..) * s * ..
      Term core = c;
      std::vector<Term> factors;
      while (core.e->kind == Expr::Kind::apply && core.e->op == Op::mul) {
        if (ctx.scalar(*core.e->args[1])) factors.push_back({core.e->args[1], {}}), core = {core.e->args[0], core.axes};
        else if (ctx.scalar(*core.e->args[0])) factors.push_back({core.e->args[0], {}}), core = {core.e->args[1], core.axes};
        else break;
      }
      std::vector<Term> terms{core};
      AxisList all = core.axes;
      for (std::size_t j = 0; j < node.args.size(); ++j)
        if (j != i) {
          terms.push_back(ctx.value(*node.args[j]));
          all = axis_union({all, terms.back().axes});
        }
      Term out = contract_terms(terms, minus(all, ctx.axes_of(*node.args[i])));
      for (auto f = factors.rbegin(); f != factors.rend(); ++f) out = binary(Op::mul, out, *f);
      return out;
    }
    case Op::gather: case Op::pick: {
      if (i == 1) return std::nullopt;
      const Expr& t = *node.args[1];
      AxisList need = axis_union({ctx.axes_of(t), node.axes});
      auto n = std::make_shared<Expr>(node);
      n->op = Op::pick;
      n->args = {expand(c, need).e, ctx.value(t).e};
      return Term{ExprPtr{std::move(n)}, axis_union({c.axes, need})};
    }
    case Op::mask:
      if (i == 1) return std::nullopt;
      return binary(Op::mul, c, indicator(*node.args[1], ctx));
    default: return std::nullopt;
  }
}

std::optional<Term> normalisers(const Expr& node, std::size_t i, const RuleContext& ctx) {
  const Term& c = ctx.cot;
  const AxisList full = ctx.axes_of(node);
  const AxisList& a = node.axes;
  auto mul = [](const Term& x, const Term& y) { return binary(Op::mul, x, y); };
  auto sub = [](const Term& x, const Term& y) { return binary(Op::sub, x, y); };
  Term x = ctx.value(*node.args[0]);
  switch (node.op) {
    case Op::softmax: {
      Term p = ctx.value(node);
      return mul(p, sub(c, ctx.softmax_rowsum ? *ctx.softmax_rowsum : ctx.keep(sum_over(mul(c, p), a), "rowsum")));
    }
    case Op::l2norm: {
      double eps = 1e-12;
      for (const auto& b : node.bindings)
        if (b.key == "eps" && b.number) eps = b.number->value;
      Term r = ctx.keep(unary(Op::rsqrt, binary(Op::add, sum_over(mul(x, x), a), number(eps))), "rstd");
      return sub(mul(c, r), mul(mul(x, mul(mul(r, r), r)), ctx.keep(sum_over(mul(c, x), a), "rowsum")));
    }
    case Op::rmsnorm: case Op::layernorm: break;
    default: return std::nullopt;
  }
  NAPKIN_ASSERT(ctx.saved && ctx.saved->rstd) << op_name(node.op) << " without its saved statistics";
  const Term& r = *ctx.saved->rstd;
  const bool has_weight = node.args.size() > 1;
  Term g = has_weight ? mul(c, ctx.value(*node.args[1])) : c;
  if (node.op == Op::rmsnorm) {
    if (i == 1) return unbroadcast(mul(mul(c, x), r), ctx.axes_of(*node.args[1]), full);
    return sub(mul(r, g), mul(mul(x, mul(mul(r, r), r)), ctx.keep(mean_over(mul(g, x), a), "rowmean")));
  }
  NAPKIN_ASSERT(ctx.saved->mean) << "layernorm without its saved mean";
  Term xh = mul(sub(x, *ctx.saved->mean), r);
  if (i == 1) return unbroadcast(mul(c, xh), ctx.axes_of(*node.args[1]), full);
  if (i == 2) return unbroadcast(c, ctx.axes_of(*node.args[2]), full);
  return mul(r, sub(sub(g, ctx.keep(mean_over(g, a), "rowmean")), mul(xh, ctx.keep(mean_over(mul(g, xh), a), "rowmean"))));
}

}  // namespace

Term number(double v) {
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  NAPKIN_ASSERT(ec == std::errc{} && std::isfinite(v) && v >= 0) << "number " << v;
  return {make_number(Number{v, std::string(buf, p)}, {}), {}};
}

Term axis_size(const std::string& axis) { return {make_ref(axis, {}), {}}; }

Term ref(const std::string& name, const AxisList& axes) { return {make_ref(name, {}), axes}; }

Term unary(Op op, const Term& x) { return {make_apply(op, {x.e}, {}), x.axes}; }

Term neg(const Term& x) {
  if (x.e->kind == Expr::Kind::apply && x.e->op == Op::neg) return {x.e->args[0], x.axes};
  return unary(Op::neg, x);
}

Term binary(Op op, const Term& a, const Term& b) {
  if (op == Op::mul && is_number(a, 1)) return b;
  if ((op == Op::mul || op == Op::div) && is_number(b, 1)) return a;
  return {make_apply(op, {a.e, b.e}, {}), axis_union({a.axes, b.axes})};
}

Term sum_over(const Term& x, const AxisList& axes) {
  const AxisList have = intersect(axes, x.axes);
  Term out = have.empty() ? x : reduction(Op::sum, x, have);
  for (const auto& a : axes)
    if (!contains(x.axes, a)) out = binary(Op::mul, out, axis_size(a));
  return out;
}

Term mean_over(const Term& x, const AxisList& axes) {
  const AxisList have = intersect(axes, x.axes);
  return have.empty() ? x : reduction(Op::mean, x, have);
}

Term contract_terms(const std::vector<Term>& terms, const AxisList& reduced) {
  AxisList all;
  for (const auto& t : terms) all = axis_union({all, t.axes});
  const AxisList r = intersect(reduced, all);
  if (terms.size() == 1 && r.empty()) return terms.front();
  auto n = std::make_shared<Expr>();
  n->kind = Expr::Kind::apply;
  n->op = Op::contract;
  for (const auto& t : terms) n->args.push_back(t.e);
  n->axes = r;
  n->axis_locs.assign(r.size(), SourceLoc{});
  return {ExprPtr{std::move(n)}, minus(all, r)};
}

Term expand(const Term& x, const AxisList& need) {
  Term out = x;
  for (const auto& a : need)
    if (!contains(out.axes, a)) {
      auto p = std::make_shared<Expr>();
      p->kind = Expr::Kind::apply;
      p->op = Op::pos;
      p->axes = {a};
      p->axis_locs = {SourceLoc{}};
      out = binary(Op::add, out, binary(Op::mul, number(0), Term{ExprPtr{std::move(p)}, {a}}));
    }
  return out;
}

Term unbroadcast(const Term& c, const AxisList& target, const AxisList& full) {
  return sum_over(c, minus(axis_union({full, c.axes}), target));
}

std::optional<Term> operand_cotangent(const Expr& node, std::size_t i, const RuleContext& ctx) {
  NAPKIN_ASSERT(node.kind == Expr::Kind::apply && i < node.args.size()) << "operand_cotangent of a leaf";
  switch (node.op) {
    case Op::neg: case Op::exp: case Op::log: case Op::relu: case Op::gelu: case Op::gelu_tanh: case Op::silu:
    case Op::sigmoid: case Op::tanh: case Op::rsqrt: case Op::sqrt: case Op::abs: case Op::step: case Op::erf: case Op::cast:
      return elementwise_unary(node, ctx);
    case Op::add: case Op::sub: case Op::mul: case Op::div: case Op::minimum: case Op::maximum: case Op::pow:
      return elementwise_binary(node, i, ctx);
    case Op::sum: case Op::mean: case Op::max: case Op::logsumexp: case Op::contract: case Op::gather: case Op::pick:
    case Op::mask:
      return reductions(node, i, ctx);
    case Op::softmax: case Op::layernorm: case Op::rmsnorm: case Op::l2norm:
      return normalisers(node, i, ctx);
    case Op::causal: case Op::band: case Op::pos: return std::nullopt;
    case Op::call: break;
  }
  NAPKIN_ASSERT(false) << "no adjoint rule for '" << op_name(node.op) << "' (calls are inlined before differentiating)";
  return std::nullopt;
}

bool adjoint_reads_argument(Op op) {  // the cases of elementwise_unary that call x()
  switch (op) {
    case Op::log: case Op::relu: case Op::abs: case Op::erf: case Op::silu: case Op::gelu: case Op::gelu_tanh: return true;
    default: return false;
  }
}

}  // namespace napkin::grad
