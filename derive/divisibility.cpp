#include "derive/divisibility.hpp"

#include <algorithm>
#include <numeric>

#include "diagrams/graph_view.hpp"

namespace napkin {

std::map<std::string, Divisibility> divisibility(const Program& p, const Diagram& d,
                                                 const std::vector<const StatementWeave*>& stmts,
                                                 const std::vector<std::string>& hbm_arrays, const Hardware& hw,
                                                 const ModelOptions& opt, int warps, const std::string& warp_axis) {
  std::map<std::string, Divisibility> out;
  auto need = [&](const std::string& axis, std::int64_t k, std::string why) {
    if (k <= 1) return;
    Divisibility& dv = out[axis];
    if (std::find(dv.reasons.begin(), dv.reasons.end(), why) != dv.reasons.end()) return;
    dv.lcm = std::lcm(dv.lcm, k);
    dv.reasons.push_back(std::move(why));
  };
  // Coalescing of the arrays that cross HBM. An array whose axes another of them carries with
  // more, that other's innermost axis not its own (a row's statistic mean[t] beside X[t,m]; the
  // logsumexp lse[b,h,q] beside O[b,h,q,d]), moves the larger array's bytes divided by the extents
  // it lacks: even uncoalesced (a 32-byte sector per element) it cannot bound the kernel, so it
  // does not constrain the tiles (a rows kernel fusing Y[t,m] with mean[t] keeps its 4-row groups).
  auto carries = [&](const std::string& big, const AxisList& small) {
    const auto* b = d.array_axes(big);
    if (!b || b->size() <= small.size() || b->back() == small.back()) return false;
    return std::all_of(small.begin(), small.end(), [&](const std::string& x) { return std::find(b->begin(), b->end(), x) != b->end(); });
  };
  for (const auto& a : hbm_arrays) {
    const auto* axes = d.array_axes(a);
    if (!axes || axes->empty()) continue;
    if (std::any_of(hbm_arrays.begin(), hbm_arrays.end(), [&](const std::string& o) { return o != a && carries(o, *axes); })) continue;
    double bytes = dtype_bits(storage_dtype(d, a, opt)) / 8.0;
    auto k = static_cast<std::int64_t>(128 / bytes);
    need(axes->back(), k, "128-byte coalesced segments of " + a + " (" + std::to_string(k) + " elements)");
  }
  // Tensor-core shapes.
  DType compute = opt.dtype ? *opt.dtype : (d.inputs().empty() ? DType::fp32 : d.inputs().front()->dtype);
  const MmaShape* mma = hw.warp_mma(compute);
  if (!mma) return out;
  Typer typer(d, p.diagrams, nullptr);
  for (const auto* w : stmts)
    walk(*w->statement->expr, [&](const Expr& n) {
      if (n.kind != Expr::Kind::apply || n.op != Op::contract || n.args.size() != 2 || n.axes.empty()) return;
      auto a = typer.axes_of(*n.args[0]), b = typer.axes_of(*n.args[1]);
      if (!a || !b || a->empty() || b->empty()) return;
      std::string shape = "m";  // appended: "m" + to_string(..) trips GCC 12's -Wrestrict at -O3 (GCC bug 105329)
      shape.append(std::to_string(mma->m)).append("n").append(std::to_string(mma->n)).append("k").append(std::to_string(mma->k));
      // Several axes can make one MMA dimension (flattened, like the (g, r, d) columns of a head
      // projection): the constraint falls on its innermost axis, the last in the operand's layout.
      auto innermost = [](const AxisList& layout, auto&& in_dim) {
        std::string last;
        for (const auto& x : layout)
          if (in_dim(x)) last = x;
        return last;
      };
      std::string rows = innermost(*a, [&](const std::string& x) { return !contains(*b, x) && !contains(n.axes, x); });
      std::string cols = innermost(*b, [&](const std::string& x) { return !contains(*a, x) && !contains(n.axes, x); });
      std::string depth = innermost(*a, [&](const std::string& x) { return contains(n.axes, x); });
      if (!rows.empty()) {
        std::string split = !warp_axis.empty() && contains(*a, warp_axis) && !contains(*b, warp_axis) ? warp_axis : rows;
        bool by_warps = split == warp_axis;
        need(split, mma->m * (by_warps ? warps : 1),
             "MMA " + shape + " rows (m=" + std::to_string(mma->m) + (by_warps ? " x " + std::to_string(warps) + " warps" : "") + ")");
      }
      if (!cols.empty()) need(cols, mma->n, "MMA " + shape + " columns (n=" + std::to_string(mma->n) + ")");
      if (!depth.empty()) need(depth, mma->k, "MMA " + shape + " depth (k=" + std::to_string(mma->k) + ")");
    });
  return out;
}

}  // namespace napkin
