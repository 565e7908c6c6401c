// The sm_90a variant of strategy flash (contract: flash_form.hpp): the same loop as flash.cpp
// (online softmax, or a plain sum over x without a normaliser) on wgmma, warp-specialised as in
// FlashAttention-3 (Shah et al. 2024, §3.1) without its ping-pong scheduling. Warpgroup 0 is
// the producer: one thread loads the Q tile once and
// streams K and V chunks by TMA (128-byte swizzled boxes, zero fill past the ends) into two-stage
// rings guarded by full/empty mbarriers. Each consumer warpgroup owns 64 rows of q: per chunk,
// S = Q K^T is one wgmma.m64n<T_X>k16 per 16 of dk with Q and K in SMEM; the online softmax runs
// on S in registers (the accumulator layout is m16n8 tiles per warp, PTX ISA 9.7.15.5.1.1); P is
// packed to 16 bits in registers as wgmma's A operand, and O += P V is one wgmma.m64n<D_V>k16 per
// 16 of x with V in SMEM (N-major), issued one chunk late so that it runs during the next chunk's
// softmax; the two consumer warpgroups take turns at the tensor cores (named barriers, FA3's
// ping-pong). S, P, m, l and O never leave registers.
#include "emit/cuda/flash_form.hpp"
#include "emit/cuda/preamble.hpp"

namespace napkin::cuda {

namespace {

/** The score chain in a consumer warpgroup, with 32-bit offsets inside the tile: c_rel (column of
 *  the chunk) and r_rel (row of the warpgroup's 64). A causal(M, x) mask is x <= M, that is
 *  c_rel - r_rel <= diag with diag = o_M + cw * 64 - kc * T_X (clamped per chunk); in an interior
 *  chunk (every key valid, every column at or left of every row's diagonal) the mask is dropped.
 *  Arrays the score map reads (masks, biases: not staged in tiles) are read against their extents
 *  at the edge (rows past N_M, keys past N_x), unbounded in an interior chunk whose warpgroup rows
 *  and keys are all in range. `causal`: set where the map has such a mask. */
ScoreChain consumer_score_chain(Context& c, const FlashForm& f, bool& causal) {
  const std::string &M = f.M, &x = f.x;
  auto is_causal_mask = [&](const Expr& e) {
    return e.kind == Expr::Kind::apply && e.op == Op::mask && is_plain_causal(*e.args[1]) && e.args[1]->axes == AxisList{M, x};
  };
  NodeOverride over_causal = [&](const Expr& e) -> std::optional<std::string> {
    if (&e == f.cs) return std::string("sacc[nt * 4 + e]");
    if (!is_plain_causal(e) || e.axes != AxisList{M, x}) return std::nullopt;  // a window: the general value
    causal = true;
    return std::string("(c_rel - r_rel <= diag ? 1.0f : 0.0f)");
  };
  NodeOverride over_interior;
  over_interior = [&](const Expr& e) -> std::optional<std::string> {
    if (&e == f.cs) return std::string("sacc[nt * 4 + e]");
    if (is_causal_mask(e)) return c.value(*e.args[0], over_interior, f.inlined);
    return std::nullopt;
  };
  return score_chain(c, f, over_causal, over_interior);
}

/** A consumer warpgroup's walk over the chunks of x (software-pipelined: chunk kc issues S_kc,
 *  then O += P_{kc-1} V_{kc-1}, and runs the lemma on S_kc while the latter is in flight). */
struct Consumer {
  Context& c;
  const FlashForm& f;
  const FlashLemma& lemma;
  Code& k;
  std::string s_name, o_name;  ///< the wgmma wrappers of S = Q K^T and O += P V
  bool causal = false;
  ScoreChain chain;

  /** The loops over the thread's elements of S: the score `value`, keys past the chunk's end
   *  (`masked`) set to the lemma's fill, each folded into the lemma's chunk max. */
  void elements(const std::string& value, bool masked) {
    const std::string &M = f.M, &x = f.x;
    k.line("#pragma unroll");
    k.open("for (int nt = 0; nt < T_X / 8; ++nt)");
    k.line("#pragma unroll");
    k.open("for (int e = 0; e < 4; ++e)");
    k.line("const int c_rel = nt * 8 + (lane % 4) * 2 + e % 2, r_rel = warp * 16 + lane / 4 + (e / 2) * 8;");
    k.line("const int64_t i_" + M + " = o_" + M + " + cw * 64 + r_rel, i_" + x + " = kc * T_X + c_rel;");
    k.line("(void)i_" + M + ", (void)i_" + x + ", (void)r_rel;");
    k.line("const float v = " + value + ";");
    k.line(masked ? "sacc[nt * 4 + e] = c_rel < x_left ? v : " + lemma.fill() + ";" : "sacc[nt * 4 + e] = v;");
    lemma.element(k);
    k.close();
    k.close();
  }

  /** The chunk's MMAs: wait for K (and, after the first chunk, the previous V), issue S = Q K^T and
   *  the previous chunk's O += P V in this warpgroup's turn, wait for S and free K's stage. */
  void issue(bool first) {
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
    if (!first) {
      k.line("#pragma unroll");
      k.line("for (int kk = 0; kk < T_X / 16; ++kk)");
      k.line("  " + o_name + "<1>(o, pa[kk], napkin::smem_desc(smem + OFF_V + sp * V_BYTES + kk * 16 * 128, T_X * 128, 1024));");
      k.line("napkin::wgmma_commit();");
    }
    k.line("if (CONSUMERS == 2) napkin::named_arrive(2 - cw, 256);  // the other warpgroup's turn");
    k.line(first ? "napkin::wgmma_wait<0>();" : "napkin::wgmma_wait<1>();  // S_kc is done; P V may still run");
    k.line("napkin::fence_regs(sacc);");
    k.line("napkin::mbar_arrive(&k_empty[s]);  // K of this stage is consumed");
  }

  /** The score chain over the chunk's elements (an interior chunk without bounds or mask, where the
   *  map has any), then the lemma's update. */
  void scores() {
    const std::string &score = chain.bounded, &score_interior = chain.interior;
    score_comment(k, f);
    lemma.chunk_begin(k);
    k.line("const int x_left = static_cast<int>(min(int64_t{T_X}, N_" + f.x + " - kc * T_X));  // valid keys in the chunk");
    if (score_interior == score) {
      elements(score, true);
    } else {
      std::string interior = "x_left == T_X";
      if (causal) {
        k.line("const int diag = static_cast<int>(max(int64_t{-64}, min(int64_t{T_X}, o_" + f.M + " + cw * 64 - kc * T_X)));");
        interior += " && diag >= T_X - 1";
      }
      if (chain.reads_rows) interior += " && n_q >= (cw + 1) * 64";
      k.open("if (" + interior + ")");
      k.line(std::string("// interior chunk: no key past the end") + (causal ? ", every key at or before every row's diagonal" : "") +
             (chain.reads_rows ? ", every row of the warpgroup in range" : ""));
      elements(score_interior, false);
      k.close(" else {");
      ++k.indent;
      elements(score, true);
      k.close();
    }
    lemma.update(k, f.P->name);
  }

  /** One chunk: issue, scores, then (after the first) the previous P V's completion and O's
   *  deferred rescaling, and P packed to 16 bits as the next O += P V's A operand. */
  void chunk(bool first) {
    issue(first);
    scores();
    if (!first) {
      k.line("napkin::wgmma_wait<0>();  // O += P_{kc-1} V_{kc-1} is done: V's stage is free, O and pa may change");
      k.line("napkin::fence_regs(o);");
      k.line("napkin::mbar_arrive(&v_empty[sp]);");
      lemma.rescale_o(k);
    }
    k.line("#pragma unroll");
    k.open("for (int nt = 0; nt < T_X / 8; ++nt)");
    k.line("pa[nt / 2][(nt % 2) * 2] = napkin::pack2<T>(sacc[nt * 4], sacc[nt * 4 + 1]);");
    k.line("pa[nt / 2][(nt % 2) * 2 + 1] = napkin::pack2<T>(sacc[nt * 4 + 2], sacc[nt * 4 + 3]);");
    k.close();
  }

  /** The chunks (the first peeled off: no wgmma under a run-time condition) and the last P V. */
  void walk() {
    k.open("");
    k.line("const int64_t kc = 0;  // chunks >= 1: the launcher runs this variant only for N_" + f.x + " > 0");
    chunk(true);
    k.close();
    k.open("for (int64_t kc = 1; kc < chunks; ++kc)");
    chunk(false);
    k.close();
    k.open("");
    k.line("// the last chunk's O += P V");
    k.line("const int sp = static_cast<int>((chunks - 1) % 2);");
    k.line("napkin::mbar_wait(&v_full[sp], static_cast<unsigned>(((chunks - 1) / 2) & 1));");
    k.line("napkin::fence_regs(o);");
    k.line("napkin::wgmma_fence();");
    k.line("#pragma unroll");
    k.line("for (int kk = 0; kk < T_X / 16; ++kk)");
    k.line("  " + o_name + "<1>(o, pa[kk], napkin::smem_desc(smem + OFF_V + sp * V_BYTES + kk * 16 * 128, T_X * 128, 1024));");
    k.line("napkin::wgmma_commit();");
    k.line("napkin::wgmma_wait<0>();");
    k.line("napkin::fence_regs(o);");
    k.line("napkin::mbar_arrive(&v_empty[sp]);");
    k.close();
  }
};

}  // namespace

KernelEmit emit_flash_wgmma(Context& c, const KernelChoice& kc, const FlashForm& f, const std::string& fallback_launch) {
  const MmaShape* mma = &*kc.cost.spec->wgmma_mma;  // lowering accepted the variant (lower/flash_form.cpp flash_wgmma_fits)
  const int consumers = f.warps / 4;
  std::string s_name, o_name;
  const std::string s_fn = wgmma_function(*mma, static_cast<int>(f.TX), false, s_name);
  const std::string o_fn = wgmma_function(*mma, static_cast<int>(f.DV), true, o_name);
  const std::string &M = f.M, &x = f.x;
  // the lemma's state once per warp (one m16 tile); O rescaled after its wgmma, rows 0 and 1 of each n8 tile
  const FlashLemma lemma(f, false, "sacc[nt * 4 + e]",
                         "for (int nt = 0; nt < D_V / 8; ++nt) o[nt * 4] *= corr[0], o[nt * 4 + 1] *= corr[0], o[nt * 4 + 2] *= corr[1], o[nt * 4 + 3] *= corr[1];", true);

  Code k;
  k.line("// wgmma variant (sm_90a): warpgroup 0 loads Q once and K, V chunks by TMA into 2-stage rings; " + std::to_string(consumers) +
         " consumer warpgroup(s) x 64 rows of " + M);
  k.line("// S = Q K^T and O += P V on wgmma (P from registers), online softmax in registers");
  k.open("namespace wg");
  k.text += s_fn + o_fn;
  k.line("constexpr int CONSUMERS = " + std::to_string(consumers) + ", THREADS = (CONSUMERS + 1) * 128;");
  k.line("constexpr int Q_BYTES = T_Q * D_K * 2, K_BYTES = T_X * D_K * 2, V_BYTES = T_X * D_V * 2;");
  k.line("constexpr int OFF_K = Q_BYTES, OFF_V = OFF_K + 2 * K_BYTES, OFF_BAR = OFF_V + 2 * V_BYTES;  // SMEM bytes: Q, K ring, V ring, barriers");
  k.line("constexpr size_t SMEM_BYTES = OFF_BAR + 16 * sizeof(uint64_t) + 1024;  // + alignment");
  k.line("__global__ void __launch_bounds__(THREADS, 1) kernel(const Args a, const __grid_constant__ CUtensorMap tm_" + f.Qn +
         ", const __grid_constant__ CUtensorMap tm_" + f.Kn + ", const __grid_constant__ CUtensorMap tm_" + f.Vn + ") {");
  ++k.indent;
  k.line("#if defined(__CUDA_ARCH_FEAT_SM90_ALL)");
  c.declare_sizes(k);
  k.line("extern __shared__ __align__(1024) unsigned char smem_raw[];");
  k.line("unsigned char* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) / 1024 * 1024);");
  k.line("uint64_t* bar = reinterpret_cast<uint64_t*>(smem + OFF_BAR);");
  k.line("uint64_t *q_full = bar, *k_full = bar + 1, *k_empty = bar + 3, *v_full = bar + 5, *v_empty = bar + 7;");
  flash_tile_origin(k, f, f.skip);  // causal: the tiles with the most chunks first, so the short ones fill the last wave
  flash_chunks(k, f);
  flash_tma_ring(k, c, f);
  k.line("// consumer warpgroups: rows cw * 64 .. cw * 64 + 63 of the q tile");
  k.line("napkin::setmaxnreg_inc<240>();");
  k.line("const int cw = threadIdx.x / 128 - 1, warp = threadIdx.x % 128 / 32, lane = threadIdx.x % 32;");
  k.line("float o[D_V / 2] = {};           // registers: O accumulator (unnormalised), m16n8 tiles");
  lemma.init(k);
  k.line("uint32_t pa[T_X / 16][4];       // registers: P of the previous chunk in 16 bits, wgmma A fragments");
  k.line("napkin::mbar_wait(q_full, 0);");
  k.line("// ping-pong (FlashAttention-3 §3.1): the two consumer warpgroups take turns issuing their MMAs, so one's softmax");
  k.line("// runs while the other's MMAs occupy the tensor cores. Named barrier 1 + w: warpgroup w may issue.");
  k.line("if (CONSUMERS == 2 && cw == 1) napkin::named_arrive(1, 256);  // warpgroup 0 goes first");
  k.line("// software pipeline: chunk kc issues S_kc and then O += P_{kc-1} V_{kc-1}; the softmax of S_kc overlaps the latter.");
  k.line("// Chunk 0 is peeled off so that no wgmma is issued under a run-time condition (ptxas would serialise them).");
  Consumer consumer{c, f, lemma, k, s_name, o_name, false, {}};
  consumer.chain = consumer_score_chain(c, f, consumer.causal);
  consumer.walk();
  k.line("if (CONSUMERS == 2 && cw == 0) napkin::named_sync(1, 256);  // matches warpgroup 1's last turn");
  flash_epilogue_pairs(k, c, f, lemma);
  k.line("#endif");
  --k.indent;
  k.line("}");
  k.close("  // namespace wg");
  KernelEmit r;
  r.strategy = "flash";
  r.hopper = true;
  r.stored.insert(f.O->name);
  r.device_code = k.text;
  std::vector<TmaOperand> ops{{f.Qn, f.dk, M, 64, static_cast<std::uint32_t>(f.TQ)},
                              {f.Kn, f.dk, x, 64, static_cast<std::uint32_t>(f.TX)},
                              {f.Vn, f.dv, x, 64, static_cast<std::uint32_t>(f.TX)}};
  r.launch_code = tma_launch(c, kernel_ns(kc.plan.name), ops, f.dtype, fallback_launch, "a.N_" + x + " > 0");
  return r;
}

}  // namespace napkin::cuda
