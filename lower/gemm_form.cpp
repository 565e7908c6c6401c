// The gemm form and the checks of its two variants (contract in gemm_form.hpp). The emitters
// (emit/cuda/gemm.cpp, both paths) render what these functions accept and never decline it.
#include "lower/gemm_form.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <queue>

#include "diagrams/graph_view.hpp"

namespace napkin {

namespace {

std::string join(const AxisList& v) {
  std::string s;
  for (const auto& a : v) s += (s.empty() ? "" : ", ") + a;
  return s;
}

/** The output axes the schedule tiles, in the order M and N are picked from: group directives in
 *  order, then axes kept whole with an extent over 1 (declaration order). */
std::vector<std::string> tiled_axes(const KernelShape& k, const AxisList& out) {
  std::vector<std::string> tiled;
  for (const auto& dir : k.plan.directives)
    if (dir.kind == Directive::Kind::group && contains(out, dir.names[0]) && !contains(tiled, dir.names[0])) tiled.push_back(dir.names[0]);
  for (const auto& a : k.axis_order) {
    const AxisPlan& ap = k.axes.at(a);
    if (contains(out, a) && ap.kind == AxisPlan::Kind::whole && ap.extent > 1 && !contains(tiled, a)) tiled.push_back(a);
  }
  return tiled;
}

/** A tile extent along output axis `a`: the group size, or a whole axis rounded up to `rows`. */
std::int64_t tile_along(const KernelShape& k, const std::string& a, std::int64_t rows) {
  if (auto g = k.plan.group(a)) return *g;
  const std::int64_t e = k.axes.at(a).extent;
  return (e + rows - 1) / rows * rows;
}

/** The contracted axis walked in chunks (contract in gemm_form.hpp: analyse_gemm); empty with
 *  `why` set when the operands store different contracted axes innermost. */
std::string chunk_axis(const std::vector<AxisList>& operands, const AxisList& ks, const AxisList& a_axes, const KernelShape& k, std::string& why) {
  std::string inner;
  for (const auto& ax : operands) {
    if (!contains(ks, ax.back())) continue;
    if (!inner.empty() && inner != ax.back()) return why = "operands store different contracted axes innermost (" + inner + ", " + ax.back() + ")", "";
    inner = ax.back();
  }
  if (!inner.empty()) return inner;
  for (const auto& [a, size] : k.plan.streams())
    if (contains(ks, a) && k.axes.at(a).tile > 1) return a;
  for (auto it = a_axes.rbegin(); it != a_axes.rend(); ++it)
    if (contains(ks, *it)) return *it;
  return ks.back();
}

/** The chunks of K each tile of `tile` rows of the band axis (extent `extent`) walks, in tile
 *  order (gemm_k_chunks). */
std::vector<std::int64_t> band_tile_chunks(const GemmForm& g, std::int64_t extent, std::int64_t tile, std::int64_t k_extent) {
  std::vector<std::int64_t> len;
  for (std::int64_t o = 0; o < extent; o += tile) {
    const auto [b, e] = gemm_k_chunks(g, o, std::min(extent, o + tile) - 1, k_extent);
    len.push_back(e - b);
  }
  return len;
}

/** Sets g.k_band (GemmForm) from the first operand with a zero band over K and its free axis
 *  (M for the operand every contraction shares, N where every contraction has the same second
 *  operand), and the share of (tile, chunk) pairs walked, from `k`'s extents. Not under a
 *  cluster along that axis (the cluster's blocks walk the same chunks: one multicast ring), nor
 *  where a row of that axis has no element inside the band at these extents: every row walks a
 *  chunk holding its elements, so a row that is NaN throughout (its softmax masked throughout)
 *  stays NaN, as the language says. */
void find_k_band(const Diagram& d, const KernelShape& k, GemmForm& g) {
  if (!g.k_outer.empty()) return;
  auto same = [&](bool a_side) {
    for (const auto& gc : g.gemms)
      if ((a_side ? gc.a.array : gc.b.array) != (a_side ? g.gemms[0].a.array : g.gemms[0].b.array)) return false;
    return true;
  };
  for (bool a_side : {true, false}) {
    const std::string& arr = a_side ? g.gemms[0].a.array : g.gemms[0].b.array;
    const std::string& free = a_side ? g.M : g.N;
    const auto z = zero_band(d, arr);
    if (!z || !same(a_side) || !((z->a == free && z->b == g.K) || (z->a == g.K && z->b == free))) continue;
    const std::int64_t rows = k.axes.at(free).extent, k_extent = k.axes.at(g.K).extent;
    auto empty = [&](std::int64_t r) { const auto [b, e] = band_range(*z, free, r, r, k_extent); return b >= e; };
    if (empty(0) || empty(rows - 1)) {  // a row whose band is empty would walk no chunk: its NaNs (a row masked throughout) would read as 0
      g.k_note += "; " + arr + " is 0 outside a band of " + free + " and " + g.K + ", but some rows of " + free + " have no element in it: every chunk is walked";
      return;
    }
    if (const auto cl = k.plan.cluster(); cl && cl->first == free) {  // a cluster's blocks load the same chunks (TMA multicast)
      g.k_note += "; " + arr + " is 0 outside a band of " + free + " and " + g.K + ", but a cluster along " + free + " walks every chunk";
      return;
    }
    g.k_band = z, g.k_band_axis = free, g.k_band_array = arr;
    const std::int64_t extent = rows, tile = a_side ? g.TM : g.TN;
    const std::int64_t tiles = (extent + tile - 1) / tile, all = (k_extent + g.TK - 1) / g.TK;
    double walked = 0;
    for (const std::int64_t n : band_tile_chunks(g, extent, tile, k_extent)) walked += static_cast<double>(n);
    g.k_active_fraction = walked / static_cast<double>(std::max<std::int64_t>(1, tiles * all));
    const std::string lo = z->lo ? std::to_string(*z->lo) + " <= " : "", hi = z->hi ? " <= " + std::to_string(*z->hi) : "";
    char share[32];
    std::snprintf(share, sizeof share, "%.1f%%", 100 * g.k_active_fraction);
    g.k_note += "; " + arr + " is 0 outside " + lo + z->b + " - " + z->a + hi + " (zero band): each tile of " + free + " walks its chunks inside it, " + share +
                " of them";
    return;
  }
}

}  // namespace

std::optional<OperandRoles> orient_operands(const std::string& x, const AxisList& xa, const std::string& y, const AxisList& ya, const std::string& M,
                                            const std::string& N) {
  OperandRoles r{x, y, xa, ya, false};
  if (contains(ya, M) && !contains(xa, M)) std::swap(r.a, r.b), std::swap(r.a_axes, r.b_axes), r.swapped = true;
  if (!contains(r.a_axes, M) || contains(r.b_axes, M) || !contains(r.b_axes, N) || contains(r.a_axes, N)) return std::nullopt;
  return r;
}

std::optional<GemmForm> analyse_gemm(const Diagram& d, Typer& typer, const KernelShape& k, const ModelOptions& opt, std::string& why) {
  for (const auto& s : k.statements)
    if (const std::string v = picked_axis(*d.find_statement(s)->expr); !v.empty())
      return why = "a gather along " + v + " (its one-hot select): the GEMM form renders no select on its operand tiles", std::nullopt;
  std::vector<const Expr*> contractions;
  bool other = false;
  for (const auto& s : k.statements)
    walk(*d.find_statement(s)->expr, [&](const Expr& e) {
      if (e.kind != Expr::Kind::apply) return;
      if (e.op == Op::contract) contractions.push_back(&e);
      else if (!is_elementwise(e.op) && !is_positional(e.op)) other = true;
    });
  if (contractions.empty() || other) return why = "not only contractions and element-wise maps", std::nullopt;
  auto axes_of = [&](const Expr& e) { return typer.axes_of(e).value_or(AxisList{}); };
  const AxisList out = axes_of(*contractions[0]);
  const AxisList ks(contractions[0]->axes.begin(), contractions[0]->axes.end());
  if (ks.empty()) return why = "a contraction over no axis", std::nullopt;
  for (const auto& s : k.statements) {
    AxisList sa = d.find_statement(s)->axes;
    if (sa.size() != out.size() || !std::all_of(sa.begin(), sa.end(), [&](const std::string& a) { return contains(out, a); }))
      return why = "statements of different shapes", std::nullopt;
  }
  // Operands: arrays read from global memory, each contracted axis in both.
  std::vector<std::pair<AxisList, AxisList>> operand_axes;
  for (const Expr* e : contractions) {
    if (e->axes != contractions[0]->axes || axes_of(*e) != out || e->args.size() != 2) return why = "contractions differ", std::nullopt;
    const Expr& x = *e->args[0];
    const Expr& y = *e->args[1];
    if (x.kind != Expr::Kind::ref || y.kind != Expr::Kind::ref || !d.array_axes(x.name) || !d.array_axes(y.name) || !contains(k.inputs, x.name) ||
        !contains(k.inputs, y.name))
      return why = "a contraction operand is not an array read from global memory", std::nullopt;
    operand_axes.emplace_back(*d.array_axes(x.name), *d.array_axes(y.name));
    for (const auto& a : ks)
      if (!contains(operand_axes.back().first, a) || !contains(operand_axes.back().second, a))
        return why = "contracted axis " + a + " is not in both operands", std::nullopt;
  }
  // M and N: the first tiled output axes that are one operand's each.
  const std::vector<std::string> tiled = tiled_axes(k, out);
  const auto& [x0, y0] = operand_axes[0];
  auto only_in = [&](const std::string& a, const AxisList& in, const AxisList& not_in) { return contains(in, a) && !contains(not_in, a); };
  GemmForm g;
  g.warps = k.plan.warps();
  g.pingpong = k.plan.pingpong();
  for (std::size_t i = 0; i < tiled.size() && g.M.empty(); ++i)
    for (std::size_t j = i + 1; j < tiled.size() && g.M.empty(); ++j)
      if ((only_in(tiled[i], x0, y0) && only_in(tiled[j], y0, x0)) || (only_in(tiled[i], y0, x0) && only_in(tiled[j], x0, y0))) g.M = tiled[i], g.N = tiled[j];
  if (g.M.empty()) return why = tiled.size() < 2 ? "fewer than two tiled output axes" : "no two tiled output axes are one operand's each", std::nullopt;
  g.TM = tile_along(k, g.M, 16), g.TN = tile_along(k, g.N, 16);
  // The warps split M in 16-row MMA tiles: a thin M whose tile they cannot split trades places with N.
  const std::int64_t warp_rows = 16 * std::max(1, g.sync_warps());
  if (g.TM % warp_rows != 0 && g.TN % warp_rows == 0) std::swap(g.M, g.N), std::swap(g.TM, g.TN);
  // Outputs stored with M innermost (and N not): M and N trade places where the warps split the
  // other tile as well, so that the epilogue's stores run along each output's innermost axis
  // (paired stores, and the TMA store, which takes an output with N innermost:
  // gemm_tma_store_problem); a dual GEMM keeps its shared operand on M.
  else if (contractions.size() == 1 && g.TN % warp_rows == 0 && !k.outputs.empty() &&
           std::all_of(k.outputs.begin(), k.outputs.end(), [&](const std::string& o) {
             const AxisList& oa = d.find_statement(o)->axes;
             return !oa.empty() && oa.back() == g.M;
           }))
    std::swap(g.M, g.N), std::swap(g.TM, g.TN);
  if (g.TM % warp_rows != 0 && !k.plan.group(g.M)) g.TM = tile_along(k, g.M, warp_rows);
  const std::string &M = g.M, &N = g.N;
  bool have_dtype = false;
  for (std::size_t ci = 0; ci < contractions.size(); ++ci) {
    const Expr* e = contractions[ci];
    const auto roles = orient_operands(e->args[0]->name, operand_axes[ci].first, e->args[1]->name, operand_axes[ci].second, M, N);
    if (!roles) return why = "M and N are not one operand's each", std::nullopt;
    const AxisList &xa = roles->a_axes, &ya = roles->b_axes;
    GemmContraction gc{e, {roles->a}, {roles->b}};
    if (ci == 0 && (g.K = chunk_axis({xa, ya}, ks, xa, k, why)).empty()) return std::nullopt;
    const std::string& K = g.K;
    if (xa.back() != K && xa.back() != M) return why = gc.a.array + " has neither " + K + " nor M innermost", std::nullopt;
    if (ya.back() != K && ya.back() != N) return why = gc.b.array + " has neither " + K + " nor N innermost", std::nullopt;
    gc.a.k_inner = xa.back() == K;
    gc.b.k_inner = ya.back() == K;
    for (const auto& arr : {gc.a.array, gc.b.array}) {
      DType t = storage_dtype(d, arr, opt);
      if (t != DType::bf16 && t != DType::fp16 && !is_fp8(t) && t != DType::int8)
        return why = "operands are not bf16, fp16, fp8e4m3, fp8e5m2 or int8", std::nullopt;
      if (have_dtype && t != g.dtype) return why = "operands of different dtypes", std::nullopt;
      g.dtype = t, have_dtype = true;
    }
    if (!g.gemms.empty() && gc.a.array != g.gemms[0].a.array) return why = "contractions with different M operands", std::nullopt;
    if (ci == 0)  // the other contracted axes, in the M operand's order (outermost first)
      for (const auto& a : xa)
        if (contains(ks, a) && a != K) g.k_outer.push_back(a);
    g.gemms.push_back(gc);
  }
  const std::string& K = g.K;
  g.TK = gemm_swizzle_row_elems(g.dtype);  // one 128-byte swizzle row of K per chunk
  g.k_note = "kept whole in the schedule; staged through SMEM in chunks of " + std::to_string(g.TK);
  for (const auto& [a, size] : k.plan.streams()) {
    if (!contains(ks, a)) return why = "streams an axis other than the contracted ones", std::nullopt;
    if (a == K) g.TK = size, g.k_note = "streamed by " + std::to_string(size);
    else if (k.axes.at(a).tile > 1) return why = "streams contracted axis " + a + " (walked one index at a time around " + K + ") by more than 1", std::nullopt;
  }
  if (!g.k_outer.empty()) g.k_note += "; inside " + join(g.k_outer) + " walked one index at a time";
  if (g.TK % 16 != 0) return why = "K chunk not a multiple of 16", std::nullopt;
  auto add_tile = [&](const GemmOperand& o, const std::string& free, std::int64_t Tf) {
    for (const auto& t : g.tiles)
      if (t.array == o.array) return;
    if (o.k_inner) g.tiles.push_back({o.array, free, K, Tf, g.TK, false, 16});
    else g.tiles.push_back({o.array, K, free, g.TK, Tf, true, 16});
  };
  for (const auto& gc : g.gemms) add_tile(gc.a, M, g.TM), add_tile(gc.b, N, g.TN);
  for (const auto& a : d.find_statement(k.statements[0])->axes)
    if (a != M && a != N) g.batch.push_back(a);
  find_k_band(d, k, g);
  return g;
}

void gemm_band_order(GemmForm& g, const Diagram& d, const KernelShape& k, const Hardware& hw, const ModelOptions& opt) {
  if (!g.k_band || k.plan.cluster()) return;
  const bool a_side = g.k_band_axis == g.M;
  double shared = 0;  // the operands the band's tiles share, over every batch slice
  for (const auto& gc : g.gemms) {
    const std::string& arr = a_side ? gc.b.array : gc.a.array;
    double bytes = dtype_bits(storage_dtype(d, arr, opt)) / 8.0;
    for (const auto& a : *d.array_axes(arr)) bytes *= static_cast<double>(k.axes.at(a).extent);
    shared += bytes;
  }
  if (shared > hw.l2.capacity_bytes / 2) return;
  const std::int64_t extent = k.axes.at(g.k_band_axis).extent, k_extent = k.axes.at(g.K).extent, tile = a_side ? g.TM : g.TN;
  std::vector<std::int64_t> len = band_tile_chunks(g, extent, tile, k_extent);
  g.band_order = true;
  g.band_reversed = len.back() > len.front();
  if (g.band_reversed) std::reverse(len.begin(), len.end());
  g.band_ranks = std::move(len);
}

double gemm_band_stretch(const GemmForm& g, std::int64_t blocks, std::int64_t slots, bool persistent) {
  const auto& len = g.band_ranks;
  if (!g.band_order || len.empty() || blocks <= 0 || slots <= 0) return 1;
  const std::int64_t per_rank = std::max<std::int64_t>(1, blocks / static_cast<std::int64_t>(len.size()));
  auto length = [&](std::int64_t vb) { return static_cast<double>(len[std::min<std::size_t>(len.size() - 1, static_cast<std::size_t>(vb / per_rank))]); };
  double total = 0, end = 0;
  if (persistent) {  // emit/cuda/render_grid.cpp gemm_tile_walk: block b's tiles in snake order
    const std::int64_t p = std::min(blocks, slots);
    for (std::int64_t b = 0; b < p; ++b) {
      double mine = 0;
      for (std::int64_t r = 0;; ++r) {
        const std::int64_t vb = r * p + (r % 2 ? p - 1 - b : b);
        if (vb >= blocks) break;
        mine += length(vb);
      }
      total += mine, end = std::max(end, mine);
    }
    return total > 0 ? std::max(1.0, end * static_cast<double>(slots) / total) : 1;
  }
  std::priority_queue<double, std::vector<double>, std::greater<>> free_at;  // list scheduling in rank order
  for (std::int64_t s = 0; s < slots; ++s) free_at.push(0);
  for (std::int64_t vb = 0; vb < blocks; ++vb) {
    const double start = free_at.top(), t = length(vb);
    free_at.pop();
    free_at.push(start + t);
    total += t, end = std::max(end, start + t);
  }
  return total > 0 ? std::max(1.0, end * static_cast<double>(slots) / total) : 1;
}

std::pair<std::int64_t, std::int64_t> gemm_k_chunks(const GemmForm& g, std::int64_t first, std::int64_t last, std::int64_t k_extent) {
  const std::int64_t all = (k_extent + g.TK - 1) / g.TK;
  if (!g.k_band) return {0, all};
  const auto [begin, end] = band_range(*g.k_band, g.k_band_axis, first, last, k_extent);
  if (begin >= end) return {0, 0};
  return {begin / g.TK, (end - 1) / g.TK + 1};
}

int gemm_mma_sync_stages(const GemmForm& g, const Hardware& hw, std::string& why) {
  const MmaShape* mma = hw.warp_mma(g.dtype);
  const std::string dt(dtype_name(g.dtype));
  // The atom: m16n8 with 32 bytes of K per row (k16 of a 16-bit type, k32 of int8: the fragments
  // ldmatrix loads), accumulating in fp32, or in int32 for integer operands (PTX ISA 9.7.14.5).
  const std::string acc = is_integer_dtype(g.dtype) ? ".s32." : ".f32.";
  if (!mma || mma->m != 16 || mma->n != 8 || mma->k * dtype_bits(g.dtype) != 256 || mma->ptx.find(acc) == std::string::npos)
    return why = "no m16n8 mma.sync with 32 bytes of K per row and " + acc.substr(1, 3) + " accumulate for " + dt + " in the hardware's [[mma]] table", 0;
  if (!mma->mn_major)  // the [[mma]] row: ldmatrix .trans transposes 16-bit elements only (PTX ISA 9.7.14.5.15)
    for (const auto& t : g.tiles)
      if (t.k_rows)
        return why = dt + " mma.sync fragments are loaded by ldmatrix without .trans (it transposes 16-bit elements only): both operands K-major; " +
                     t.array + " is stored " + t.cols + "-major (" + t.cols + " innermost, not " + g.K + ")",
               0;
  if (g.TK % mma->k != 0) return why = "K chunk (" + std::to_string(g.TK) + ") not a multiple of the atom's k (" + std::to_string(mma->k) + ")", 0;
  if (g.TM % (16 * g.sync_warps()) != 0 || g.TN % 16 != 0) return why = "tiles not multiples of the mma shape per warp", 0;
  const int stages = static_cast<int>(std::min<double>(4, hw.smem_max_per_block_bytes / static_cast<double>(gemm_mma_sync_smem_bytes(g, 1))));
  if (stages < 2) return why = "two pipeline stages do not fit SMEM", 0;
  return stages;
}

std::int64_t gemm_mma_sync_pad_elems(DType t) { return 128 / dtype_bits(t); }

std::int64_t gemm_mma_sync_smem_bytes(const GemmForm& g, int stages) {
  std::int64_t stage_elems = 0;
  for (const auto& t : g.tiles) stage_elems += t.R * (t.C + gemm_mma_sync_pad_elems(g.dtype));
  return stage_elems * dtype_bits(g.dtype) / 8 * stages;
}

bool is_fp8(DType t) { return t == DType::fp8e4m3 || t == DType::fp8e5m2; }

std::int64_t gemm_swizzle_row_elems(DType t) { return 1024 / dtype_bits(t); }

std::vector<std::int64_t> gemm_wgmma_atoms(const GemmForm& g) {
  if (g.TN % 8 != 0 || g.TN <= 0) return {};
  if (g.TN <= 256) return {g.TN};
  const bool b_n_major = std::any_of(g.gemms.begin(), g.gemms.end(), [](const GemmContraction& c) { return !c.b.k_inner; });
  const std::int64_t unit = b_n_major ? 64 : is_integer_dtype(g.dtype) ? 16 : 8, units = g.TN / unit;
  if (g.TN % unit != 0) return {};
  const std::int64_t atoms = (g.TN + 255) / 256;
  std::vector<std::int64_t> ns;
  for (std::int64_t j = 0; j < atoms; ++j) ns.push_back(unit * (units / atoms + (j < units % atoms ? 1 : 0)));  // the first atoms one unit wider
  return ns;
}

std::int64_t gemm_tma_box_rows(std::int64_t free, int split) {
  for (std::int64_t r = std::min<std::int64_t>(256, free / split); r >= 8; --r)
    if (r % 8 == 0 && free % (r * split) == 0) return r;
  return 0;
}

std::int64_t gemm_wgmma_stage_bytes(const GemmForm& g) {
  std::int64_t bytes = 0;
  for (const auto& t : g.tiles) bytes += t.R * t.C * dtype_bits(g.dtype) / 8;
  return bytes;
}

int gemm_wgmma_stages(const GemmForm& g, const Diagram& d, const Hardware& hw, int cluster, const std::string& cluster_axis, std::string& why,
                      std::int64_t reserved_bytes) {
  if (!hw.wgmma || !hw.tma) return why = hw.name + " has no wgmma and TMA", 0;
  if (!hw.warpgroup_mma(g.dtype)) return why = "no warpgroup MMA for " + std::string(dtype_name(g.dtype)) + " in the hardware description", 0;
  if (!hw.warpgroup_mma(g.dtype)->mn_major)  // the [[mma]] row; PTX ISA 9.7.15.5.1: transpose immediates for .f16/.bf16 only
    for (const auto& t : g.tiles)
      if (t.k_rows)
        return why = std::string(dtype_name(g.dtype)) + " wgmma reads both operands K-major from SMEM; " + t.array + " is stored " + t.cols +
                     "-major (" + t.cols + " innermost, not " + g.K + ")",
               0;
  const std::int64_t row = gemm_swizzle_row_elems(g.dtype);  // elements per 128-byte swizzle row
  if (g.warps % 4 != 0 || g.warps / 4 > 2) return why = "warps not 4 or 8 (one or two consumer warpgroups)", 0;
  if (g.pingpong && g.warps != 8) return why = "pingpong needs two consumer warpgroups (warps 8)", 0;
  const int consumers = g.tile_consumers();  // consumer warpgroups splitting one tile's rows
  if (g.TM % (64 * consumers) != 0) return why = "T_M not a multiple of 64 rows per consumer warpgroup", 0;
  if (gemm_wgmma_atoms(g).empty()) return why = "T_N not whole wgmma atoms (multiples of 8 up to 256)", 0;
  if (g.TK % row != 0) return why = "T_K not a multiple of " + std::to_string(row) + " (one 128-byte swizzle row)", 0;
  const std::int64_t acc_regs = static_cast<std::int64_t>(g.gemms.size()) * (g.TM / consumers / 64) * (g.TN / 2);
  if (acc_regs > 160) return why = "accumulators over 160 registers per thread", 0;
  if (cluster > 1 && cluster_axis != g.M && cluster_axis != g.N)
    return why = "cluster axis '" + cluster_axis + "' is neither the GEMM's M (" + g.M + ") nor its N (" + g.N + ")", 0;
  if (cluster > 2) return why = "clusters of more than 2 blocks", 0;
  for (const auto& t : g.tiles) {
    const std::int64_t F = t.k_rows ? t.C : t.R;  // extent along the free axis
    const int split = t.rows != cluster_axis && t.cols != cluster_axis ? cluster : 1;  // multicast tiles: boxes per rank
    if (!t.k_rows) {
      if (gemm_tma_box_rows(F, split) == 0) return why = "tile of " + t.array + " not whole TMA boxes (multiples of 8 rows up to 256)", 0;
    } else {
      if (F % row != 0) return why = "tile of " + t.array + " (M- or N-major) not whole " + std::to_string(row) + "-column blocks", 0;
      if (g.TK > 256) return why = "T_K over one TMA box (256 rows)", 0;
    }
    if (d.array_axes(t.array)->size() > 5) return why = t.array + " has more than 5 axes (TMA's limit)", 0;
  }
  const int stages = static_cast<int>(std::min<double>(6, (hw.smem_max_per_block_bytes - 2048 - static_cast<double>(reserved_bytes)) / static_cast<double>(gemm_wgmma_stage_bytes(g))));
  if (stages < 2) return why = "two pipeline stages do not fit SMEM", 0;
  return stages;
}

std::string gemm_tma_store_problem(const GemmForm& g, const Diagram& d, const std::vector<std::string>& outputs, const ModelOptions& opt) {
  if (outputs.empty()) return "TMA store: no output";
  for (const auto& o : outputs) {
    if (dtype_bits(storage_dtype(d, o, opt)) != 16) return "TMA store: " + o + " is not 16-bit";
    const AxisList& ax = *d.array_axes(o);
    if (ax.empty() || ax.back() != g.N || std::find(ax.begin(), ax.end(), g.M) == ax.end())
      return "TMA store: " + o + " does not have " + g.N + " innermost and " + g.M + " among its axes";
    if (ax.size() > 5) return "TMA store: " + o + " has more than 5 axes (TMA's limit)";
  }
  if (g.TN % 64 != 0) return "TMA store: T_N not whole 64-column boxes";
  if (g.TM / g.tile_consumers() > 256) return "TMA store: over 256 rows per consumer warpgroup (one TMA box)";
  return "";
}

std::int64_t gemm_tma_store_bytes(const GemmForm& g, int buffers) { return buffers * g.tiles_in_flight() * g.TM * 64 * 2; }

}  // namespace napkin
