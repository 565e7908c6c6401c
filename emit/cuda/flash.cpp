// Strategy flash: S = f(contract(Q, K; d)), element-wise score maps, P = softmax(g(..); x) or no
// normaliser (P = g(..)), O = h(contract(P, V; x)) with x streamed (lower/flash_form.hpp):
// FlashAttention's loop, derived (paper §4, online softmax; a plain sum without one). Contract:
// see strategies.hpp. One renderer of the spec: each path lowering accepted (KernelSpec::path)
// is rendered by the same sequence (kernel head, grid decode, staging, prologue, stream loop,
// finalise and epilogue), which reads the path's atom and mover and calls their pieces:
// render_mma.cpp (the atom's fragments and issue), render_staging.cpp (the mover),
// render_score.cpp (the score chain and the lemma's update per fragment layout),
// render_lemma.cpp, render_epilogue.cpp, render_grid.cpp, render_launch.cpp.
// - mma.sync on cp.async (FlashAttention-2): one thread block per (q tile, batch index); its
//   WARPS warps own 16 * MT rows of q each; Q's tile is loaded once into registers (ldmatrix);
//   per chunk of x, K and V arrive by cp.async into double buffers (K of the next chunk loads
//   during this chunk's softmax, V during the next S), S = Q K^T and O += P V run on mma.sync.
// - wgmma on TMA (sm_90a, picked at run time; FlashAttention-3 §3.1): warpgroup 0 is the producer
//   (one thread loads the Q tile once and streams K and V chunks by TMA, 128-byte swizzled boxes,
//   into two-stage rings guarded by full/empty mbarriers); each consumer warpgroup owns 64 rows of
//   q: per chunk S = Q K^T is one wgmma.m64n<T_X>k16 per 16 of dk with Q and K in SMEM, P is packed
//   to 16 bits as wgmma's A operand and O += P V (V N-major in SMEM) is issued one chunk late so
//   that it runs during the next chunk's softmax; two consumer warpgroups take turns at the tensor
//   cores (named barriers, FA3's ping-pong).
// - 8-bit operands (fp8e4m3, fp8e5m2) have the wgmma path alone (k32 atoms, 128 elements per
//   swizzle row, V stored with x innermost so that O += P V reads it K-major; P rounded to the
//   8-bit type and exchanged in the quad into the k32 A fragment, fp8.cuh acc_to_a_fp8); where it
//   cannot run the launcher fails with the reason.
// S, P, the running max m and sum l never leave registers. Causal masks skip the chunks past the
// tile's last row.
#include "emit/cuda/preamble.hpp"
#include "emit/cuda/render.hpp"

namespace napkin::cuda {

namespace {

/** One path of the flash spec being rendered. */
struct FlashKernel {
  Context& c;
  const KernelChoice& kc;
  const FlashForm& f;
  KernelPath path;
  FlashLemma lemma;
  Code& k;
};

/** mma.sync on cp.async: the plan's comment, the kernel's namespace opened, its compile-time
 *  constants (tile sizes, warps, SMEM layout: Q's tile, then K and V double buffers, rows padded by
 *  16 bytes; the lemma's constants), and the kernel opened. */
void head_cp_async(const FlashKernel& fk) {
  Code& k = fk.k;
  const FlashForm& f = fk.f;
  const std::int64_t TQ = f.TQ, TX = f.TX, DK = f.DK, DV = f.DV;
  const int warps = f.warps;
  k.line(describe_plan(fk.kc.plan));
  k.line("// strategy flash: q = " + f.M + " (group " + std::to_string(TQ) + ", " + std::to_string(warps) + " warps x " + std::to_string(TQ / warps) +
         " rows), " + f.x + " " + f.x_note + (f.normaliser_lemma.empty() ? " with no normaliser (associative sum); " : " with the online-softmax lemma; ") + f.dk +
         " = " + std::to_string(DK) + " and " + f.dv + " = " + std::to_string(DV) + " whole (compile-time)");
  k.line("// " + f.S->name + " and " + f.P->name + " live in registers only; " + fk.path.atom->ptx);
  k.open("namespace " + kernel_ns(fk.kc.plan.name));
  k.line("using T = " + ctype(f.dtype) + ";");
  k.line("constexpr int T_Q = " + std::to_string(TQ) + ", T_X = " + std::to_string(TX) + ", D_K = " + std::to_string(DK) + ", D_V = " +
         std::to_string(DV) + ";");
  k.line("constexpr int WARPS = " + std::to_string(warps) + ", THREADS = WARPS * 32, MT = T_Q / (16 * WARPS);");
  k.line("constexpr int P_Q = D_K + 8, P_K = D_K + 8, P_V = D_V + 8;  // SMEM rows padded by 16 bytes");
  k.line("constexpr int OFF_K = T_Q * P_Q, OFF_V = OFF_K + 2 * T_X * P_K;  // Q tile, then K and V double buffers");
  k.line("constexpr size_t SMEM_BYTES = sizeof(T) * (OFF_V + 2 * T_X * P_V);");
  fk.lemma.constants(k);
  k.line("");
  k.line("__global__ void __launch_bounds__(THREADS) kernel(const Args a) {");
  ++k.indent;
  fk.c.declare_sizes(k);
  k.line("extern __shared__ __align__(16) unsigned char smem_raw[];");
  k.line("T* smem = reinterpret_cast<T*>(smem_raw);");
  k.line("const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;");
  if (!f.skip) k.line("// grid: tiles of " + f.M + " (fastest: consecutive blocks share K and V in L2) x " + join(f.batch));
}

/** The wgmma path alone (8-bit operands: no mma.sync): the plan's comment, the kernel's namespace
 *  opened and the compile-time constants the wgmma variant reads (tile sizes, the lemma's). */
void head_constants(const FlashKernel& fk) {
  Code& k = fk.k;
  const FlashForm& f = fk.f;
  k.line(describe_plan(fk.kc.plan));
  k.line("// strategy flash: q = " + f.M + " (group " + std::to_string(f.TQ) + "), " + f.x + " " + f.x_note +
         (f.normaliser_lemma.empty() ? " with no normaliser (associative sum); " : " with the online-softmax lemma; ") + f.dk + " = " + std::to_string(f.DK) +
         " and " + f.dv + " = " + std::to_string(f.DV) + " whole (compile-time)");
  k.line("// no mma.sync variant: " + std::string(dtype_name(f.dtype)) + " operands run on wgmma alone (sm_90a); " + f.Vn + " is read with " + f.x +
         " innermost (K-major B of O += P V); P is rounded to " + std::string(dtype_name(f.dtype)) + " before it");
  k.open("namespace " + kernel_ns(fk.kc.plan.name));
  k.line("using T = " + ctype(f.dtype) + ";");
  k.line("constexpr int T_Q = " + std::to_string(f.TQ) + ", T_X = " + std::to_string(f.TX) + ", D_K = " + std::to_string(f.DK) + ", D_V = " +
         std::to_string(f.DV) + ";");
  fk.lemma.constants(k);
}

/** wgmma on TMA: namespace `wg` (inside the kernel's) opened, the atoms' wrappers, the warpgroup
 *  roles and the SMEM layout (Q, the K and V rings, the mbarriers), and the kernel (taking the
 *  operands' tensor maps) opened. */
void head_tma(const FlashKernel& fk, const WgmmaAtoms& atoms) {
  Code& k = fk.k;
  const FlashForm& f = fk.f;
  const int consumers = f.warps / 4;
  k.line("// wgmma variant (sm_90a): warpgroup 0 loads Q once and K, V chunks by TMA into 2-stage rings; " + std::to_string(consumers) +
         " consumer warpgroup(s) x 64 rows of " + f.M);
  k.line("// S = Q K^T and O += P V on wgmma (P from registers), online softmax in registers");
  k.open("namespace wg");
  k.text += atoms.functions;
  k.line("constexpr int CONSUMERS = " + std::to_string(consumers) + ", THREADS = (CONSUMERS + 1) * 128;");
  const std::string es = flash_fp8(f) ? "" : " * 2";  // bytes per element
  k.line("constexpr int Q_BYTES = T_Q * D_K" + es + ", K_BYTES = T_X * D_K" + es + ", V_BYTES = T_X * D_V" + es + ";");
  k.line("constexpr int OFF_K = Q_BYTES, OFF_V = OFF_K + 2 * K_BYTES, OFF_BAR = OFF_V + 2 * V_BYTES;  // SMEM bytes: Q, K ring, V ring, barriers");
  k.line("constexpr size_t SMEM_BYTES = OFF_BAR + 16 * sizeof(uint64_t) + 1024;  // + alignment");
  k.line("__global__ void __launch_bounds__(THREADS, 1) kernel(const Args a, const __grid_constant__ CUtensorMap tm_" + f.Qn +
         ", const __grid_constant__ CUtensorMap tm_" + f.Kn + ", const __grid_constant__ CUtensorMap tm_" + f.Vn + ") {");
  ++k.indent;
  k.line("#if defined(__CUDA_ARCH_FEAT_SM90_ALL)");
  fk.c.declare_sizes(k);
  k.line("extern __shared__ __align__(1024) unsigned char smem_raw[];");
  k.line("unsigned char* smem = napkin::align_smem_1024(smem_raw);  // in the shared window (LDS/STS through it)");
  k.line("uint64_t* bar = reinterpret_cast<uint64_t*>(smem + OFF_BAR);");
  k.line("uint64_t *q_full = bar, *k_full = bar + 1, *k_empty = bar + 3, *v_full = bar + 5, *v_empty = bar + 7;");
}

/** The prologue and the state: with cp.async, Q and the first chunks staged and Q's fragments
 *  loaded (mma.sync); with TMA, the consumer warpgroups' roles and their wait for Q. Then O's
 *  accumulator in the atom's layout and the lemma's running state. */
void prologue(const FlashKernel& fk) {
  Code& k = fk.k;
  if (fk.path.mover == Mover::cp_async) {
    flash_cp_async_prologue(k);
    mma_sync_q_fragments(k);
    k.line("float O_reg[MT][D_V / 8][4] = {};  // registers: O accumulator (unnormalised)");
    fk.lemma.init(k);
    return;
  }
  k.line("// consumer warpgroups: rows cw * 64 .. cw * 64 + 63 of the q tile");
  k.line("napkin::setmaxnreg_inc<240>();");
  k.line("const int cw = threadIdx.x / 128 - 1, warp = threadIdx.x % 128 / 32, lane = threadIdx.x % 32;");
  k.line("float O_reg[D_V / 2] = {};  // registers: O accumulator (unnormalised), m16n8 tiles");
  fk.lemma.init(k);
  if (flash_fp8(fk.f))
    k.line("uint32_t P_reg[T_X / 32][4];  // registers: P of the previous chunk in 8 bits (rounded to T), k32 wgmma A fragments");
  else
    k.line("uint32_t P_reg[T_X / 16][4];  // registers: P of the previous chunk in 16 bits, wgmma A fragments");
  k.line("napkin::mbar_wait(q_full, 0);");
}

/** The stream loop of mma.sync on cp.async: per chunk, K's stage, S = Q K^T, the scores with the
 *  lemma's update, V's stage, O += P V, the next V. */
void stream_uniform(const FlashKernel& fk) {
  Code& k = fk.k;
  k.open("for (int64_t kc = 0; kc < chunks; ++kc)");
  flash_cp_async_k_stage(k);
  mma_sync_scores(k, *fk.path.atom);
  flash_scores_fragments(k, fk.c, fk.f, fk.lemma);
  flash_cp_async_v_stage(k);
  mma_sync_pv(k, *fk.path.atom);
  flash_cp_async_next_v(k);
  k.close();
  k.line("napkin::cp_async_wait<0>();");
}

/** One chunk of a consumer warpgroup on wgmma: the issue, the scores with the lemma's update,
 *  then (after the first) the previous P V's completion (V's stage released) and O's deferred
 *  rescaling, and P packed to 16 bits as the next O += P V's A operand. */
void consumer_chunk(const FlashKernel& fk, const WgmmaAtoms& atoms, const WarpgroupScores& scores, bool first) {
  Code& k = fk.k;
  atoms.issue(k, first);
  scores.render(k, fk.lemma);
  if (!first) {
    k.line("napkin::wgmma_wait<0>();  // O += P_{kc-1} V_{kc-1} is done: V's stage is free, O and P_reg may change");
    k.line("napkin::fence_regs(O_reg);");
    k.line("napkin::mbar_arrive(&v_empty[sp]);");
    fk.lemma.rescale_o(k);
  }
  atoms.pack_p(k);
}

/** The stream loop of the consumer warpgroups on wgmma (software-pipelined: chunk kc issues S_kc,
 *  then O += P_{kc-1} V_{kc-1}, and runs the lemma on S_kc while the latter is in flight); the
 *  first chunk peeled off (no wgmma under a run-time condition), then the last P V. */
void stream_warp_specialised(const FlashKernel& fk, const WgmmaAtoms& atoms) {
  Code& k = fk.k;
  k.line("// ping-pong (FlashAttention-3 §3.1): the two consumer warpgroups take turns issuing their MMAs, so one's softmax");
  k.line("// runs while the other's MMAs occupy the tensor cores. Named barrier 1 + w: warpgroup w may issue.");
  k.line("if (CONSUMERS == 2 && cw == 1) napkin::named_arrive(1, 256);  // warpgroup 0 goes first");
  k.line("// software pipeline: chunk kc issues S_kc and then O += P_{kc-1} V_{kc-1}; the softmax of S_kc overlaps the latter.");
  k.line("// Chunk 0 is peeled off so that no wgmma is issued under a run-time condition (ptxas would serialise them).");
  const WarpgroupScores scores(fk.c, fk.f);
  k.open("");
  k.line("const int64_t kc = 0;  // chunks >= 1: the launcher runs this variant only for N_" + fk.f.x + " > 0");
  consumer_chunk(fk, atoms, scores, true);
  k.close();
  k.open("for (int64_t kc = 1; kc < chunks; ++kc)");
  consumer_chunk(fk, atoms, scores, false);
  k.close();
  k.open("");
  k.line("// the last chunk's O += P V");
  k.line("const int sp = static_cast<int>((chunks - 1) % 2);");
  k.line("napkin::mbar_wait(&v_full[sp], static_cast<unsigned>(((chunks - 1) / 2) & 1));");
  k.line("napkin::fence_regs(O_reg);");
  k.line("napkin::wgmma_fence();");
  atoms.pv(k, "sp");
  k.line("napkin::wgmma_wait<0>();");
  k.line("napkin::fence_regs(O_reg);");
  k.line("napkin::mbar_arrive(&v_empty[sp]);");
  k.close();
  k.line("if (CONSUMERS == 2 && cw == 0) napkin::named_sync(1, 256);  // matches warpgroup 1's last turn");
}

/** The kernel of one path, in one sequence: head, grid decode, the mover's staging, prologue and
 *  state, stream loop, the lemma's finalise and O's epilogue. */
void flash_kernel(Context& c, const KernelChoice& kc, const KernelPath& path, Code& k) {
  const FlashForm& f = *kc.cost.spec->flash;
  const FlashKernel fk{c, kc, f, path, flash_lemma(c, f, path), k};
  const bool tma = path.mover == Mover::tma;
  std::optional<WgmmaAtoms> atoms;
  if (path.wgmma()) atoms.emplace(*path.atom, f);
  if (tma) head_tma(fk, *atoms);
  else head_cp_async(fk);
  flash_tile_origin(k, f);
  if (!tma) flash_cp_async_operands(k, c, f);
  flash_chunks(k, f);
  if (tma) flash_tma_ring(k, c, f);
  else flash_cp_async_loaders(k, f);
  prologue(fk);
  if (path.wgmma()) stream_warp_specialised(fk, *atoms);
  else stream_uniform(fk);
  if (path.wgmma()) flash_epilogue_pairs(k, c, f, fk.lemma, kc.cost.outputs);
  else flash_epilogue_fragments(k, c, f, fk.lemma, kc.cost.outputs);
  if (tma) k.line("#endif");
  --k.indent;
  k.line("}");
}

}  // namespace

KernelEmit emit_flash(Context& c, const KernelChoice& kc) {
  const KernelSpec& spec = *kc.cost.spec;
  const FlashForm& f = *spec.flash;
  const std::string ns = kernel_ns(kc.plan.name);
  Code k;
  if (spec.mma_sync) {
    flash_kernel(c, kc, spec.path(false), k);
  } else {  // 8-bit operands: the wgmma path alone (lower.cpp lower_flash)
    NAPKIN_ASSERT(spec.wgmma) << "a flash kernel without an mma.sync path must have the wgmma path (lower.cpp)";
    head_constants(FlashKernel{c, kc, f, spec.path(true), flash_lemma(c, f, spec.path(true)), k});
  }
  KernelEmit r;
  r.strategy = "flash";
  r.stored.insert(kc.cost.outputs.begin(), kc.cost.outputs.end());  // O and the row statistics (lower/flash_form.hpp)
  Code l;
  flash_launch_blocks(l, f, ns);
  auto wgmma_variant = [&](const std::string& fallback) {
    KernelEmit wg;
    Code w;
    flash_kernel(c, kc, spec.path(true), w);
    w.close("  // namespace wg");
    wg.device_code = w.text;
    const auto row = static_cast<std::uint32_t>(flash_swizzle_row_elems(f));  // a box's columns: one 128-byte swizzle row
    std::vector<TmaOperand> ops{{f.Qn, f.dk, f.M, row, static_cast<std::uint32_t>(f.TQ)},
                                {f.Kn, f.dk, f.x, row, static_cast<std::uint32_t>(f.TX)},
                                f.v_x_inner ? TmaOperand{f.Vn, f.x, f.dv, row, static_cast<std::uint32_t>(f.DV)}
                                            : TmaOperand{f.Vn, f.dv, f.x, 64, static_cast<std::uint32_t>(f.TX)}};
    for (auto& op : ops) op.repack = repack_buffer(kc, op.array);  // where TMA cannot read it in place (lower.cpp)
    wg.launch_code = tma_launch(c, ns, ops, f.dtype, fallback, "a.N_" + f.x + " > 0");
    return wg;
  };
  add_path_variants(r, k, l, spec, ns,
                    "this " + std::string(dtype_name(f.dtype)) +
                        " attention runs on the sm_90a wgmma path alone: it needs a Hopper GPU, a binary built for sm_90a, 16-byte-aligned arrays and N_" + f.x +
                        " > 0",
                    wgmma_variant);
  if (spec.wgmma) r.buffers = repack_buffers(c, kc);
  k.close("  // namespace " + ns);
  r.device_code = k.text;
  r.launch_code = l.text;
  return r;
}

}  // namespace napkin::cuda
