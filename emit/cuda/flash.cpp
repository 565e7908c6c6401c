// Strategy flash: S = f(contract(Q, K; d)), element-wise score maps, P = softmax(g(..); x) or no
// normaliser (P = g(..)), O = h(contract(P, V; x)) with x streamed (lower/flash_form.hpp):
// FlashAttention-2's loop, derived (paper §4, online softmax; a plain sum without one). Contract: see
// strategies.hpp. One thread block per (q tile, batch index); its WARPS warps own 16 * MT rows
// of q each; Q's tile is loaded once into registers (ldmatrix); per chunk of x, K and V arrive by
// cp.async into double buffers (K of the next chunk loads during this chunk's softmax, V during
// the next S), S = Q K^T and O += P V run on mma.sync, and S, P, the running max m and sum l
// never leave registers. Causal masks skip the chunks past the tile's last row. Where the hardware
// has wgmma and TMA, emit_flash_wgmma (flash_wgmma.cpp) adds the sm_90a variant, picked at run time.
#include <algorithm>

#include "emit/cuda/flash_form.hpp"
#include "emit/cuda/preamble.hpp"

namespace napkin::cuda {

namespace {

/** The plan's comment, the kernel's namespace opened, and its compile-time constants: tile sizes,
 *  warps, SMEM layout (Q's tile, then K and V double buffers, rows padded by 16 bytes), the
 *  lemma's constants. */
void kernel_head(Code& k, const KernelChoice& kc, const FlashForm& f, const MmaShape& mma, const FlashLemma& lemma) {
  const std::string &x = f.x, &M = f.M, &dk = f.dk, &dv = f.dv, &x_note = f.x_note;
  const std::int64_t TQ = f.TQ, TX = f.TX, DK = f.DK, DV = f.DV;
  const int warps = f.warps;
  k.line(describe_plan(kc.plan));
  k.line("// strategy flash: q = " + M + " (group " + std::to_string(TQ) + ", " + std::to_string(warps) + " warps x " + std::to_string(TQ / warps) +
         " rows), " + x + " " + x_note + (f.normaliser_lemma.empty() ? " with no normaliser (associative sum); " : " with the online-softmax lemma; ") + dk + " = " + std::to_string(DK) + " and " + dv +
         " = " + std::to_string(DV) + " whole (compile-time)");
  k.line("// " + f.S->name + " and " + f.P->name + " live in registers only; " + mma.ptx);
  k.open("namespace " + kernel_ns(kc.plan.name));
  k.line("using T = " + ctype(f.dtype) + ";");
  k.line("constexpr int T_Q = " + std::to_string(TQ) + ", T_X = " + std::to_string(TX) + ", D_K = " + std::to_string(DK) + ", D_V = " +
         std::to_string(DV) + ";");
  k.line("constexpr int WARPS = " + std::to_string(warps) + ", THREADS = WARPS * 32, MT = T_Q / (16 * WARPS);");
  k.line("constexpr int P_Q = D_K + 8, P_K = D_K + 8, P_V = D_V + 8;  // SMEM rows padded by 16 bytes");
  k.line("constexpr int OFF_K = T_Q * P_Q, OFF_V = OFF_K + 2 * T_X * P_K;  // Q tile, then K and V double buffers");
  k.line("constexpr size_t SMEM_BYTES = sizeof(T) * (OFF_V + 2 * T_X * P_V);");
  lemma.constants(k);
  k.line("");
}

/** Per chunk, after S = Q K^T: per m16 tile of the warp, the score chain element by element
 *  (the arrays it reads bounded at the tile's edge, unbounded in an interior chunk of a full
 *  tile), keys past N_x given the lemma's fill, then the lemma's update. */
void score_tile(Code& k, Context& c, const FlashForm& f, const FlashLemma& lemma) {
  const std::string &x = f.x, &M = f.M;
  const Expr* cs = f.cs;
  // Score values: P's argument with S inlined, the contraction overridden by the accumulator. The
  // arrays it reads (masks, biases: not staged in tiles) are read against their extents (rows past
  // N_M, keys past N_x), except in an interior chunk of a full tile, where every index is in range.
  NodeOverride over_s = [&](const Expr& e) -> std::optional<std::string> {
    if (&e == cs) return std::string("s[mt][nt][e]");
    return std::nullopt;
  };
  const bool softmax = lemma.softmax();
  const ScoreChain chain = score_chain(c, f, over_s);
  const std::string &score = chain.value, &score_bounded = chain.bounded;
  score_comment(k, f);
  if (score_bounded != score)
    k.line("const bool interior = " + std::string(chain.reads_rows ? "n_q == T_Q && " : "") + "(kc + 1) * T_X <= N_" + x + ";  // every index the score map reads in range");
  k.line("#pragma unroll");
  k.open("for (int mt = 0; mt < MT; ++mt)");
  lemma.chunk_begin(k);
  auto elements = [&](const std::string& value) {
    k.line("#pragma unroll");
    k.open("for (int nt = 0; nt < T_X / 8; ++nt)");
    k.line("#pragma unroll");
    k.open("for (int e = 0; e < 4; ++e)");
    k.line("const int64_t i_" + M + " = o_" + M + " + warp * (T_Q / WARPS) + mt * 16 + lane / 4 + (e / 2) * 8;");
    k.line("const int64_t i_" + x + " = kc * T_X + nt * 8 + (lane % 4) * 2 + e % 2;");
    k.line("(void)i_" + M + ";");
    k.line("const float v = " + value + ";");
    k.line("s[mt][nt][e] = i_" + x + " < N_" + x + " ? v : " + lemma.fill() + (softmax ? ";" : ";  // P, no normaliser"));
    lemma.element(k);
    k.close();
    k.close();
  };
  if (score_bounded == score) {
    elements(score);
  } else {
    k.open("if (interior)");
    elements(score);
    k.close(" else {");
    ++k.indent;
    elements(score_bounded);
    k.close();
  }
  lemma.update(k, f.P->name);
  k.close();
}

/** O += P V on mma.sync: P's accumulator layout is the A fragment layout of the next mma
 *  (FlashAttention-2), packed to 16 bits; V's fragments transposed by ldmatrix. */
void pv_mma(Code& k, const std::string& mf) {
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

}  // namespace

KernelEmit emit_flash(Context& c, const KernelChoice& kc) {
  const KernelSpec& spec = *kc.cost.spec;
  const FlashForm& f = *spec.flash;
  const MmaShape* mma = &*spec.mma_sync;
  const std::string ns = kernel_ns(kc.plan.name), mf = "napkin::" + mma_function(*mma);
  // the lemma's state per m16 tile of the warp; O rescaled with l, row h of each n8 tile
  const FlashLemma lemma(f, true, "s[mt][nt][e]", "for (int nt = 0; nt < D_V / 8; ++nt) o[mt][nt][2 * h] *= corr, o[mt][nt][2 * h + 1] *= corr;", false);
  Code k;
  kernel_head(k, kc, f, *mma, lemma);
  k.line("__global__ void __launch_bounds__(THREADS) kernel(const Args a) {");
  ++k.indent;
  c.declare_sizes(k);
  k.line("extern __shared__ __align__(16) unsigned char smem_raw[];");
  k.line("T* smem = reinterpret_cast<T*>(smem_raw);");
  k.line("const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;");
  k.line("// grid: tiles of " + f.M + " (fastest: consecutive blocks share K and V in L2) x " + join(f.batch));
  flash_tile_origin(k, f, false);
  flash_cp_async_operands(k, c, f);
  flash_chunks(k, f);
  flash_cp_async_loaders(k, f);
  k.line("// prologue: Q and the first K chunk (one cp.async group), the first V chunk (another)");
  k.line("napkin::load_tile<T_Q, D_K, P_Q, THREADS>(smem, g_Q, rs_Q, n_q, D_K, vec);");
  k.line("if (chunks > 0) load_k(0);");
  k.line("napkin::cp_async_commit();");
  k.line("if (chunks > 0) load_v(0);");
  k.line("napkin::cp_async_commit();");
  k.line("napkin::cp_async_wait<1>();");
  k.line("__syncthreads();");
  k.line("uint32_t qf[MT][D_K / 16][4];  // registers: this warp's rows of Q as mma A fragments");
  k.line("#pragma unroll");
  k.line("for (int mt = 0; mt < MT; ++mt)");
  k.line("#pragma unroll");
  k.line("  for (int kk = 0; kk < D_K / 16; ++kk) napkin::frag_a(qf[mt][kk], smem, P_Q, warp * (T_Q / WARPS) + mt * 16, kk * 16, lane);");
  k.line("float o[MT][D_V / 8][4] = {};  // registers: O accumulator (unnormalised)");
  lemma.init(k);
  k.open("for (int64_t kc = 0; kc < chunks; ++kc)");
  k.line("napkin::cp_async_wait<1>();  // K of chunk kc has landed");
  k.line("__syncthreads();");
  k.line("if (kc + 1 < chunks) load_k(kc + 1);  // next K into the other buffer, during this chunk");
  k.line("napkin::cp_async_commit();");
  k.line("const T* sK = smem + OFF_K + (kc % 2) * T_X * P_K;");
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
  score_tile(k, c, f, lemma);
  k.line("napkin::cp_async_wait<1>();  // V of chunk kc has landed");
  k.line("__syncthreads();");
  k.line("const T* sV = smem + OFF_V + (kc % 2) * T_X * P_V;");
  pv_mma(k, mf);
  k.line("if (kc + 1 < chunks) load_v(kc + 1);  // next V into the other buffer, during the next S");
  k.line("napkin::cp_async_commit();");
  k.close();
  k.line("napkin::cp_async_wait<0>();");
  flash_epilogue_fragments(k, c, f, lemma);
  --k.indent;
  k.line("}");
  KernelEmit r;
  r.strategy = "flash";
  r.stored.insert(f.O->name);
  Code l;
  flash_launch_blocks(l, f, ns);
  add_hopper_variant(r, k, l, spec, ns, [&](const std::string& fallback) { return emit_flash_wgmma(c, kc, f, fallback); });
  k.close("  // namespace " + ns);
  r.device_code = k.text;
  r.launch_code = l.text;
  return r;
}

}  // namespace napkin::cuda
