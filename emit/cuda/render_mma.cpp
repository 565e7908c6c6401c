// The MMA atoms of the flash renderer (contract: render.hpp): per atom of the spec's path, its
// register fragments and its issue. mma.sync (warp scope): Q's fragments loaded once by ldmatrix,
// S = Q K^T and O += P V per m16n8k16 tile with P repacked from S's accumulators. wgmma
// (warpgroup scope): S = Q K^T with both operands in SMEM, O += P V with P from registers, issued
// in the warpgroup's turn, one chunk late (software pipelining) so that it overlaps the softmax.
#include "emit/cuda/preamble.hpp"
#include "emit/cuda/render.hpp"

namespace napkin::cuda {

FlashLemma flash_lemma(const FlashForm& f, const KernelPath& p) {
  if (p.wgmma())  // the state once per warp (one m16 tile); O rescaled after its wgmma, rows 0 and 1 of each n8 tile
    return FlashLemma(f, false, "sacc[nt * 4 + e]",
                      "for (int nt = 0; nt < D_V / 8; ++nt) o[nt * 4] *= corr[0], o[nt * 4 + 1] *= corr[0], o[nt * 4 + 2] *= corr[1], o[nt * 4 + 3] *= corr[1];", true);
  // the state per m16 tile of the warp; O rescaled with l, row h of each n8 tile
  return FlashLemma(f, true, "s[mt][nt][e]", "for (int nt = 0; nt < D_V / 8; ++nt) o[mt][nt][2 * h] *= corr, o[mt][nt][2 * h + 1] *= corr;", false);
}

void mma_sync_q_fragments(Code& k) {
  k.line("uint32_t qf[MT][D_K / 16][4];  // registers: this warp's rows of Q as mma A fragments");
  k.line("#pragma unroll");
  k.line("for (int mt = 0; mt < MT; ++mt)");
  k.line("#pragma unroll");
  k.line("  for (int kk = 0; kk < D_K / 16; ++kk) napkin::frag_a(qf[mt][kk], smem, P_Q, warp * (T_Q / WARPS) + mt * 16, kk * 16, lane);");
}

void mma_sync_scores(Code& k, const MmaShape& mma) {
  const std::string mf = "napkin::" + mma_function(mma);
  k.line("float s[MT][T_X / 8][4] = {};  // registers: S = Q K^T for this chunk");
  k.line("#pragma unroll");
  k.open("for (int kk = 0; kk < D_K / 16; ++kk)");
  k.line("#pragma unroll");
  k.open("for (int nt = 0; nt < T_X / 16; ++nt)");
  k.line("uint32_t kb[4];");
  k.line("napkin::frag_b(kb, sK, P_K, nt * 16, kk * 16, lane);");
  k.line("#pragma unroll");
  k.line("for (int mt = 0; mt < MT; ++mt) " + mf + "(s[mt][2 * nt], qf[mt][kk], kb), " + mf + "(s[mt][2 * nt + 1], qf[mt][kk], kb + 2);");
  k.close();
  k.close();
}

void mma_sync_pv(Code& k, const MmaShape& mma) {
  const std::string mf = "napkin::" + mma_function(mma);
  k.line("// O += P V: P's accumulator layout is the A fragment layout of the next mma (FlashAttention-2)");
  k.line("#pragma unroll");
  k.open("for (int kk = 0; kk < T_X / 16; ++kk)");
  k.line("uint32_t pa[MT][4];");
  k.line("#pragma unroll");
  k.open("for (int mt = 0; mt < MT; ++mt)");
  k.line("pa[mt][0] = napkin::pack2<T>(s[mt][2 * kk][0], s[mt][2 * kk][1]);");
  k.line("pa[mt][1] = napkin::pack2<T>(s[mt][2 * kk][2], s[mt][2 * kk][3]);");
  k.line("pa[mt][2] = napkin::pack2<T>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);");
  k.line("pa[mt][3] = napkin::pack2<T>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);");
  k.close();
  k.line("#pragma unroll");
  k.open("for (int nt = 0; nt < D_V / 16; ++nt)");
  k.line("uint32_t vb[4];");
  k.line("napkin::frag_b_t(vb, sV, P_V, nt * 16, kk * 16, lane);");
  k.line("#pragma unroll");
  k.line("for (int mt = 0; mt < MT; ++mt) " + mf + "(o[mt][2 * nt], pa[mt], vb), " + mf + "(o[mt][2 * nt + 1], pa[mt], vb + 2);");
  k.close();
  k.close();
}

WgmmaAtoms::WgmmaAtoms(const MmaShape& mma, const FlashForm& f) {
  functions = wgmma_function(mma, static_cast<int>(f.TX), false, s_name);
  functions += wgmma_function(mma, static_cast<int>(f.DV), true, o_name);
}

void WgmmaAtoms::pv(Code& k, const std::string& stage) const {
  k.line("#pragma unroll");
  k.line("for (int kk = 0; kk < T_X / 16; ++kk)");
  k.line("  " + o_name + "<1>(o, pa[kk], napkin::smem_desc(smem + OFF_V + " + stage + " * V_BYTES + kk * 16 * 128, T_X * 128, 1024));");
  k.line("napkin::wgmma_commit();");
}

void WgmmaAtoms::issue(Code& k, bool first) const {
  k.line("const int s = static_cast<int>(kc % 2), sp = static_cast<int>((kc + 1) % 2);");
  k.line("(void)sp;");
  k.line("float sacc[T_X / 2] = {};    // registers: S = Q K^T for this chunk");
  k.line("napkin::mbar_wait(&k_full[s], static_cast<unsigned>((kc / 2) & 1));");
  if (!first) k.line("napkin::mbar_wait(&v_full[sp], static_cast<unsigned>(((kc - 1) / 2) & 1));");
  k.line("if (CONSUMERS == 2) napkin::named_sync(1 + cw, 256);");
  k.line("napkin::fence_regs(sacc);");
  k.line("napkin::fence_regs(o);");
  k.line("napkin::wgmma_fence();");
  k.line("#pragma unroll");
  k.line("for (int kk = 0; kk < D_K; kk += 16)");
  k.line("  " + s_name + "<0, 0>(sacc, napkin::smem_desc(smem + (kk / 64) * T_Q * 128 + cw * 64 * 128 + (kk % 64) * 2, 16, 1024),");
  k.line("      napkin::smem_desc(smem + OFF_K + s * K_BYTES + (kk / 64) * T_X * 128 + (kk % 64) * 2, 16, 1024));");
  k.line("napkin::wgmma_commit();");
  if (!first) pv(k, "sp");
  k.line("if (CONSUMERS == 2) napkin::named_arrive(2 - cw, 256);  // the other warpgroup's turn");
  k.line(first ? "napkin::wgmma_wait<0>();" : "napkin::wgmma_wait<1>();  // S_kc is done; P V may still run");
  k.line("napkin::fence_regs(sacc);");
  k.line("napkin::mbar_arrive(&k_empty[s]);  // K of this stage is consumed");
}

void WgmmaAtoms::pack_p(Code& k) const {
  k.line("#pragma unroll");
  k.open("for (int nt = 0; nt < T_X / 8; ++nt)");
  k.line("pa[nt / 2][(nt % 2) * 2] = napkin::pack2<T>(sacc[nt * 4], sacc[nt * 4 + 1]);");
  k.line("pa[nt / 2][(nt % 2) * 2 + 1] = napkin::pack2<T>(sacc[nt * 4 + 2], sacc[nt * 4 + 3]);");
  k.close();
}

}  // namespace napkin::cuda
