// The host side of the CUDA renderers (contract: render.hpp, strategies.hpp): block counts, the
// checks a launch makes, and the sm_90a variants' tensor maps and run-time choice.
#include "emit/cuda/render.hpp"

namespace napkin::cuda {

void gemm_launch_blocks(Code& l, const GemmForm& g) {
  std::string blocks = "blocks = ((a.N_" + g.M + " + " + std::to_string(g.TM) + " - 1) / " + std::to_string(g.TM) + ") * ((a.N_" + g.N + " + " +
                       std::to_string(g.TN) + " - 1) / " + std::to_string(g.TN) + ")";
  for (const auto& b : g.batch) blocks += " * a.N_" + b;
  l.line("const int64_t " + blocks + ";");
  l.line("if (blocks == 0) return 0;");
}

void flash_launch_blocks(Code& l, const FlashForm& f, const std::string& ns) {
  const std::string &dk = f.dk, &dv = f.dv, DK = std::to_string(f.DK), DV = std::to_string(f.DV);
  l.line("if (a.N_" + dk + " != " + DK + " || a.N_" + dv + " != " + DV + ") return napkin_fail(\"" + ns + ": this kernel was emitted for " + dk + " = " + DK +
         ", " + dv + " = " + DV + "\");");
  std::string blocks = "((a.N_" + f.M + " + " + std::to_string(f.TQ) + " - 1) / " + std::to_string(f.TQ) + ")";
  for (const auto& b : f.batch) blocks += " * a.N_" + b;
  l.line("const int64_t blocks = " + blocks + ";");
  l.line("if (blocks == 0) return 0;");
}

void grid_launch(Code& l, const std::string& blocks, const std::string& ns, bool dynamic_smem) {
  l.line("const int64_t blocks = " + blocks + ";");
  l.line("if (blocks == 0) return 0;");
  if (dynamic_smem) l.line("NAPKIN_CUDA(napkin::smem_limit_once(reinterpret_cast<const void*>(" + ns + "::kernel), static_cast<int>(" + ns + "::SMEM_BYTES)));");
  l.line(ns + "::kernel<<<static_cast<unsigned>(blocks), " + ns + "::THREADS, " + (dynamic_smem ? ns + "::SMEM_BYTES" : std::string("0")) + ", stream>>>(a);");
}

void rows_launch(Code& l, const AxisList& rows, std::int64_t rows_per_block, const std::string& ns, bool dynamic_smem) {
  std::string rows_total = "int64_t{1}";
  for (const auto& rw : rows) rows_total += " * a.N_" + rw;
  grid_launch(l, "(" + rows_total + " + " + std::to_string(rows_per_block) + " - 1) / " + std::to_string(rows_per_block), ns, dynamic_smem);
}

namespace {
/** Host expression of the bytes between the rows of a repacked copy of an array with axes `ax` of
 *  dtype `t`: its innermost extent in bytes rounded up to whole 128-byte lines (lower.hpp
 *  repack_pitch_bytes, at the run's sizes). */
std::string repack_pitch_expr(const AxisList& ax, DType t) {
  return "(static_cast<uint64_t>(a.N_" + ax.back() + ") * " + std::to_string(dtype_bits(t) / 8) + " + 127) / 128 * 128";
}
}  // namespace

std::string tma_launch(const Context& c, const std::string& ns, const std::vector<TmaOperand>& ops, DType dtype, const std::string& fallback,
                       const std::string& condition, const std::string& grid, const std::string& extra_args) {
  Code l;
  l.line("static const int wgmma_built = napkin::hopper_kernel(reinterpret_cast<const void*>(" + ns + "::wg::kernel)) ? 1 : 0;");
  l.line("bool use_wgmma = wgmma_built == 1" + (condition == "true" ? std::string() : " && " + condition) + ";");
  std::string maps;
  for (const auto& op : ops) {
    const DType t = op.dtype.value_or(dtype);
    const std::string dtype_enum = t == DType::bf16 ? "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16"
                                   : dtype_bits(t) == 8 ? "CU_TENSOR_MAP_DATA_TYPE_UINT8"  // fp8: the copy moves bytes
                                                        : "CU_TENSOR_MAP_DATA_TYPE_FLOAT16";
    AxisList ax = c.axes(op.array);
    std::vector<std::string> order{op.cols, op.rows};  // innermost first
    for (auto it = ax.rbegin(); it != ax.rend(); ++it)
      if (*it != op.rows && *it != op.cols) order.push_back(*it);
    const std::string esize = std::to_string(dtype_bits(t) / 8), pitch = "pitch_" + op.array;
    if (!op.repack.empty()) {  // the copy with rows padded to 128-byte lines (lower/gemm_form.hpp repack_pitch)
      std::string rows = "int64_t{1}";
      for (std::size_t i = 0; i + 1 < ax.size(); ++i) rows += " * a.N_" + ax[i];
      l.line("const uint64_t " + pitch + " = " + repack_pitch_expr(ax, t) + ";  // bytes between the copy's rows");
      l.line("if (use_wgmma) NAPKIN_CUDA(napkin::pitch_copy(a." + op.repack + ", a." + op.array + ", " + rows + ", a.N_" + ax.back() + ", static_cast<int64_t>(" +
             pitch + " / " + esize + "), stream));");
    }
    auto stride_bytes = [&](const std::string& axis) {
      std::string s = op.repack.empty() ? "uint64_t{" + esize + "}" : pitch;
      bool after = false;
      for (std::size_t i = 0; i < ax.size(); ++i) {
        const std::string& x = ax[i];
        if (after && (op.repack.empty() || i + 1 < ax.size())) s += " * static_cast<uint64_t>(a.N_" + x + ")";
        if (x == axis) after = true;
      }
      return s;
    };
    std::string dims, strides, box = std::to_string(op.box_cols) + ", " + std::to_string(op.box_rows);
    for (std::size_t i = 0; i < order.size(); ++i) {
      dims += (i ? ", " : "") + std::string("static_cast<uint64_t>(a.N_") + order[i] + ")";
      if (i > 0) strides += (i > 1 ? ", " : "") + stride_bytes(order[i]);
      if (i > 1) box += ", 1";
    }
    l.line("CUtensorMap tm_" + op.array + "{};");
    l.open("if (use_wgmma)");
    l.line("const uint64_t dims[] = {" + dims + "}, strides[] = {" + strides + "};");
    l.line("const uint32_t box[] = {" + box + "};");
    l.line("use_wgmma = napkin::make_tmap(&tm_" + op.array + ", a." + (op.repack.empty() ? op.array : op.repack) + ", " + std::to_string(order.size()) + ", dims, strides, box, " + dtype_enum + ");");
    l.close();
    maps += ", tm_" + op.array;
  }
  l.open("if (use_wgmma)");
  l.line("NAPKIN_CUDA(napkin::smem_limit_once(reinterpret_cast<const void*>(" + ns + "::wg::kernel), static_cast<int>(" + ns + "::wg::SMEM_BYTES)));");
  l.line(ns + "::wg::kernel<<<static_cast<unsigned>(" + grid + "), " + ns + "::wg::THREADS, " + ns + "::wg::SMEM_BYTES, stream>>>(a" + maps + extra_args + ");");
  l.line("napkin_variant = \"wgmma\";");
  l.close(" else {");
  ++l.indent;
  std::size_t pos = 0;
  while (pos < fallback.size()) {
    const std::size_t nl = fallback.find('\n', pos);
    const std::string line = fallback.substr(pos, nl - pos);
    const std::size_t at = line.find_first_not_of(' ');
    l.line(at == std::string::npos ? "" : line.substr(at));
    pos = nl == std::string::npos ? fallback.size() : nl + 1;
  }
  l.close();
  return l.text;
}

void add_hopper_variant(KernelEmit& r, Code& device, Code& launch, const KernelSpec& spec, const std::string& ns,
                        const std::function<KernelEmit(const std::string&)>& make) {
  Code fallback;
  if (spec.mma_sync && dtype_bits(spec.mma_sync->dtype) == 8 && !is_integer_dtype(spec.mma_sync->dtype))
    fallback.line("if (!napkin::fp8_mma_sync_device()) return napkin_fail(\"" + ns + ": mma.sync of " + std::string(dtype_name(spec.mma_sync->dtype)) +
                  " operands needs a GPU of compute capability 8.9 or later (PTX ISA 9.7.14.5.14)\");");
  fallback.line("NAPKIN_CUDA(napkin::smem_limit_once(reinterpret_cast<const void*>(" + ns + "::kernel), static_cast<int>(" + ns + "::SMEM_BYTES)));");
  fallback.line(ns + "::kernel<<<static_cast<unsigned>(blocks), " + ns + "::THREADS, " + ns + "::SMEM_BYTES, stream>>>(a);");
  fallback.line("napkin_variant = \"mma.sync\";");
  if (!spec.wgmma) {
    device.line("// no wgmma variant: " + spec.why_no_wgmma);
    launch.text += fallback.text;
    return;
  }
  const KernelEmit wg = make(fallback.text);
  r.hopper = true;
  device.text += wg.device_code;
  launch.text += wg.launch_code;
}

void add_path_variants(KernelEmit& r, Code& device, Code& launch, const KernelSpec& spec, const std::string& ns, const std::string& alone,
                       const std::function<KernelEmit(const std::string&)>& make) {
  if (spec.mma_sync) {
    add_hopper_variant(r, device, launch, spec, ns, make);
    return;
  }
  NAPKIN_ASSERT(spec.wgmma) << "a kernel without an mma.sync path must have the wgmma path (lower.cpp)";
  const KernelEmit wg = make("return napkin_fail(\"" + ns + ": " + alone + "\");\n");
  r.hopper = true;
  device.text += wg.device_code;
  launch.text += wg.launch_code;
}

std::string repack_buffer(const KernelChoice& kc, const std::string& array) {
  return kc.cost.spec->repack(array) ? kc.plan.name + "__pad_" + array : std::string();
}

std::vector<WorkspaceBuffer> repack_buffers(const Context& c, const KernelChoice& kc) {
  std::vector<WorkspaceBuffer> out;
  for (const auto& r : kc.cost.spec->repacks) {
    const AxisList& ax = c.axes(r.array);
    std::string bytes = repack_pitch_expr(ax, c.dtype(r.array));  // as the launch's pitch_<array>
    for (std::size_t i = 0; i + 1 < ax.size(); ++i) bytes += " * static_cast<size_t>(a.N_" + ax[i] + ")";
    out.push_back({repack_buffer(kc, r.array), c.ctype_of(r.array), bytes, r.array + " with rows padded to 128-byte lines for TMA (" + r.why + ")"});
  }
  return out;
}

std::string gemm_tma_launch(const Context& c, const KernelChoice& kc, const GemmTmaStage& st, const std::string& fallback) {
  const KernelSpec& spec = *kc.cost.spec;
  const GemmForm& g = *spec.gemm;
  std::vector<TmaOperand> ops;
  for (const auto& L : st.tiles)
    ops.push_back({L.t->array, L.t->cols, L.t->rows, L.box_inner, L.box_outer, std::nullopt, repack_buffer(kc, L.t->array)});
  if (spec.tma_store)
    for (const auto& out : kc.cost.outputs) ops.push_back({out, g.N, g.M, 64, static_cast<std::uint32_t>(g.TM / g.tile_consumers()), c.dtype(out)});
  // Persistent grid: at most one block per SM (the SMEM ring fills the SM), whole clusters.
  const std::string grid = "napkin::persistent_grid(blocks, " + std::to_string(spec.cluster) + ")";
  return tma_launch(c, kernel_ns(kc.plan.name), ops, g.dtype, fallback, "true", grid, spec.tma_store ? ", napkin::tma_store_enabled()" : "");
}

}  // namespace napkin::cuda
