// Lowering (contract in lower.hpp): one decision per kernel, in the order call, gemm, flash, flash_bwd, rows,
// simt, from the kernel's shape, the forms' checks and the hardware table.
#include "lower/lower.hpp"

#include <algorithm>
#include <functional>
#include <map>

namespace napkin {

std::string_view strategy_name(Strategy s) {
  switch (s) {
    case Strategy::call: return "call";
    case Strategy::gemm: return "gemm";
    case Strategy::flash: return "flash";
    case Strategy::flash_bwd: return "flash_bwd";
    case Strategy::rows: return "rows";
    case Strategy::cols: return "cols";
    case Strategy::transpose: return "transpose";
    case Strategy::simt: return "simt";
  }
  return "simt";
}

namespace {

/** The tensor-core strategies put every batch axis in the grid, one index per thread block
 *  (emit/cuda/gemm.cpp, flash.cpp: grid = tiles x batch indices): the shape the model prices
 *  becomes that grid, whatever the schedule kept whole. */
void batch_axes_in_grid(KernelShape& k, const AxisList& batch) {
  for (const auto& a : batch) {
    AxisPlan& ap = k.axes.at(a);
    if (ap.kind == AxisPlan::Kind::group && ap.tile == 1) continue;
    ap.kind = AxisPlan::Kind::group;
    ap.tile = 1;
    ap.count = ap.extent;
  }
  k.blocks = 1;
  for (const auto& [a, ap] : k.axes)
    if (ap.kind == AxisPlan::Kind::group) k.blocks *= ap.count;
}

/** The strides of `array` in bytes (dense, in its axis order) of every axis but the innermost,
 *  innermost first: each the product of the later axes' extents times the element size. */
std::vector<std::int64_t> row_strides_bytes(const Diagram& d, const KernelShape& k, const std::string& array, const ModelOptions& opt) {
  const AxisList& axes = *d.array_axes(array);
  std::vector<std::int64_t> out;
  std::int64_t stride = dtype_bits(storage_dtype(d, array, opt)) / 8;
  for (std::size_t i = axes.size(); i-- > 1;) out.push_back(stride *= k.axes.at(axes[i]).extent);
  return out;
}

/** Why TMA cannot describe one of `arrays` at the kernel's sizes (empty when it can): a tensor
 *  map's strides must be multiples of 16 bytes (CUDA driver API, cuTensorMapEncodeTiled), and each
 *  stride is the product of the later axes' extents times the element size. The launcher checks
 *  the same at run time with the pointers (emit/cuda/preamble.cpp make_tmap); lowering decides it
 *  from the sizes, so that the model prices the variant that runs. */
std::string tma_stride_problem(const Diagram& d, const KernelShape& k, const std::vector<std::string>& arrays, const ModelOptions& opt) {
  for (const auto& a : arrays)
    for (const std::int64_t stride : row_strides_bytes(d, k, a, opt))
      if (stride % 16 != 0) return "a row stride of " + a + " is " + std::to_string(stride) + " bytes, not a multiple of 16 (TMA)";
  return {};
}

/** The wgmma path reads each of `operands` whose strides TMA cannot take from a copy with rows
 *  padded to whole 128-byte lines (KernelSpec::repacks): one more pass over it, priced by the model. */
void repack_operands(KernelSpec& s, const Diagram& d, const std::vector<std::string>& operands, const ModelOptions& opt) {
  for (const auto& a : operands) {
    std::string why = tma_stride_problem(d, s.shape, {a}, opt);
    if (why.empty() || s.repack(a)) continue;
    const std::int64_t row = s.shape.axes.at(d.array_axes(a)->back()).extent * dtype_bits(storage_dtype(d, a, opt)) / 8;
    s.repacks.push_back({a, repack_pitch_bytes(row), std::move(why)});
  }
}

/** The widest cp.async (16, 8 or 4 bytes) that divides every stride of `array` in bytes, 0 where
 *  none does: the copy width emit/cuda/device/movers.cuh copy_width finds at run time for an array
 *  whose base address is 16-byte aligned (cudaMalloc's are 256-byte aligned). */
int copy_width_bytes(const Diagram& d, const KernelShape& k, const std::string& array, const ModelOptions& opt) {
  std::int64_t bits = 0;
  for (const std::int64_t stride : row_strides_bytes(d, k, array, opt)) bits |= stride;
  return bits % 16 == 0 ? 16 : bits % 8 == 0 ? 8 : bits % 4 == 0 ? 4 : 0;
}

/** A gemm's M and N kept whole in the schedule are one tile each in the grid, and the warps split M. */
void gemm_tiles_in_grid(KernelShape& k, const GemmForm& g) {
  for (const auto& a : {g.M, g.N}) {
    AxisPlan& ap = k.axes.at(a);
    if (ap.kind == AxisPlan::Kind::whole) ap.kind = AxisPlan::Kind::group, ap.count = 1;
  }
  k.warp_axis = g.M;
}

void lower_gemm(KernelSpec& s, const Diagram& d, const Hardware& hw, const ModelOptions& opt, std::string& why) {
  const GemmForm& g = *s.gemm;
  if (g.k_band) {  // the model prices the chunks walked, the CPU loop nest skips the others (GemmForm::k_band)
    const ZeroBand o = oriented(*g.k_band, g.k_band_axis);
    s.shape.causal_q = g.k_band_axis, s.shape.causal_x = g.K;
    s.shape.causal_lo = o.lo, s.shape.causal_hi = o.hi;
    s.shape.causal_active_fraction = g.k_active_fraction;
  }
  gemm_tiles_in_grid(s.shape, g);
  batch_axes_in_grid(s.shape, g.batch);
  if (s.stages > 0) {  // the mma.sync path (absent for 8-bit float operands without an mma.sync row: lower_kernel)
    s.mma_sync = *hw.warp_mma(g.dtype);
    s.smem_bytes = gemm_mma_sync_smem_bytes(g, s.stages);
    for (auto& t : s.gemm->tiles) t.copy_bytes = copy_width_bytes(d, s.shape, t.array, opt);
  }
  const auto cl = s.shape.plan.cluster();
  const int cluster = cl && hw.clusters ? static_cast<int>(cl->second) : 1;
  const std::string axis = cluster > 1 ? cl->first : "";
  s.wgmma_stages = gemm_wgmma_stages(g, d, hw, cluster, axis, why);
  if (s.wgmma_stages > 0) {
    std::vector<std::string> operands;
    for (const auto& t : g.tiles) operands.push_back(t.array);
    repack_operands(s, d, operands, opt);
  }
  s.wgmma = s.wgmma_stages > 0;
  if (!s.wgmma) {
    s.why_no_wgmma = why;
    return;
  }
  s.wgmma_mma = *hw.warpgroup_mma(g.dtype);
  s.wgmma_smem_bytes = gemm_wgmma_stage_bytes(g) * s.wgmma_stages;
  s.cluster = cluster, s.cluster_axis = axis;
  // The epilogue through SMEM by TMA, where the output allows it and the ring keeps its stages.
  s.why_no_tma_store = gemm_tma_store_problem(g, d, s.shape.outputs, opt);
  if (s.why_no_tma_store.empty()) s.why_no_tma_store = tma_stride_problem(d, s.shape, s.shape.outputs, opt);
  if (s.why_no_tma_store.empty()) {
    // Two staging buffers where the ring keeps min(its stages, 4); then more, up to one per 64
    // columns of the tile, while they cost no stage (lower.hpp tma_store_buffers).
    std::string why_stages;
    auto stages_with = [&](int buffers) { return gemm_wgmma_stages(g, d, hw, cluster, axis, why_stages, gemm_tma_store_bytes(g, buffers)); };
    const int stages = stages_with(2);
    if (stages >= std::min(s.wgmma_stages, 4)) {
      int buffers = 2;
      while (buffers < g.TN / 64 && stages_with(buffers + 1) == stages) ++buffers;
      s.tma_store = true;
      s.tma_store_buffers = buffers;
      s.tma_store_edges = std::none_of(s.shape.inputs.begin(), s.shape.inputs.end(), [&](const std::string& in) {  // an epilogue input along M or N
        const bool tile = std::any_of(g.tiles.begin(), g.tiles.end(), [&](const GemmTile& t) { return t.array == in; });
        const AxisList& ax = *d.array_axes(in);
        return !tile && (std::find(ax.begin(), ax.end(), g.M) != ax.end() || std::find(ax.begin(), ax.end(), g.N) != ax.end());
      });
      s.wgmma_stages = stages;
      s.wgmma_smem_bytes = gemm_wgmma_stage_bytes(g) * stages + gemm_tma_store_bytes(g, buffers);
    } else {
      s.why_no_tma_store = "TMA store: its staging SMEM would leave " + std::to_string(stages) + " of " + std::to_string(s.wgmma_stages) + " stages";
    }
  }
}

/** The flash form's paths: mma.sync on cp.async (16-bit operands) and, where it fits, wgmma on TMA.
 *  False, with `why` set, for 8-bit operands (no mma.sync) when the wgmma path does not fit. */
bool lower_flash(KernelSpec& s, const Diagram& d, const Hardware& hw, const ModelOptions& opt, std::string& why) {
  const FlashForm& f = *s.flash;
  batch_axes_in_grid(s.shape, f.batch);
  if (!flash_fp8(f)) {  // 8-bit operands: no mma.sync in the [[mma]] tables, the wgmma path alone
    s.mma_sync = *hw.warp_mma(f.dtype);
    s.stages = 2;
    s.smem_bytes = flash_mma_sync_smem_bytes(f);
  }
  s.wgmma = flash_wgmma_fits(f, d, hw, why);
  if (s.wgmma) repack_operands(s, d, {f.Qn, f.Kn, f.Vn}, opt);
  if (!s.wgmma) {
    s.why_no_wgmma = why;
    return s.mma_sync.has_value();
  }
  s.wgmma_mma = *hw.warpgroup_mma(f.dtype);
  s.wgmma_stages = 2;
  s.wgmma_smem_bytes = flash_wgmma_smem_bytes(f);
  return true;
}

}  // namespace

KernelSpec lower_kernel(const Program& p, const Diagram& d, const std::vector<StatementWeave>& weave, const KernelPlan& plan, const SizeMap& sizes,
                        const Hardware& hw, const ModelOptions& opt) {
  KernelSpec s;
  s.shape = shape_kernel(d, weave, plan, sizes);
  if (s.shape.has_call) {
    s.strategy = Strategy::call;
    return s;
  }
  Typer typer(d, p.diagrams, nullptr);
  std::string why_gemm, why_flash, why_rows;
  if ((s.gemm = analyse_gemm(d, typer, s.shape, opt, why_gemm))) {
    gemm_band_order(*s.gemm, d, s.shape, hw, opt);
    s.stages = gemm_mma_sync_stages(*s.gemm, hw, why_gemm);
    if (s.stages > 0) {
      s.strategy = Strategy::gemm;
      lower_gemm(s, d, hw, opt, why_gemm);
      return s;
    }
    if (is_fp8(s.gemm->dtype)) {  // fp8 operands without an mma.sync row (before sm_89): the wgmma path alone, or no gemm
      KernelSpec w = s;
      std::string why_wgmma;
      lower_gemm(w, d, hw, opt, why_wgmma);
      if (w.wgmma) {
        w.strategy = Strategy::gemm;
        return w;
      }
      why_gemm = "no mma.sync for " + std::string(dtype_name(s.gemm->dtype)) + " operands, and no wgmma: " + why_wgmma;
    }
    s.gemm.reset();
  }
  if ((s.flash = analyse_flash(d, s.shape, hw, opt, why_flash))) {
    KernelSpec w = s;  // the shape lower_flash rewrites (batch axes in the grid) stays s's if it declines
    std::string why_wgmma;
    if (lower_flash(w, d, hw, opt, why_wgmma)) {
      w.strategy = Strategy::flash;
      return w;
    }
    why_flash = "no mma.sync for " + std::string(dtype_name(s.flash->dtype)) + " operands, and no wgmma: " + why_wgmma;
    s.flash.reset();
  }
  std::string why_bwd;
  if ((s.flash_bwd = analyse_flash_bwd(d, s.shape, hw, opt, why_bwd))) {
    batch_axes_in_grid(s.shape, s.flash_bwd->batch);
    s.strategy = Strategy::flash_bwd;
    s.mma_sync = *hw.warp_mma(s.flash_bwd->dtype);
    s.stages = 2;
    s.smem_bytes = flash_bwd_smem_bytes(*s.flash_bwd);
    std::vector<std::string> operands;
    for (const auto& o : s.flash_bwd->operands) operands.push_back(o.array);
    std::string why_wgmma;
    // the deepest ring of streamed chunks (2 to 4 stages) that fits SMEM (FlashBwdForm::wg_stages)
    for (s.flash_bwd->wg_stages = 4; s.flash_bwd->wg_stages > 2; --s.flash_bwd->wg_stages)
      if (static_cast<double>(flash_bwd_wgmma_smem_bytes(*s.flash_bwd)) <= hw.smem_max_per_block_bytes) break;
    if (flash_bwd_wgmma_fits(*s.flash_bwd, d, hw, why_wgmma)) why_wgmma = tma_stride_problem(d, s.shape, operands, opt);
    s.wgmma = why_wgmma.empty();
    if (s.wgmma) {
      for (auto& t : s.flash_bwd->tiles)  // swizzled staging boxes go out by TMA where the array allows a tensor map
        t.tma_store = t.swizzled && d.array_axes(t.s->name)->size() <= 5 && tma_stride_problem(d, s.shape, {t.s->name}, opt).empty();
      s.wgmma_mma = *hw.warpgroup_mma(s.flash_bwd->dtype);
      s.wgmma_stages = s.flash_bwd->wg_stages;
      s.wgmma_smem_bytes = flash_bwd_wgmma_smem_bytes(*s.flash_bwd);
    } else {
      s.why_no_wgmma = why_wgmma;
    }
    if (!s.flash_bwd->skip.empty()) {  // the model prices the chunks that run (flash_bwd_causal_skip)
      s.shape.causal_active_fraction = s.flash_bwd->active_fraction;
      s.shape.causal_x = s.flash_bwd->Q;
      s.shape.causal_q = s.flash_bwd->X;
      // "before": causal(Q, X) keeps X <= Q, index(Q) - index(X) >= 0; "after" keeps Q <= X
      s.shape.causal_lo = s.flash_bwd->skip == "before" ? std::optional<std::int64_t>(0) : std::nullopt;
      s.shape.causal_hi = s.flash_bwd->skip == "before" ? std::nullopt : std::optional<std::int64_t>(0);
    }
    return s;
  }
  s.declined = "gemm: " + why_gemm + "; flash: " + why_flash + "; flash_bwd: " + why_bwd;
  std::string why_transpose;
  if ((s.transpose = analyse_transpose(d, s.shape, sizes, why_transpose))) {
    s.strategy = Strategy::transpose;
    s.smem_bytes = s.transpose->smem_bytes;
    return s;
  }
  std::string why_cols;
  s.cols = analyse_cols(d, s.shape, sizes, hw, opt, why_cols);
  if (s.cols) {
    s.strategy = Strategy::cols;
    return s;
  }
  s.rows = analyse_rows(d, s.shape, sizes, hw, opt, why_rows);
  s.strategy = s.rows ? Strategy::rows : Strategy::simt;
  return s;
}

KernelSpec lower_kernel_of(const Program& p, const Diagram& d, const std::vector<StatementWeave>& weave, const Schedule& s, std::size_t index,
                           const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt) {
  KernelSpec spec = lower_kernel(p, d, weave, s.kernels.at(index), sizes, hw, opt);
  if (!spec.flash_bwd || spec.flash_bwd->skip.empty()) return spec;
  FlashBwdForm& f = *spec.flash_bwd;
  std::map<std::size_t, std::optional<KernelSpec>> lowered;  // the readers, each lowered once
  const auto outs = d.outputs();
  for (auto& t : f.tiles) {
    const std::string& name = t.s->name;
    if (!t.stored || std::any_of(outs.begin(), outs.end(), [&](const OutputDecl* o) { return o->name == name; })) continue;
    std::vector<ZeroReader> readers;
    bool banded = true;
    for (std::size_t j = 0; j < s.kernels.size() && banded; ++j) {
      if (j == index) continue;
      bool reads = false;
      for (const auto& st : s.kernels[j].fused())
        for (const auto& w : weave)
          if (w.statement->name == st) reads |= std::find(w.reads.begin(), w.reads.end(), name) != w.reads.end();
      if (!reads) continue;
      auto& r = lowered[j];
      if (!r) r = lower_kernel(p, d, weave, s.kernels[j], sizes, hw, opt);
      const GemmForm* g = r->gemm ? &*r->gemm : nullptr;
      banded = g && g->k_band && g->k_band_array == name && g->k_band_axis == f.Q && g->K == f.X;
      if (!banded) break;
      for (const auto& gc : g->gemms) banded &= (gc.a.array == name) != (gc.b.array == name);  // read as the banded operand alone
      const ZeroBand o = oriented(*g->k_band, f.Q);
      readers.push_back({g->k_band_axis == g->M ? g->TM : g->TN, g->TK, o.lo, o.hi});
    }
    if (banded && !readers.empty()) t.zero_readers = readers;
  }
  flash_bwd_zero_shares(f, spec.shape);
  return spec;
}

namespace {
/** ", A read from a copy with rows of P bytes (why)" for each operand the wgmma path repacks. */
std::string repack_note(const KernelSpec& s) {
  std::string out;
  for (const auto& r : s.repacks) out += ", " + r.array + " read from a copy with rows of " + std::to_string(r.pitch) + " bytes (" + r.why + ")";
  return out;
}
}  // namespace

std::string describe_spec(const KernelSpec& s) {
  std::string out(strategy_name(s.strategy));
  if (s.gemm && !s.gemm->k_outer.empty()) {
    out += " over ";
    for (const auto& a : s.gemm->k_outer) out += a + ", ";
    out += "then " + s.gemm->K + " in chunks of " + std::to_string(s.gemm->TK);
  }
  if (s.tensor_cores()) {
    if (s.mma_sync) {
      out += " on mma.sync (" + std::to_string(s.stages) + " stages, " + std::to_string(s.smem_bytes) + " B SMEM";
      if (s.gemm)
        for (const auto& t : s.gemm->tiles)
          if (t.copy_bytes < 16)
            out += ", " + t.array + (t.copy_bytes ? " by " + std::to_string(t.copy_bytes) + "-byte cp.async" : " copied element by element") +
                   " (its strides are not multiples of " + (t.copy_bytes ? "16" : "4") + " bytes)";
      out += ")";
    }
    else out += " (no mma.sync path for " + std::string(dtype_name(s.gemm ? s.gemm->dtype : s.flash->dtype)) + ")";
    if (s.wgmma)
      out += std::string(s.mma_sync ? " and" : " on") + " wgmma + TMA on sm_90a (" + std::to_string(s.wgmma_stages) + " stages, " + std::to_string(s.wgmma_smem_bytes) + " B SMEM" +
             repack_note(s) +
             (s.cluster > 1 ? ", clusters of " + std::to_string(s.cluster) + " along " + s.cluster_axis : "") +
             (s.gemm && s.gemm->pingpong ? ", two consumer warpgroups taking the tiles in turn (pingpong)" : "") +
             (s.tma_store ? ", TMA store epilogue through " + std::to_string(s.tma_store_buffers) + " staging buffers" : "") + ")";
    else
      out += "; no wgmma: " + s.why_no_wgmma;
  } else if (s.strategy == Strategy::simt && !s.declined.empty()) {
    out += " (no tensor-core strategy: " + s.declined + ")";
  }
  if (s.shape.plan.pingpong() && !(s.gemm && s.wgmma))
    out += s.flash ? "; pingpong: a flash kernel's two consumer warpgroups alternate their softmax and MMAs always"
                   : "; pingpong not applied: it is the gemm strategy's wgmma path's (the mma.sync path runs 4 warps on one tile)";
  return out;
}

}  // namespace napkin
