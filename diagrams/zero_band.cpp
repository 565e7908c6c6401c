// Zero bands of a diagram's arrays (contract in zero_band.hpp).
#include "diagrams/zero_band.hpp"

#include <algorithm>

#include "diagrams/graph_view.hpp"

namespace napkin {

namespace {

std::optional<ZeroBand> of_mask(const Expr& m) {
  if (m.kind != Expr::Kind::apply || (m.op != Op::causal && m.op != Op::band) || m.axes.size() != 2) return std::nullopt;
  const MaskBand keep = mask_band(m);
  return ZeroBand{m.axes[0], m.axes[1], keep.lo, keep.hi};
}

/** The intersection of two bands where both are on the same two axes, else `x`. */
ZeroBand intersect(const ZeroBand& x, ZeroBand y) {
  y = oriented(y, x.a);
  if (y.a != x.a || y.b != x.b) return x;
  ZeroBand r = x;
  if (y.lo) r.lo = r.lo ? std::max(*r.lo, *y.lo) : *y.lo;
  if (y.hi) r.hi = r.hi ? std::min(*r.hi, *y.hi) : *y.hi;
  return r;
}

std::optional<ZeroBand> band_of(const Diagram& d, const Expr& e, int depth) {
  if (depth > 1000) return std::nullopt;  // a verified diagram is acyclic; this only bounds the walk
  if (e.kind == Expr::Kind::ref) {
    if (const Statement* s = d.find_statement(e.name)) return band_of(d, *s->expr, depth + 1);
    for (const auto* in : d.inputs())
      if (in->name == e.name) return in->zero_band;
    return std::nullopt;
  }
  if (e.kind != Expr::Kind::apply) return std::nullopt;
  switch (e.op) {
    case Op::causal: case Op::band: return of_mask(e);
    case Op::neg: case Op::cast: return band_of(d, *e.args[0], depth + 1);
    case Op::mul: {
      auto x = band_of(d, *e.args[0], depth + 1), y = band_of(d, *e.args[1], depth + 1);
      if (x && y) return intersect(*x, *y);
      return x ? x : y;
    }
    case Op::exp: {
      const Expr& arg = *e.args[0];
      if (arg.kind != Expr::Kind::apply || arg.op != Op::sub) return std::nullopt;
      const Expr &m = *arg.args[0], &r = *arg.args[1];
      if (m.kind != Expr::Kind::apply || m.op != Op::mask || m.args.size() != 2 || has_mask(r)) return std::nullopt;
      return of_mask(*m.args[1]);
    }
    default: return std::nullopt;
  }
}

}  // namespace

bool has_mask(const Expr& e) {
  bool found = false;
  walk(e, [&](const Expr& n) { found |= n.kind == Expr::Kind::apply && (n.op == Op::mask || n.op == Op::causal || n.op == Op::band); });
  return found;
}

ZeroBand oriented(const ZeroBand& z, const std::string& a) {
  if (z.a == a) return z;
  ZeroBand r{z.b, z.a, std::nullopt, std::nullopt};
  if (z.hi) r.lo = -*z.hi;
  if (z.lo) r.hi = -*z.lo;
  return r;
}

std::optional<ZeroBand> zero_band(const Diagram& d, const std::string& array) { return band_of(d, *make_ref(array, d.loc), 0); }

std::pair<std::int64_t, std::int64_t> band_range(const ZeroBand& z, const std::string& a, std::int64_t first, std::int64_t last, std::int64_t extent) {
  const ZeroBand o = oriented(z, a);  // index(b) - index(a) in [lo, hi]
  std::int64_t begin = 0, end = extent;
  if (o.lo) begin = std::max<std::int64_t>(0, first + *o.lo);
  if (o.hi) end = std::min<std::int64_t>(extent, last + *o.hi + 1);
  return {begin, end};
}

}  // namespace napkin
