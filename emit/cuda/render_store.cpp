// Wide stores of the gemm renderer's interior tiles (contract: render.hpp). An m16n8 accumulator
// fragment (PTX ISA 9.7.14.5.14; the wgmma D layout of 9.7.15.5.1.1 is the same per warp) gives
// lane l the pair of columns 2 (l % 4), +1 of an 8-column block: stored as they are, a warp's
// 4-byte stores fill each 32-byte sector half (Nsight Compute on the H100, matmul 8192x256x4096:
// 16.0 of 32 bytes used per sector, L2 throughput 81% while DRAM ran at 19%). Two remedies:
// - 16-byte stores: the four lanes of a quad exchange their pairs of four consecutive blocks
//   (three shuffles), so that each lane holds 8 consecutive 16-bit elements and stores them as
//   one 16-byte vector: whole sectors, a quarter of the store instructions;
// - through SMEM by TMA (lowering's tma_store): the rows written by stmatrix into a 128-byte
//   swizzled staging buffer, stored by one thread while the next tile's MMAs run.
#include "emit/cuda/render.hpp"

namespace napkin::cuda {

std::string wide_store_condition(Context& c, const KernelChoice& kc, const GemmForm& g) {
  if (g.TN % 32 != 0) return "";
  std::string cond = "n_M == T_M && n_N == T_N && N_" + g.N + " % 8 == 0";
  for (const auto& o : kc.cost.outputs) {
    if (c.axes(o).empty() || c.axes(o).back() != g.N || dtype_bits(c.dtype(o)) != 16) return "";
    cond += " && reinterpret_cast<uintptr_t>(a." + o + ") % 16 == 0";
  }
  return cond;
}

namespace {
/** Emits one lane's pair of columns col, col + 1 (defined by the caller, with i_<M>) of each of
 *  `outputs` through the epilogue expressions, packed into `p_<o>[slot]`. */
void pack_pair(Code& code, Context& c, const KernelChoice& kc, const std::vector<std::string>& outputs, const GemmForm& g, const NodeOverride& over,
               const std::string& slot) {
  const Diagram& d = c.diagram();
  for (const auto& o : outputs) code.line("float v_" + o + "[2];");
  code.line("#pragma unroll");
  code.open("for (int q = 0; q < 2; ++q)");
  code.line("[[maybe_unused]] const int64_t i_" + g.N + " = o_" + g.N + " + col + q;");
  for (const auto& o : outputs) code.line("v_" + o + "[q] = " + c.value(*d.find_statement(o)->expr, over, kc.cost.statements) + ";");
  code.close();
  for (const auto& o : outputs) code.line("p_" + o + "[" + slot + "] = napkin::pack2<" + c.ctype_of(o) + ">(v_" + o + "[0], v_" + o + "[1]);");
}
}  // namespace

void gemm_pack_group(Code& code, Context& c, const KernelChoice& kc, const GemmForm& g, const std::function<std::string(std::size_t)>& acc) {
  const NodeOverride over = gemm_accumulators(g, acc);
  code.line("[[maybe_unused]] const int64_t i_" + g.M + " = o_" + g.M + " + row;");
  for (const auto& o : kc.cost.outputs) code.line("uint32_t p_" + o + "[4];  // packed pairs of " + o);
  code.line("#pragma unroll");
  code.open("for (int j = 0; j < 4; ++j)");
  code.line("const int nt = ng * 4 + j, col = nt * 8 + (lane % 4) * 2;");
  pack_pair(code, c, kc, kc.cost.outputs, g, over, "j");
  code.close();
  for (const auto& o : kc.cost.outputs) code.line("napkin::quad_transpose(p_" + o + ", lane);");
}

void gemm_pack_matrices(Code& code, Context& c, const KernelChoice& kc, const GemmForm& g, const std::function<std::string(std::size_t)>& acc,
                        const std::string& only) {
  const NodeOverride over = gemm_accumulators(g, acc);
  const std::vector<std::string> outputs = only.empty() ? kc.cost.outputs : std::vector<std::string>{only};
  for (const auto& o : outputs) code.line("uint32_t p_" + o + "[4];  // packed pairs of " + o + ", one per 8x8 matrix");
  code.line("#pragma unroll");
  code.open("for (int i = 0; i < 4; ++i)");
  code.line("const int nt = nt0 + i / 2, h = i % 2, row = row0 + h * 8 + lane / 4, col = nt * 8 + (lane % 4) * 2;");
  code.line("[[maybe_unused]] const int64_t i_" + g.M + " = o_" + g.M + " + row;");
  pack_pair(code, c, kc, outputs, g, over, "i");
  code.close();
}

void gemm_wide_store_epilogue(Code& code, Context& c, const KernelChoice& kc, const GemmForm& g,
                              const std::function<void(const std::function<void()>&)>& loops,
                              const std::function<std::string(std::size_t)>& acc, std::set<std::string>& stored) {
  code.line("// interior tile, 16-bit outputs with " + g.N + " innermost: each quad exchanges its pairs so that a lane stores 8 consecutive");
  code.line("// elements as one 16-byte vector (whole 32-byte sectors)");
  loops([&] {
    gemm_pack_group(code, c, kc, g, acc);
    code.line("const int64_t i_" + g.N + " = o_" + g.N + " + ng * 32 + (lane % 4) * 8;");
    for (const auto& o : kc.cost.outputs)
      code.line("*reinterpret_cast<uint4*>(a." + o + " + " + c.index(o) + ") = make_uint4(p_" + o + "[0], p_" + o + "[1], p_" + o + "[2], p_" + o + "[3]);");
  });
  stored.insert(kc.cost.outputs.begin(), kc.cost.outputs.end());
}

void gemm_tma_store_epilogue(Code& code, Context& c, const KernelChoice& kc, const GemmForm& g, const std::function<std::string(std::size_t)>& acc) {
  code.line("// through SMEM, stored by TMA while the next tile's MMAs run (named barrier 1 + cw: this warpgroup); each output in");
  code.line("// turn through the ring of staging buffers. At the array's edge the store writes only what lies inside it (CUDA C++");
  code.line("// Programming Guide, 'Using TMA to transfer multi-dimensional arrays': the out-of-bound part of a box is not written)");
  code.line("#pragma unroll");
  code.open("for (int cb = 0; cb < T_N / 64; ++cb)");
  for (const auto& out : kc.cost.outputs) {
    const std::string batch = tma_batch_coords(c, out, g.M, g.N);
    code.line("{");
    ++code.indent;
    code.line("unsigned char* const ob = out_stage + (sb % OUT_BUFS) * OUT_BYTES;  // " + out);
    code.line("if (t == 0) napkin::bulk_wait_read<OUT_BUFS - 1>();  // the store from this buffer OUT_BUFS stores ago has read it");
    code.line("napkin::named_sync(1 + cw, 128);");
    code.line("#pragma unroll");
    code.open("for (int ms = 0; ms < MS; ++ms)");
    code.line("const int row0 = r0 + ms * 64 + warp * 16;  // this warp's 16 rows of the m64 subtile, in the tile");
    code.line("// stmatrix: lanes 8i..8i+7 address the rows of matrix i (rows 8 (i % 2).., 16-byte chunk i / 2 of the pair), in this");
    code.line("// warpgroup's rows of the staging buffer (cw * WM on: with pingpong each stages its own tile)");
    code.line("const int srow = cw * WM - r0 + row0 + ((lane / 8) % 2) * 8 + lane % 8, schunk = lane / 16;");
    code.line("#pragma unroll");
    code.open("for (int j = 0; j < 4; ++j)");
    code.line("const int nt0 = cb * 8 + j * 2;  // 8-column blocks nt0, nt0 + 1: 16-byte chunks 2j, 2j + 1 of the block's rows");
    gemm_pack_matrices(code, c, kc, g, acc, out);
    code.line("// 16-byte chunk c of row r sits at c ^ (r % 8): each 8-row matrix hits 8 distinct 16-byte slots");
    code.line("napkin::stsm_x4(ob + srow * 128 + (((j * 2 + schunk) ^ (srow % 8)) * 16), p_" + out + "[0], p_" + out + "[1], p_" + out + "[2], p_" + out +
              "[3]);");
    code.close();
    code.close();
    code.line("napkin::fence_proxy_async();  // the writes, before the TMA store reads them");
    code.line("napkin::named_sync(1 + cw, 128);");
    code.open("if (t == 0)");
    code.line("napkin::tma_store(&tm_" + out + ", ob + cw * WM * 128, static_cast<int>(o_" + g.N + ") + cb * 64, static_cast<int>(o_" + g.M + ") + r0" +
              batch + ");");
    code.line("napkin::bulk_commit();");
    code.close();
    code.line("++sb;");
    code.close();
  }
  code.close();
}

}  // namespace napkin::cuda
