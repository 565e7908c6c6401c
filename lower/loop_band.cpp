// The band of a SIMT reduction loop (contract in loop_band.hpp).
#include "lower/loop_band.hpp"

#include <algorithm>
#include <vector>

namespace napkin {

namespace {

/** The factors of `e`'s product: `e` itself, or its multiplicands where it is a product. */
void factors(const Expr& e, std::vector<const Expr*>& out) {
  if (e.kind == Expr::Kind::apply && e.op == Op::mul) {
    for (const auto& a : e.args) factors(*a, out);
    return;
  }
  out.push_back(&e);
}

}  // namespace

std::optional<LoopBand> loop_band(const Expr& e, const std::string& axis) {
  if (e.kind != Expr::Kind::apply || !(e.op == Op::contract || e.op == Op::sum || e.op == Op::mean)) return std::nullopt;
  std::vector<const Expr*> fs;
  for (const auto& a : e.args) factors(*a, fs);
  for (const auto* f : fs) {
    if (f->kind != Expr::Kind::apply || !(f->op == Op::causal || f->op == Op::band) || f->axes.size() != 2) continue;
    const std::string& a = f->axes[0];
    const std::string& b = f->axes[1];
    const std::string other = axis == b ? a : b;
    if ((axis != a && axis != b) || a == b) continue;
    if (std::find(e.axes.begin(), e.axes.end(), other) != e.axes.end()) continue;  // both reduced here: no fixed index
    const MaskBand keep = mask_band(*f);
    LoopBand lb{axis, other, {}, {}};
    if (axis == b) {  // index(b) - index(a) in [lo, hi]
      lb.lo = keep.lo, lb.hi = keep.hi;
    } else {  // index(a) - index(b) in [-hi, -lo]
      lb.lo = -keep.hi;
      if (keep.lo) lb.hi = -*keep.lo;
    }
    return lb;
  }
  return std::nullopt;
}

namespace {

/** Sum of alpha + beta k over the integers k in [p, q] (0 where q < p). */
double linear_sum(double alpha, double beta, std::int64_t p, std::int64_t q) {
  if (q < p) return 0;
  const double n = static_cast<double>(q - p + 1);
  return n * alpha + beta * static_cast<double>(p + q) * n / 2;
}

}  // namespace

double loop_band_steps(const LoopBand& b, std::int64_t n_axis, std::int64_t n_outer) {
  if (n_outer <= 0 || n_axis <= 0) return 0;
  // The pairs (o, i), 0 <= o < n_outer, 0 <= i < n_axis, with lo <= i - o <= hi, counted along
  // the diagonals k = i - o: diagonal k holds min(n_outer, n_axis - k) - max(0, -k) pairs.
  const std::int64_t k0 = std::max<std::int64_t>(b.lo.value_or(-(n_outer - 1)), -(n_outer - 1));
  const std::int64_t k1 = std::min<std::int64_t>(b.hi.value_or(n_axis - 1), n_axis - 1);
  if (k1 < k0) return 0;
  const std::int64_t knee = n_axis - n_outer;  // min(...) is n_outer up to here, n_axis - k after
  const double first = linear_sum(static_cast<double>(n_outer), 0, k0, std::min(k1, knee)) +
                       linear_sum(static_cast<double>(n_axis), -1, std::max(k0, knee + 1), k1);
  const double second = linear_sum(0, -1, k0, std::min<std::int64_t>(k1, -1));  // max(0, -k) = -k below 0
  return (first - second) / static_cast<double>(n_outer);
}

}  // namespace napkin
