// The MMA atoms of the flash renderer (contract: render.hpp): per atom of the spec's path, its
// register fragments and its issue. mma.sync (warp scope): Q's fragments loaded once by ldmatrix,
// S = Q K^T and O += P V per m16n8k16 tile with P repacked from S's accumulators. wgmma
// (warpgroup scope): S = Q K^T with both operands in SMEM, O += P V with P from registers, issued
// in the warpgroup's turn, one chunk late (software pipelining) so that it overlaps the softmax.
#include <set>

#include "emit/cuda/preamble.hpp"
#include "emit/cuda/render.hpp"

namespace napkin::cuda {

FlashLemma flash_lemma(Context& c, const FlashForm& f, const KernelPath& p) {
  const std::string scale = flash_scale_value(c, f);
  if (p.wgmma())  // the state once per warp (one m16 tile); O rescaled after its wgmma, rows 0 and 1 of each n8 tile
    return FlashLemma(f, false, "S_reg[nt * 4 + e]",
                      "for (int nt = 0; nt < D_V / 8; ++nt) O_reg[nt * 4] *= corr[0], O_reg[nt * 4 + 1] *= corr[0], O_reg[nt * 4 + 2] *= corr[1], O_reg[nt * 4 + 3] *= corr[1];", true,
                      scale);
  // the state per m16 tile of the warp; O rescaled with l, row h of each n8 tile
  return FlashLemma(f, true, "S_reg[mt][nt][e]", "for (int nt = 0; nt < D_V / 8; ++nt) O_reg[mt][nt][2 * h] *= corr, O_reg[mt][nt][2 * h + 1] *= corr;", false, scale);
}

void mma_sync_q_fragments(Code& k) {
  k.line("uint32_t Q_reg[MT][D_K / 16][4];  // registers: this warp's rows of Q as mma A fragments");
  k.line("#pragma unroll");
  k.line("for (int mt = 0; mt < MT; ++mt)");
  k.line("#pragma unroll");
  k.line("  for (int kk = 0; kk < D_K / 16; ++kk) napkin::frag_a(Q_reg[mt][kk], smem, P_Q, warp * (T_Q / WARPS) + mt * 16, kk * 16, lane);");
}

void mma_sync_scores(Code& k, const MmaShape& mma) {
  const std::string mf = "napkin::" + mma_function(mma);
  k.line("float S_reg[MT][T_X / 8][4] = {};  // registers: S = Q K^T for this chunk");
  k.line("#pragma unroll");
  k.open("for (int kk = 0; kk < D_K / 16; ++kk)");
  k.line("#pragma unroll");
  k.open("for (int nt = 0; nt < T_X / 16; ++nt)");
  k.line("uint32_t K_reg[4];");
  k.line("napkin::frag_b(K_reg, K_smem, P_K, nt * 16, kk * 16, lane);");
  k.line("#pragma unroll");
  k.line("for (int mt = 0; mt < MT; ++mt) " + mf + "(S_reg[mt][2 * nt], Q_reg[mt][kk], K_reg), " + mf + "(S_reg[mt][2 * nt + 1], Q_reg[mt][kk], K_reg + 2);");
  k.close();
  k.close();
}

void mma_sync_pv(Code& k, const MmaShape& mma) {
  const std::string mf = "napkin::" + mma_function(mma);
  k.line("// O += P V: P's accumulator layout is the A fragment layout of the next mma (FlashAttention-2)");
  k.line("#pragma unroll");
  k.open("for (int kk = 0; kk < T_X / 16; ++kk)");
  k.line("uint32_t P_reg[MT][4];");
  k.line("#pragma unroll");
  k.open("for (int mt = 0; mt < MT; ++mt)");
  k.line("P_reg[mt][0] = napkin::pack2<T>(S_reg[mt][2 * kk][0], S_reg[mt][2 * kk][1]);");
  k.line("P_reg[mt][1] = napkin::pack2<T>(S_reg[mt][2 * kk][2], S_reg[mt][2 * kk][3]);");
  k.line("P_reg[mt][2] = napkin::pack2<T>(S_reg[mt][2 * kk + 1][0], S_reg[mt][2 * kk + 1][1]);");
  k.line("P_reg[mt][3] = napkin::pack2<T>(S_reg[mt][2 * kk + 1][2], S_reg[mt][2 * kk + 1][3]);");
  k.close();
  k.line("#pragma unroll");
  k.open("for (int nt = 0; nt < D_V / 16; ++nt)");
  k.line("uint32_t V_reg[4];");
  k.line("napkin::frag_b_t(V_reg, V_smem, P_V, nt * 16, kk * 16, lane);");
  k.line("#pragma unroll");
  k.line("for (int mt = 0; mt < MT; ++mt) " + mf + "(O_reg[mt][2 * nt], P_reg[mt], V_reg), " + mf + "(O_reg[mt][2 * nt + 1], P_reg[mt], V_reg + 2);");
  k.close();
  k.close();
}

WgmmaAtoms::WgmmaAtoms(const MmaShape& mma, const FlashForm& f)
    : k_step(mma.k), row(flash_swizzle_row_elems(f)), esize(dtype_bits(f.dtype) / 8), v_x_inner(f.v_x_inner), fp8(flash_fp8(f)) {
  functions = wgmma_function(mma, static_cast<int>(f.TX), false, s_name);
  functions += wgmma_function(mma, static_cast<int>(f.DV), true, o_name);
}

void WgmmaAtoms::pv(Code& k, const std::string& stage) const {
  const std::string ks = std::to_string(k_step);
  // the stage's descriptor once; each k step advances it by a constant (wgmma.cuh desc_advance)
  k.line("const uint64_t dV = napkin::smem_desc(smem + OFF_V + " + stage + " * V_BYTES, " + (v_x_inner ? "16" : "T_X * 128") + ", 1024);");
  k.line("#pragma unroll");
  k.line("for (int kk = 0; kk < T_X / " + ks + "; ++kk)");
  if (v_x_inner)  // V [T_X / row blocks][D_V rows][row]: K-major, a k step advances k_step elements inside the swizzle row
    k.line("  " + o_name + "<0>(O_reg, P_reg[kk], napkin::desc_advance(dV, (kk * " + ks + " / " + std::to_string(row) + ") * D_V * 128 + (kk * " + ks +
           " % " + std::to_string(row) + ")" + (esize == 1 ? "" : " * " + std::to_string(esize)) + "));");
  else  // V [D_V / 64 blocks][T_X rows][64]: N-major (transposed B), a k16 step is 16 rows of 128 bytes
    k.line("  " + o_name + "<1>(O_reg, P_reg[kk], napkin::desc_advance(dV, kk * 16 * 128));");
  k.line("napkin::wgmma_commit();");
}

void WgmmaAtoms::issue(Code& k, bool first) const {
  const std::string ks = std::to_string(k_step), rs = std::to_string(row), es = esize == 1 ? "" : " * " + std::to_string(esize);
  k.line("const int s = static_cast<int>(kc % 2), sp = static_cast<int>((kc + 1) % 2);");
  k.line("(void)sp;");
  k.line("float S_reg[T_X / 2];  // registers: S = Q K^T for this chunk, not zeroed: its first k step overwrites it (scale_d = 0)");
  k.line("napkin::mbar_wait(&k_full[s], static_cast<unsigned>((kc / 2) & 1));");
  if (!first) k.line("napkin::mbar_wait(&v_full[sp], static_cast<unsigned>(((kc - 1) / 2) & 1));");
  k.line("if (CONSUMERS == 2) napkin::named_sync(1 + cw, 256);");
  k.line("napkin::fence_regs(S_reg);");
  k.line("napkin::fence_regs(O_reg);");
  k.line("napkin::wgmma_fence();");
  k.line("const uint64_t dQ = napkin::smem_desc(smem + cw * 64 * 128, 16, 1024), dK = napkin::smem_desc(smem + OFF_K + s * K_BYTES, 16, 1024);");
  k.line("#pragma unroll");
  k.line("for (int kk = 0; kk < D_K; kk += " + ks + ")");
  k.line("  " + s_name + "<0, 0>(S_reg, napkin::desc_advance(dQ, (kk / " + rs + ") * T_Q * 128 + (kk % " + rs + ")" + es + "),");
  k.line("      napkin::desc_advance(dK, (kk / " + rs + ") * T_X * 128 + (kk % " + rs + ")" + es + "), kk > 0);");
  k.line("napkin::wgmma_commit();");
  if (!first) pv(k, "sp");
  k.line("if (CONSUMERS == 2) napkin::named_arrive(2 - cw, 256);  // the other warpgroup's turn");
  k.line(first ? "napkin::wgmma_wait<0>();" : "napkin::wgmma_wait<1>();  // S_kc is done; P V may still run");
  k.line("napkin::fence_regs(S_reg);");
  k.line("napkin::mbar_arrive(&k_empty[s]);  // K of this stage is consumed");
}

void WgmmaAtoms::pack_p(Code& k) const {
  k.line("#pragma unroll");
  if (fp8) {  // the k32 A fragment of 8-bit wgmma is not the accumulator's layout: a quad exchange (fp8.cuh)
    k.line("for (int kb = 0; kb < T_X / 32; ++kb) napkin::acc_to_a_fp8<T>(S_reg + kb * 16, P_reg[kb], lane);");
    return;
  }
  k.open("for (int nt = 0; nt < T_X / 8; ++nt)");
  k.line("P_reg[nt / 2][(nt % 2) * 2] = napkin::pack2<T>(S_reg[nt * 4], S_reg[nt * 4 + 1]);");
  k.line("P_reg[nt / 2][(nt % 2) * 2 + 1] = napkin::pack2<T>(S_reg[nt * 4 + 2], S_reg[nt * 4 + 3]);");
  k.close();
}

namespace {
std::string contraction(const GemmForm& g, std::size_t i) {
  return "contract(" + g.gemms[i].a.array + ", " + g.gemms[i].b.array + "; " + join(g.gemms[i].node->axes) + ")";
}
}  // namespace

void gemm_accumulators_declare(Code& code, const GemmForm& g, const KernelPath& p, int joint_first) {
  const std::string acc_t = is_integer_dtype(g.dtype) ? "int32_t" : "float";  // int8: int32 accumulators (mma.sync m16n8k32, wgmma .s32.s8.s8)
  if (!p.wgmma()) {
    for (std::size_t i = 0; i < g.gemms.size(); ++i) code.line(acc_t + " acc" + std::to_string(i) + "[MT][NT][4] = {};  // registers: " + contraction(g, i));
  } else if (joint_first >= 0) {
    code.line(acc_t + " acc0[MS][T_N] = {};  // registers: " + contraction(g, static_cast<std::size_t>(joint_first)) + " in columns [0, T_N), " +
              contraction(g, static_cast<std::size_t>(1 - joint_first)) + " in [T_N, 2 T_N)");
  } else {
    for (std::size_t i = 0; i < g.gemms.size(); ++i) code.line(acc_t + " acc" + std::to_string(i) + "[MS][T_N / 2] = {};  // registers: " + contraction(g, i));
  }
}

void gemm_mma_sync_step(Code& code, const GemmForm& g, const MmaShape& mma) {
  const std::string frag = dtype_bits(g.dtype) == 8 ? "8" : "";  // fragments of 8-bit elements (frag8.cuh)
  code.line("#pragma unroll");
  code.open("for (int kk = 0; kk < T_K; kk += " + std::to_string(mma.k) + ")");
  std::set<std::string> loaded;
  for (const auto& gc : g.gemms) {
    if (loaded.insert(gc.a.array).second) {
      code.line("uint32_t fa_" + gc.a.array + "[MT][4];");
      code.line("#pragma unroll");
      code.line("for (int mt = 0; mt < MT; ++mt) napkin::frag_a" + frag + std::string(gc.a.k_inner ? "" : "_t") + "(fa_" + gc.a.array + "[mt], s + OFF_" +
                gc.a.array + ", P_" + gc.a.array + ", warp * WM + mt * 16, kk, lane);");
    }
    if (loaded.insert(gc.b.array).second) {
      code.line("uint32_t fb_" + gc.b.array + "[NT / 2][4];");
      code.line("#pragma unroll");
      code.line("for (int nt = 0; nt < NT / 2; ++nt) napkin::frag_b" + frag + std::string(gc.b.k_inner ? "" : "_t") + "(fb_" + gc.b.array + "[nt], s + OFF_" +
                gc.b.array + ", P_" + gc.b.array + ", nt * 16, kk, lane);");
    }
  }
  code.line("#pragma unroll");
  code.open("for (int mt = 0; mt < MT; ++mt)");
  code.line("#pragma unroll");
  code.open("for (int nt = 0; nt < NT; ++nt)");
  for (std::size_t i = 0; i < g.gemms.size(); ++i)
    code.line("napkin::" + mma_function(mma) + "(acc" + std::to_string(i) + "[mt][nt], fa_" + g.gemms[i].a.array + "[mt], &fb_" + g.gemms[i].b.array +
              "[nt / 2][(nt % 2) * 2]);");
  code.close();
  code.close();
  code.close();
}

void gemm_wgmma_fence(Code& code, std::size_t accumulators) {
  code.line("#pragma unroll");
  code.open("for (int ms = 0; ms < MS; ++ms)");
  for (std::size_t i = 0; i < accumulators; ++i) code.line("napkin::fence_regs(acc" + std::to_string(i) + "[ms]);");
  code.close();
}

std::vector<std::int64_t> gemm_issue_atoms(const GemmForm& g, int joint_first) {
  return joint_first >= 0 ? std::vector<std::int64_t>{2 * g.TN} : gemm_wgmma_atoms(g);
}

void gemm_wgmma_issue(Code& code, const GemmForm& g, const MmaShape& mma, int joint_first, const std::map<std::int64_t, std::string>& wg_names) {
  const bool joint = joint_first >= 0;
  const std::size_t accs = joint ? 1 : g.gemms.size();
  gemm_wgmma_fence(code, accs);
  code.line("napkin::wgmma_fence();");
  code.line("#pragma unroll");
  code.open("for (int kk = 0; kk < T_K; kk += " + std::to_string(mma.k) + ")");
  const std::string row = std::to_string(gemm_swizzle_row_elems(g.dtype)), esize = std::to_string(dtype_bits(g.dtype) / 8);
  auto desc = [&](const GemmOperand& o, bool is_a) {
    const std::string R = is_a ? "T_M" : "T_N";
    const std::string row0 = is_a ? "(r0 + ms * 64)" : "0";
    if (o.k_inner)  // [T_K/row blocks][R rows][row]: advance 32 bytes per MMA k step inside the swizzle atom
      return "napkin::smem_desc(st + OFF_" + o.array + " + (kk / " + row + ") * " + R + " * 128 + " + row0 + " * 128 + (kk % " + row + ") * " + esize +
             ", 16, 1024)";
    // [R/64 blocks][T_K rows][64]: a k16 step is 16 rows of 128 bytes; blocks T_K * 128 bytes apart
    return "napkin::smem_desc(st + OFF_" + o.array + " + " + row0 + " / 64 * T_K * 128 + kk * 128, T_K * 128, 1024)";
  };
  std::set<std::string> described;
  for (std::size_t i = 0; i < g.gemms.size(); ++i)
    if ((!joint || static_cast<int>(i) == joint_first) && described.insert(g.gemms[i].b.array).second)
      code.line("const uint64_t db_" + g.gemms[i].b.array + " = " + desc(g.gemms[i].b, false) + ";" + (joint ? "  // and the B tile after it: N = 2 T_N" : ""));
  code.line("#pragma unroll");
  code.open("for (int ms = 0; ms < MS; ++ms)");
  code.line("const uint64_t da = " + desc(g.gemms[0].a, true) + ";");
  // A T_N wider than one wgmma N: atoms side by side (gemm_wgmma_atoms), each on the B rows (or
  // 64-column blocks) from its first column on and on the accumulator registers from half that
  // (the m64nN register layout is n8 blocks in order, so the atoms' registers concatenate to T_N's).
  const std::vector<std::int64_t> atoms = gemm_issue_atoms(g, joint_first);
  for (std::size_t i = 0; i < g.gemms.size(); ++i) {
    if (joint && static_cast<int>(i) != joint_first) continue;
    const std::string ta = std::string("<") + (g.gemms[i].a.k_inner ? "0" : "1") + ", " + (g.gemms[i].b.k_inner ? "0" : "1") + ">";
    const std::string acc = "acc" + std::to_string(joint ? 0 : i) + "[ms]", db = "db_" + g.gemms[i].b.array;
    if (atoms.size() == 1) {
      code.line(wg_names.at(atoms[0]) + ta + "(" + acc + ", da, " + db + ");");
      continue;
    }
    std::int64_t col = 0;
    for (std::int64_t n : atoms) {
      const std::string b_off = g.gemms[i].b.k_inner ? std::to_string(col * 128) : std::to_string(col / 64) + " * T_K * 128";
      code.line(wg_names.at(n) + ta + "(napkin::atom_slice<" + std::to_string(n / 2) + ">(" + acc + ", " + std::to_string(col / 2) + "), da, napkin::desc_advance(" + db + ", " +
                b_off + "));");
      col += n;
    }
  }
  code.close();
  code.close();
  code.line("napkin::wgmma_commit();");
  gemm_wgmma_fence(code, accs);
  code.line("napkin::wgmma_wait<1>();  // the MMAs of the tile's previous chunk are done: release its stage");
}

}  // namespace napkin::cuda
