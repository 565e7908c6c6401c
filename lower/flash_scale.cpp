// The softmax scale of a flash form folded into the exponent (contract: flash_scale.hpp).
#include "lower/flash_scale.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <utility>

namespace napkin {
namespace {

/** Bounds on log2 of a positive value. */
using Log2Range = std::pair<double, double>;

std::optional<Log2Range> log2_range(const Diagram& d, const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::number:
      if (!(e.number.value > 0) || !std::isfinite(e.number.value)) return std::nullopt;
      return Log2Range{std::log2(e.number.value), std::log2(e.number.value)};
    case Expr::Kind::ref:
      if (d.array_axes(e.name)) return std::nullopt;  // an array (or a statement): not uniform, or its sign unknown
      return Log2Range{0.0, 63.0};                     // an axis size, 1 to 2^63
    case Expr::Kind::apply: break;
  }
  std::vector<Log2Range> a;
  for (const auto& arg : e.args) {
    auto r = log2_range(d, *arg);
    if (!r) return std::nullopt;
    a.push_back(*r);
  }
  switch (e.op) {
    case Op::sqrt: return Log2Range{a[0].first / 2, a[0].second / 2};
    case Op::rsqrt: return Log2Range{-a[0].second / 2, -a[0].first / 2};
    case Op::mul: return Log2Range{a[0].first + a[1].first, a[0].second + a[1].second};
    case Op::div: return Log2Range{a[0].first - a[1].second, a[0].second - a[1].first};
    default: return std::nullopt;
  }
}

/** References to statement `name` in `e`, inlined statements of `inl` expanded. */
int count_refs(const Diagram& d, const Expr& e, const std::string& name, const std::vector<std::string>& inl) {
  int n = 0;
  if (e.kind == Expr::Kind::ref) {
    if (e.name == name) return 1;
    if (std::find(inl.begin(), inl.end(), e.name) != inl.end())
      if (const Statement* s = d.find_statement(e.name)) return count_refs(d, *s->expr, name, inl);
    return 0;
  }
  for (const auto& a : e.args) n += count_refs(d, *a, name, inl);
  return n;
}

/** Whether `e` is uniform and reads a scalar input: numbers, axis sizes and 0-d inputs under
 *  neg, sqrt, rsqrt, mul and div, with at least one 0-d input (its sign, and so the scale's, known
 *  only at run time). */
bool reads_scalar_input(const Diagram& d, const Expr& e, bool& reads) {
  switch (e.kind) {
    case Expr::Kind::number: return std::isfinite(e.number.value);
    case Expr::Kind::ref: {
      if (d.find_axis(e.name)) return true;
      const InputDecl* in = d.find_input(e.name);
      if (!in || !in->axes.empty()) return false;
      reads = true;
      return true;
    }
    case Expr::Kind::apply: break;
  }
  if (e.op != Op::neg && e.op != Op::sqrt && e.op != Op::rsqrt && e.op != Op::mul && e.op != Op::div) return false;
  return std::all_of(e.args.begin(), e.args.end(), [&](const auto& a) { return reads_scalar_input(d, *a, reads); });
}

bool runtime_uniform(const Diagram& d, const Expr& e) {
  bool reads = false;
  return reads_scalar_input(d, e, reads) && reads;
}

}  // namespace

bool positive_finite_uniform(const Diagram& d, const Expr& e) {
  const auto r = log2_range(d, e);
  return r && r->first >= -100 && r->second <= 100;
}

void find_flash_scale(const Diagram& d, FlashForm& f) {
  f.scaled = f.scale = nullptr;
  f.scale_divides = f.scale_sign_at_run_time = false;
  if (f.normaliser_lemma != "online-softmax" || !f.score) return;
  const Expr* e = f.score;
  bool through_mask = false;  // a mask's fill -inf times a scale of unknown sign is not the mask of the product
  for (int depth = 0; depth < 64; ++depth) {
    if (e->kind == Expr::Kind::ref) {  // a fused statement, read once in the whole score chain
      if (std::find(f.inlined.begin(), f.inlined.end(), e->name) == f.inlined.end()) return;
      if (count_refs(d, *f.score, e->name, f.inlined) != 1) return;
      const Statement* s = d.find_statement(e->name);
      if (!s) return;
      e = &*s->expr;
      continue;
    }
    if (e->kind != Expr::Kind::apply) return;
    if (e->op == Op::mask) {  // mask(c B, M) = c mask(B, M): the fill -inf times c > 0 is -inf
      e = &*e->args[0];
      through_mask = true;
      continue;
    }
    if (e->op == Op::mul || e->op == Op::div) {
      for (int i = e->op == Op::div ? 1 : 0; i < 2; ++i) {
        const bool positive = positive_finite_uniform(d, *e->args[i]);
        if (!positive && (through_mask || !runtime_uniform(d, *e->args[i]))) continue;
        f.scaled = e, f.scale = &*e->args[i], f.scale_divides = e->op == Op::div, f.scale_sign_at_run_time = !positive;
        return;
      }
    }
    return;
  }
}

}  // namespace napkin
