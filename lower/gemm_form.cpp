// The gemm form and the checks of its two variants (contract in gemm_form.hpp). The emitters
// (emit/cuda/gemm.cpp, gemm_wgmma.cpp) render what these functions accept and never decline it.
#include "lower/gemm_form.hpp"

#include <algorithm>
#include <functional>

#include "diagrams/graph_view.hpp"

namespace napkin {

std::optional<GemmForm> analyse_gemm(const Diagram& d, Typer& typer, const KernelShape& k, const ModelOptions& opt, std::string& why) {
  std::vector<const Expr*> contractions;
  bool other = false;
  for (const auto& s : k.statements)
    walk(*d.find_statement(s)->expr, [&](const Expr& e) {
      if (e.kind != Expr::Kind::apply) return;
      if (e.op == Op::contract) contractions.push_back(&e);
      else if (!is_elementwise(e.op) && e.op != Op::causal) other = true;
    });
  if (contractions.empty() || other) return why = "not only contractions and element-wise maps", std::nullopt;
  auto axes_of = [&](const Expr& e) { return typer.axes_of(e).value_or(AxisList{}); };
  const AxisList out = axes_of(*contractions[0]);
  GemmForm g;
  g.K = contractions[0]->axes.size() == 1 ? contractions[0]->axes[0] : "";
  const std::string& K = g.K;
  if (K.empty()) return why = "a contraction over several axes", std::nullopt;
  for (const auto& s : k.statements) {
    AxisList sa = d.find_statement(s)->axes;
    if (sa.size() != out.size() || !std::all_of(sa.begin(), sa.end(), [&](const std::string& a) { return contains(out, a); }))
      return why = "statements of different shapes", std::nullopt;
  }
  // M and N: the first two grouped axes of the output, each in exactly one operand.
  std::vector<std::string> grouped;
  for (const auto& dir : k.plan.directives)
    if (dir.kind == Directive::Kind::group && contains(out, dir.names[0])) grouped.push_back(dir.names[0]);
  if (grouped.size() < 2) return why = "fewer than two grouped axes", std::nullopt;
  g.M = grouped[0], g.N = grouped[1];
  const std::string &M = g.M, &N = g.N;
  bool have_dtype = false;
  for (const Expr* e : contractions) {
    if (e->axes != std::vector<std::string>{K} || axes_of(*e) != out || e->args.size() != 2) return why = "contractions differ", std::nullopt;
    const Expr& x = *e->args[0];
    const Expr& y = *e->args[1];
    if (x.kind != Expr::Kind::ref || y.kind != Expr::Kind::ref || !d.array_axes(x.name) || !d.array_axes(y.name) || !contains(k.inputs, x.name) ||
        !contains(k.inputs, y.name))
      return why = "a contraction operand is not an array read from global memory", std::nullopt;
    AxisList xa = *d.array_axes(x.name), ya = *d.array_axes(y.name);
    GemmContraction gc{e, {x.name}, {y.name}};
    if (contains(ya, M) && !contains(xa, M)) std::swap(gc.a, gc.b), std::swap(xa, ya);
    if (!contains(xa, M) || contains(ya, M) || !contains(ya, N) || contains(xa, N)) return why = "M and N are not one operand's each", std::nullopt;
    if (xa.back() != K && xa.back() != M) return why = gc.a.array + " has neither K nor M innermost", std::nullopt;
    if (ya.back() != K && ya.back() != N) return why = gc.b.array + " has neither K nor N innermost", std::nullopt;
    gc.a.k_inner = xa.back() == K;
    gc.b.k_inner = ya.back() == K;
    for (const auto& arr : {gc.a.array, gc.b.array}) {
      DType t = storage_dtype(d, arr, opt);
      if (t != DType::bf16 && t != DType::fp16) return why = "operands are not bf16 or fp16", std::nullopt;
      if (have_dtype && t != g.dtype) return why = "operands of different dtypes", std::nullopt;
      g.dtype = t, have_dtype = true;
    }
    if (!g.gemms.empty() && gc.a.array != g.gemms[0].a.array) return why = "contractions with different M operands", std::nullopt;
    g.gemms.push_back(gc);
  }
  g.warps = k.plan.warps();
  g.TM = *k.plan.group(M), g.TN = *k.plan.group(N);
  auto streams = k.plan.streams();
  g.TK = 64;
  g.k_note = "kept whole in the schedule; staged through SMEM in chunks of 64";
  if (!streams.empty()) {
    if (streams.size() != 1 || streams[0].first != K) return why = "streams an axis other than K", std::nullopt;
    g.TK = streams[0].second;
    g.k_note = "streamed by " + std::to_string(g.TK);
  }
  if (g.TK % 16 != 0) return why = "K chunk not a multiple of 16", std::nullopt;
  auto add_tile = [&](const GemmOperand& o, const std::string& free, std::int64_t Tf) {
    for (const auto& t : g.tiles)
      if (t.array == o.array) return;
    if (o.k_inner) g.tiles.push_back({o.array, free, K, Tf, g.TK, false});
    else g.tiles.push_back({o.array, K, free, g.TK, Tf, true});
  };
  for (const auto& gc : g.gemms) add_tile(gc.a, M, g.TM), add_tile(gc.b, N, g.TN);
  for (const auto& a : d.find_statement(k.statements[0])->axes)
    if (a != M && a != N) g.batch.push_back(a);
  return g;
}

int gemm_mma_sync_stages(const GemmForm& g, const Hardware& hw, std::string& why) {
  const MmaShape* mma = hw.warp_mma(g.dtype);
  if (!mma || mma->m != 16 || mma->n != 8 || mma->k != 16) return why = "no m16n8k16 mma.sync for " + std::string(dtype_name(g.dtype)), 0;
  if (g.TM % (16 * g.warps) != 0 || g.TN % 16 != 0) return why = "tiles not multiples of the mma shape per warp", 0;
  const int stages = static_cast<int>(std::min<double>(4, hw.smem_max_per_block_bytes / static_cast<double>(gemm_mma_sync_smem_bytes(g, 1))));
  if (stages < 2) return why = "two pipeline stages do not fit SMEM", 0;
  return stages;
}

std::int64_t gemm_mma_sync_smem_bytes(const GemmForm& g, int stages) {
  std::int64_t stage_elems = 0;
  for (const auto& t : g.tiles) stage_elems += t.R * (t.C + 8);
  return stage_elems * 2 * stages;
}

std::int64_t gemm_wgmma_stage_bytes(const GemmForm& g) {
  std::int64_t bytes = 0;
  for (const auto& t : g.tiles) bytes += t.R * t.C * 2;
  return bytes;
}

int gemm_wgmma_stages(const GemmForm& g, const Diagram& d, const Hardware& hw, int cluster, const std::string& cluster_axis, std::string& why) {
  if (!hw.wgmma || !hw.tma) return why = hw.name + " has no wgmma and TMA", 0;
  if (!hw.warpgroup_mma(g.dtype)) return why = "no warpgroup MMA for " + std::string(dtype_name(g.dtype)) + " in the hardware description", 0;
  if (g.warps % 4 != 0 || g.warps / 4 > 2) return why = "warps not 4 or 8 (one or two consumer warpgroups)", 0;
  const int consumers = g.warps / 4;
  if (g.TM % (64 * consumers) != 0) return why = "T_M not a multiple of 64 rows per consumer warpgroup", 0;
  if (g.TN % 8 != 0 || g.TN > 256) return why = "T_N not a wgmma N (a multiple of 8 up to 256)", 0;
  if (g.TK % 64 != 0) return why = "T_K not a multiple of 64 (one 128-byte swizzle row)", 0;
  const std::int64_t acc_regs = static_cast<std::int64_t>(g.gemms.size()) * (g.TM / consumers / 64) * (g.TN / 2);
  if (acc_regs > 160) return why = "accumulators over 160 registers per thread", 0;
  if (cluster > 1 && cluster_axis != g.M && cluster_axis != g.N)
    return why = "cluster axis '" + cluster_axis + "' is neither the GEMM's M (" + g.M + ") nor its N (" + g.N + ")", 0;
  if (cluster > 2) return why = "clusters of more than 2 blocks", 0;
  for (const auto& t : g.tiles) {
    const std::int64_t F = t.k_rows ? t.C : t.R;  // extent along the free axis
    const int split = t.rows != cluster_axis && t.cols != cluster_axis ? cluster : 1;  // multicast tiles: boxes per rank
    if (!t.k_rows) {
      const std::int64_t rb = std::min<std::int64_t>(F, 256) / split;
      if (rb == 0 || F % rb != 0) return why = "tile of " + t.array + " not whole boxes of 256 rows", 0;
    } else {
      if (F % 64 != 0) return why = "tile of " + t.array + " (M- or N-major) not whole 64-column blocks", 0;
      if (g.TK > 256) return why = "T_K over one TMA box (256 rows)", 0;
    }
    if (d.array_axes(t.array)->size() > 5) return why = t.array + " has more than 5 axes (TMA's limit)", 0;
  }
  const int stages = static_cast<int>(std::min<double>(6, (hw.smem_max_per_block_bytes - 2048) / static_cast<double>(gemm_wgmma_stage_bytes(g))));
  if (stages < 2) return why = "two pipeline stages do not fit SMEM", 0;
  return stages;
}

}  // namespace napkin
