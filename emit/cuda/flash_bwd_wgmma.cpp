// The sm_90a variant of the flash_bwd kernel (contract: flash_bwd_parts.hpp): wgmma on TMA, as
// FlashAttention-3 runs its backward (Shah et al. 2024, §3; warp specialisation §3.1).
// Warpgroup 0 is the producer: thread 0 loads the resident operands' tiles once and streams the
// streamed operands' chunks of Q by TMA, 128-byte swizzled boxes of 64 columns, into a ring of
// FlashBwdForm::wg_stages stages guarded by full/empty mbarriers; where the maps read column
// vectors (lse, D), its warp's lanes load them into the same stage (fp32), so no consumer waits
// on global memory between its wgmma issues. Each consumer warpgroup owns 64 rows of X. Per
// chunk it issues every tile contraction at once (S^T = K Q^T: wgmma.m64n<T_Q>k16, the resident
// rows as A and the streamed chunk as B, both K-major in SMEM), then in dataflow order waits for
// each and runs its element-wise map on the accumulator (the m16n8 layout of the mma.sync path:
// the maps, stores and epilogue are shared), unmasked where it reads registers only. A tile
// retires after the last map that reads it: its columns past N_Q zeroed, each output it feeds
// accumulated from registers (dV += P^T dO: the tile packed to 16 bits as wgmma's A operand, the
// chunk as an N-major B: one TMA box serves as K-major B of the tile contractions and N-major B
// of the outputs), and its store: stmatrix into swizzled staging, each consumer warpgroup its
// own rows, synchronised by its own named barrier, then a TMA store.
#include "emit/cuda/flash_bwd_parts.hpp"
#include "emit/cuda/preamble.hpp"

namespace napkin::cuda::bwd {

namespace {

/** `name`[MT][N / 8][4] (MT = 1) seen as the float[N / 2] accumulator of a wgmma m64nN. */
std::string acc_view(const std::string& name, const std::string& n_cols) {
  return "*reinterpret_cast<float (*)[" + n_cols + " / 2]>(&" + name + "[0][0][0])";
}

/** The wgmma atoms of the kernel: one SS wrapper of N = T_Q for the tile contractions, one RS
 *  wrapper per distinct output width E. */
struct BwdAtoms {
  std::string functions, tile_fn;
  std::map<std::int64_t, std::string> out_fn;
};

BwdAtoms atoms(const BwdKernel& b) {
  BwdAtoms a;
  a.functions = wgmma_function(b.mma, static_cast<int>(b.f.TQ), false, a.tile_fn);
  for (const auto& o : b.f.outputs)
    if (!a.out_fn.count(o.E)) a.functions += wgmma_function(b.mma, static_cast<int>(o.E), true, a.out_fn[o.E]);
  return a;
}

/** Namespace `wg` opened, the atoms, the roles and the SMEM layout (bytes): the resident tiles
 *  [W / 64 boxes][T_X rows][64], two stages of each streamed chunk [W / 64][T_Q][64], the staging
 *  tiles (as on mma.sync), the mbarriers; the kernel (taking the operands' tensor maps) opened. */
void wg_head(const BwdKernel& b, const BwdAtoms& at) {
  Code& k = b.k;
  const FlashBwdForm& f = b.f;
  k.line("// wgmma variant (sm_90a): warpgroup 0 loads the resident tiles once and streams the chunks of " + f.Q + " by TMA (" + n(f.wg_stages) + "-stage ring); " +
         n(f.warps / 4) + " consumer warpgroup(s) x 64 rows of " + f.X);
  k.line("// tile contractions on wgmma with both operands in SMEM; accumulated outputs on wgmma with the tile from registers");
  k.open("namespace wg");
  k.text += at.functions;
  k.line("constexpr int CONSUMERS = WARPS / 4, THREADS = (CONSUMERS + 1) * 128, STAGES = " + n(b.f.wg_stages) + ";  // the ring of streamed chunks");
  std::string off = "0", res = "0", chunk = "0";
  for (const auto& o : f.operands) {
    const std::string B = "B_" + o.array, rows = o.streamed ? "T_Q" : "T_X";
    k.line("constexpr int " + B + " = " + rows + " * W_" + o.array + " * static_cast<int>(sizeof(T)), OFF_" + o.array + " = " + off + ";  // " +
           (o.streamed ? "streamed, STAGES x " : "resident ") + "[W / 64][" + rows + "][64], 128-byte swizzled: " + o.array);
    off = "OFF_" + o.array + " + " + (o.streamed ? "STAGES * " : "") + B;
    (o.streamed ? chunk : res) += " + " + B;
  }
  for (const auto& t : f.tiles)
    if (t.swizzled) {
      const std::string name = t.s->name;
      k.line("constexpr int ST_BYTES_" + name + " = T_Q * 64 * static_cast<int>(sizeof(T)), OFF_ST_" + name + " = " + off + ";  // staging of " + name +
             ", per consumer warpgroup: " + (t.x_inner ? "[T_Q][64]" : "[T_Q / 64][64][64]") + ", 128-byte swizzled (a TMA box)");
      k.line("static_assert(OFF_ST_" + name + " % 1024 == 0, \"swizzled staging aligned to the swizzle atom\");");
      off = "OFF_ST_" + name + " + CONSUMERS * ST_BYTES_" + name;
    } else if (t.staged) {
      const std::string rows = t.x_inner ? "T_Q" : "T_X";
      k.line("constexpr int OFF_ST_" + t.s->name + " = " + off + ";  // staging [" + rows + "][P_ST_" + t.s->name + "] of " + t.s->name);
      off = "OFF_ST_" + t.s->name + " + " + rows + " * P_ST_" + t.s->name + " * static_cast<int>(sizeof(T))";
    }
  for (const auto& a : f.col_vectors) {
    k.line("constexpr int OFF_COL_" + a + " = " + off + ";  // STAGES x [T_Q] fp32: " + a + " at the chunk's columns of " + f.Q + " (the producer warp's loads)");
    off = "OFF_COL_" + a + " + STAGES * T_Q * 4";
  }
  k.line("constexpr int OFF_BAR = (" + off + " + 7) / 8 * 8;");
  k.line("[[maybe_unused]] constexpr int RES_BYTES = " + res + ", CHUNK_BYTES = " + chunk + ";  // bytes each TMA phase brings");
  k.line("constexpr size_t SMEM_BYTES = OFF_BAR + (1 + 2 * STAGES) * sizeof(uint64_t) + 1024;  // + alignment");
  std::string maps;
  for (const auto& o : f.operands) maps += ", const __grid_constant__ CUtensorMap tm_" + o.array;
  for (const auto& t : f.tiles)
    if (t.tma_store) maps += ", const __grid_constant__ CUtensorMap tm_" + t.s->name;
  k.line("__global__ void __launch_bounds__(THREADS, 1) kernel(const Args a" + maps + ") {");
  ++k.indent;
  k.line("#if defined(__CUDA_ARCH_FEAT_SM90_ALL)");
  b.c.declare_sizes(k);
  k.line("extern __shared__ __align__(1024) unsigned char smem_raw[];");
  k.line("unsigned char* smem = napkin::align_smem_1024(smem_raw);  // in the shared window (LDS/STS through it)");
  k.line("uint64_t* bar = reinterpret_cast<uint64_t*>(smem + OFF_BAR);");
  k.line("uint64_t *res_full = bar, *full = bar + 1, *empty = bar + 1 + STAGES;");
}

/** The barriers' initialisation and the producer warpgroup: the resident boxes once, then per
 *  chunk of the tile's range its stage (once the consumers released it) and its boxes. */
void producer(const BwdKernel& b) {
  Code& k = b.k;
  const FlashBwdForm& f = b.f;
  const bool warp = !f.col_vectors.empty();  // a producer warp: thread 0's TMA loads and the lanes' column vectors
  k.open("if (threadIdx.x == 0)");
  k.line("napkin::mbar_init(res_full, 1);");
  k.line(std::string("for (int s = 0; s < STAGES; ++s) napkin::mbar_init(&full[s], ") + (warp ? "1 + 32" : "1") + "), napkin::mbar_init(&empty[s], CONSUMERS * 128);" +
         (warp ? "  // full: the TMA thread's expect_tx and the producer warp's 32 lanes" : ""));
  k.line("napkin::mbar_init_fence();");
  k.close();
  producer_warpgroup_begin(k, warp ? 32 : 1);
  auto by_tma_thread = [&](const std::function<void()>& body) {  // the TMA loads: thread 0 of the producer warp
    if (warp) k.open("if (threadIdx.x == 0)");
    body();
    if (warp) k.close();
  };
  by_tma_thread([&] {
    k.line("napkin::mbar_expect_tx(res_full, RES_BYTES);");
    for (const auto& o : f.operands)
      if (!o.streamed)
        k.line("for (int j = 0; j < W_" + o.array + " / 64; ++j) napkin::tma_load(smem + OFF_" + o.array + " + j * T_X * 128, &tm_" + o.array +
               ", res_full, j * 64, static_cast<int>(o_" + f.X + ")" + tma_batch_coords(b.c, o.array, o.rows, o.cols) + ");");
  });
  k.open("for (int64_t ic = 0; ic < steps; ++ic)");
  step_indices(b, "ic");
  k.line("const int s = static_cast<int>(ic % STAGES);");
  k.line("if (ic >= STAGES) napkin::mbar_wait(&empty[s], static_cast<unsigned>((ic / STAGES - 1) & 1));");
  by_tma_thread([&] {
    k.line("napkin::mbar_expect_tx(&full[s], CHUNK_BYTES);");
    for (const auto& o : f.operands)
      if (o.streamed)
        k.line("for (int j = 0; j < W_" + o.array + " / 64; ++j) napkin::tma_load(smem + OFF_" + o.array + " + s * B_" + o.array + " + j * T_Q * 128, &tm_" +
               o.array + ", &full[s], j * 64, static_cast<int>(kc * T_Q)" + tma_batch_coords(b.c, o.array, o.rows, o.cols) + ");");
  });
  if (warp) {  // any dtype, alignment and extent: plain loads, zero past N_Q; the arrive releases the stores to the consumers
    k.line("#pragma unroll 1  // a producer thread has 24 registers (setmaxnreg): unrolled, the loads spilled");
    k.open("for (int j = threadIdx.x; j < T_Q; j += 32)");
    k.line("const int64_t i_" + f.Q + " = kc * T_Q + j;");
    for (const auto& a : f.col_vectors)
      k.line("reinterpret_cast<float*>(smem + OFF_COL_" + a + ")[s * T_Q + j] = " + b.c.bounded_load(a, {f.Q}) + ";");
    k.close();
    k.line("napkin::mbar_arrive(&full[s]);");
  }
  k.close();
  k.line("return;");
  k.close();
}

/** Issues every tile contraction of the chunk, one commit group each (dataflow order). */
void issue_tiles(const BwdKernel& b, const BwdAtoms& at) {
  Code& k = b.k;
  const FlashBwdForm& f = b.f;
  // The contractions' tiles are not zeroed: their first k step overwrites them (scale_d = 0).
  bool any = false;
  for (const auto& t : f.tiles) {
    k.line("float t_" + t.s->name + "[MT][T_Q / 8][4]" + (t.node ? "" : " = {}") + ";  // registers: " + t.s->name + " (transposed)");
    any |= t.node != nullptr;
  }
  if (!any) return;
  k.line("napkin::wgmma_fence();");
  for (const auto& t : f.tiles) {
    if (!t.node) continue;
    const std::string &R = t.resident, &C = t.streamed;
    k.line("// contract(" + R + ", " + C + "; " + t.c + "): " + t.s->name + "^T = " + R + " " + C + "^T, both K-major in SMEM");
    // descriptors at the warpgroup's rows and the stage once; k steps advance them by constants (wgmma.cuh desc_advance)
    const std::string dr = "dr_" + t.s->name, dc = "dc_" + t.s->name;
    k.line("const uint64_t " + dr + " = napkin::smem_desc(smem + OFF_" + R + " + cw * 64 * 128, 16, 1024), " + dc + " = napkin::smem_desc(smem + OFF_" + C +
           " + s * B_" + C + ", 16, 1024);");
    k.line("#pragma unroll");
    k.line("for (int kk = 0; kk < W_" + R + "; kk += 16)");
    k.line("  " + at.tile_fn + "<0, 0>(" + acc_view("t_" + t.s->name, "T_Q") + ", napkin::desc_advance(" + dr +
           ", (kk / 64) * T_X * 128 + (kk % 64) * static_cast<int>(sizeof(T))),");
    k.line("      napkin::desc_advance(" + dc + ", (kk / 64) * T_Q * 128 + (kk % 64) * static_cast<int>(sizeof(T))), kk > 0);");
    k.line("napkin::wgmma_commit();");
  }
}

/** Output `o` += tile^T-contraction on wgmma: the tile packed to 16 bits as A fragments (kept
 *  live until the chunk's last wait), the streamed chunk as an N-major B (transposed). */
void accumulate(const BwdKernel& b, const BwdAtoms& at, const BwdOutput& o) {
  Code& k = b.k;
  const std::string t = "t_" + o.tile, pa = "pa_" + o.out->name, acc = acc_view("acc_" + o.out->name, n(o.E)), C = o.operand;
  k.line("// " + o.out->name + " += contract(" + o.tile + ", " + C + "; " + b.f.Q + "): the tile from registers as A, " + C + " N-major as B");
  k.line("#pragma unroll");
  k.open("for (int nt = 0; nt < T_Q / 8; ++nt)");
  k.line(pa + "[nt / 2][(nt % 2) * 2] = napkin::pack2<T>(" + t + "[0][nt][0], " + t + "[0][nt][1]);");
  k.line(pa + "[nt / 2][(nt % 2) * 2 + 1] = napkin::pack2<T>(" + t + "[0][nt][2], " + t + "[0][nt][3]);");
  k.close();
  k.line("napkin::fence_regs(" + acc + ");");
  k.line("napkin::wgmma_fence();");
  const std::string dc = "dc_" + o.out->name;
  k.line("const uint64_t " + dc + " = napkin::smem_desc(smem + OFF_" + C + " + s * B_" + C + ", T_Q * 128, 1024);");
  k.line("#pragma unroll");
  k.line("for (int kk = 0; kk < T_Q / 16; ++kk)");
  k.line("  " + at.out_fn.at(o.E) + "<1>(" + acc + ", " + pa + "[kk], napkin::desc_advance(" + dc + ", kk * 16 * 128));");
  k.line("napkin::wgmma_commit();");
}

/** After the wait for a chunk's outputs: their accumulators fenced (no access moved across the
 *  wait), their A fragments kept live to here, and the chunk's stage released to the producer.
 *  (Deferring this wait to the next chunk, after its tile contractions are issued, made ptxas
 *  serialise the wgmma: C7513.) */
void release(const BwdKernel& b) {
  Code& k = b.k;
  for (const auto& o : b.f.outputs) {
    k.line("napkin::fence_regs(" + acc_view("acc_" + o.out->name, n(o.E)) + ");");
    k.line("napkin::keep_live(pa_" + o.out->name + ");");
  }
  k.line("napkin::mbar_arrive(&empty[s]);");
}

/** Stored tile `t` (BwdTile::swizzled) from this consumer warpgroup: its 64 rows of X into its
 *  128-byte-swizzled staging boxes (16-byte chunk c of row r at chunk c ^ (r % 8): the
 *  registers' columns land in distinct banks), then one TMA store per box by one thread
 *  (BwdTile::tma_store), or the warpgroup's threads copy the boxes out in 16-byte chunks. The staging is rewritten only once the previous chunk's store
 *  has read it. Rows past N_X or N_Q are not written (TMA clips them; the copy skips them). */
void store_swizzled(const BwdKernel& b, const BwdTile& t) {
  Code& k = b.k;
  const FlashBwdForm& f = b.f;
  const std::string name = t.s->name, st = "st_" + name, X = f.X, Q = f.Q;
  k.line("// " + name + " out: this warpgroup's rows of " + X + " into its swizzled staging, then " + (t.tma_store ? "by TMA (one thread)" : "copied out in 16-byte chunks"));
  k.line("T* " + st + " = reinterpret_cast<T*>(smem + OFF_ST_" + name + " + cw * ST_BYTES_" + name + ");");
  if (t.tma_store) k.line("if (threadIdx.x % 128 == 0) napkin::bulk_wait_read<0>();  // the previous chunk's store has read the staging");
  k.line("napkin::named_sync(1 + cw, 128);  // ... and the previous copy-out is done");
  // By stmatrix (PTX ISA 9.7.14.5.16), four 8x8 matrices a step: m16 rows of X (this warp's 16)
  // by two n8 tiles of Q, the accumulator's pairs packed as they are held; lane 8m + j
  // addresses row j of matrix m (tile nt + m / 2, rows of X + (m % 2) * 8). Element (row, col)
  // of a box of 64-element rows sits at row * 64 + ((col / 8) ^ (row % 8)) * 8 + col % 8.
  // Where an output's A fragments hold the tile (accumulate: the same pairs, in this order), the
  // stores read them: the fp32 tile is dead once packed.
  const std::string tn = "t_" + name;
  std::string regs;
  for (const auto& o : f.outputs)
    if (o.tile == name && regs.empty()) {
      const std::string pa = "pa_" + o.out->name + "[nt / 2]";
      regs = pa + "[0], " + pa + "[1], " + pa + "[2], " + pa + "[3]";
    }
  if (regs.empty()) regs = "napkin::pack2<T>(" + tn + "[0][nt][0], " + tn + "[0][nt][1]), napkin::pack2<T>(" + tn + "[0][nt][2], " + tn + "[0][nt][3]), napkin::pack2<T>(" + tn +
                           "[0][nt + 1][0], " + tn + "[0][nt + 1][1]), napkin::pack2<T>(" + tn + "[0][nt + 1][2], " + tn + "[0][nt + 1][3])";
  k.line("#pragma unroll");
  k.open("for (int nt = 0; nt < T_Q / 8; nt += 2)");
  k.line("const int m = lane / 8, j = lane % 8;");
  if (t.x_inner)  // transposed: row j of the stored matrix is column cq = (nt + m / 2) * 8 + j of Q, its 8 rows of X one 16-byte chunk
    k.line("napkin::stsm_x4_t(" + st + " + ((nt + m / 2) * 8 + j) * 64 + ((((warp % 4) * 2 + m % 2) ^ j) * 8), " + regs + ");");
  else  // row xl = (warp % 4) * 16 + (m % 2) * 8 + j of X, its 8 columns of Q from (nt + m / 2) * 8
    k.line("napkin::stsm_x4(" + st + " + ((nt + m / 2) / 8) * 4096 + ((warp % 4) * 16 + (m % 2) * 8 + j) * 64 + ((((nt + m / 2) % 8) ^ j) * 8), " + regs + ");");
  k.close();
  const std::string boxes = t.x_inner ? "1" : "T_Q / 64";
  if (t.tma_store) {
    k.line("napkin::fence_proxy_async();  // the staging writes before the TMA store's reads");
    k.line("napkin::named_sync(1 + cw, 128);");
    const std::string inner = t.x_inner ? "static_cast<int>(o_" + X + ") + cw * 64" : "static_cast<int>(q0) + j * 64";
    const std::string outer = t.x_inner ? "static_cast<int>(q0)" : "static_cast<int>(o_" + X + ") + cw * 64";
    k.open("if (threadIdx.x % 128 == 0)");
    k.line("for (int j = 0; j < " + boxes + "; ++j) napkin::tma_store(&tm_" + name + ", " + st + " + j * 4096, " + inner + ", " + outer +
           tma_batch_coords(b.c, name, t.x_inner ? Q : X, t.x_inner ? X : Q) + ");");
    k.line("napkin::bulk_commit();");
    k.close();
    return;
  }
  k.line("napkin::named_sync(1 + cw, 128);");
  // the threads' copy-out: chunk c of row r of box j
  k.line("// T_Q x 64 elements, 8 per chunk");
  k.open("for (int v = threadIdx.x % 128; v < T_Q * 8; v += 128)");
  k.line("const int c = v % 8, r = v / 8 % " + std::string(t.x_inner ? "T_Q" : "64") + ", j = v / 8 / " + (t.x_inner ? "T_Q" : "64") + ";");
  if (t.x_inner) {
    k.line("const int xl = cw * 64 + c * 8;  // the chunk's first row of " + X + " in the tile");
    k.line("const int64_t i_" + Q + " = q0 + r, i_" + X + " = o_" + X + " + xl;");
    k.line("if (r >= n_q) continue;");
    k.line("const int valid = n_x - xl;");
  } else {
    k.line("const int xl = cw * 64 + r;");
    k.line("const int64_t i_" + X + " = o_" + X + " + xl, i_" + Q + " = q0 + j * 64 + c * 8;");
    k.line("if (xl >= n_x) continue;");
    k.line("const int valid = n_q - (j * 64 + c * 8);");
  }
  k.line("if (valid <= 0) continue;");
  k.line("const T* src = " + st + " + j * 4096 + r * 64 + ((c ^ (r % 8)) * 8);");
  k.line("T* dst = a." + name + " + " + b.c.index(name) + ";");
  k.line("if (vec_" + name + " && valid >= 8) *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);");
  k.line("else for (int i = 0; i < 8 && i < valid; ++i) dst[i] = src[i];");
  k.close();
}

/** The consumers' stream loop: per chunk of the range, its stage's wait, the tile contractions
 *  issued, then per tile in dataflow order its wait, map, outputs and store; at the end the
 *  outputs' wgmma are waited for and the stage released. */
void consumer_stream(const BwdKernel& b, const BwdAtoms& at) {
  Code& k = b.k;
  const FlashBwdForm& f = b.f;
  load_rows(b);
  zero_skipped(b);
  k.line("napkin::mbar_wait(res_full, 0);");
  k.open("for (int64_t ic = 0; ic < steps; ++ic)");
  step_indices(b, "ic");
  k.line("const int s = static_cast<int>(ic % STAGES);");
  k.line("napkin::mbar_wait(&full[s], static_cast<unsigned>((ic / STAGES) & 1));");
  chunk_bounds(b);
  for (const auto& a : f.col_vectors)  // read where the maps use them (col_<A>[nt][j], as on mma.sync), from the stage: not held in registers
    k.line("const float (*col_" + a + ")[8] = reinterpret_cast<const float (*)[8]>(smem + OFF_COL_" + a + " + (s * T_Q + (lane % 4) * 2) * 4);  // SMEM: " + a +
           " at column nt * 8 + (lane % 4) * 2 + j of the chunk");
  for (const auto& o : f.outputs)
    k.line("uint32_t pa_" + o.out->name + "[T_Q / 16][4];  // registers: " + o.tile + " in 16 bits, A fragments of " + o.out->name + " (live until its wgmma is done)");
  issue_tiles(b, at);
  int pending = 0;  // commit groups issued after the next tile contraction's
  for (const auto& t : f.tiles) pending += t.node ? 1 : 0;
  // A tile retires (its outputs' A fragments packed and their wgmma issued, its store) after its
  // last reader (BwdTile::last_reader): packing P for dV before dS's map read P cost the kernel
  // serialised wgmma (ptxas C7512).
  std::vector<bool> unmasked(f.tiles.size());
  bool first_store = true;
  for (std::size_t j = 0; j < f.tiles.size(); ++j) {
    const BwdTile& t = f.tiles[j];
    if (t.node) {
      --pending;
      k.line("napkin::wgmma_wait<" + n(pending) + ">();  // " + t.s->name + "'s contraction is done");
      k.line("napkin::fence_regs(" + acc_view("t_" + t.s->name, "T_Q") + ");");
    }
    // a map that reads registers only runs unmasked (tile_map); the columns past N_Q are zeroed before the outputs sum over them
    unmasked[j] = map_reads_registers_only(b, t);
    tile_map(b, t, !unmasked[j]);
    for (std::size_t i = 0; i <= j; ++i) {
      if (f.tiles[i].last_reader != j) continue;
      const BwdTile& r = f.tiles[i];
      bool masked_columns = !unmasked[i];
      for (const auto& o : f.outputs)
        if (o.tile == r.s->name) {
          if (!masked_columns) mask_columns_past_n_q(b, r), masked_columns = true;
          accumulate(b, at, o), ++pending;
        }
      if (r.swizzled) store_swizzled(b, r);
      else if (r.stored)  // each consumer warpgroup stages and copies out its own 64 rows of X: no wait for the other
        store_tile(b, r, {"static_cast<int>(threadIdx.x % 128)", "128", "cw * 64", "64", "napkin::named_sync(1 + cw, 128);", first_store}), first_store = false;
    }
  }
  k.line("napkin::wgmma_wait<0>();  // this chunk's outputs are done: their reads of its stage too");
  release(b);
  k.close();
  for (const auto& t : f.tiles)
    if (t.tma_store) {
      k.line("if (threadIdx.x % 128 == 0) napkin::bulk_wait<0>();  // the TMA stores are complete before the block's SMEM goes");
      break;
    }
}

}  // namespace

KernelEmit flash_bwd_wgmma_variant(Context& c, const KernelChoice& kc, const std::string& fallback) {
  const KernelSpec& spec = *kc.cost.spec;
  const FlashBwdForm& f = *spec.flash_bwd;
  NAPKIN_ASSERT(spec.wgmma && spec.wgmma_mma) << "the flash_bwd wgmma variant needs the spec's wgmma path (lower.cpp)";
  Code k;
  const BwdKernel b{c, kc, f, *spec.wgmma_mma, k};
  const BwdAtoms at = atoms(b);
  wg_head(b, at);
  grid_and_chunks(b);
  producer(b);
  k.line("// consumer warpgroups: rows cw * 64 .. cw * 64 + 63 of the tile; warp numbers the consumer warps");
  k.line("napkin::setmaxnreg_inc<240>();");
  k.line("const int cw = threadIdx.x / 128 - 1, warp = threadIdx.x / 32 - 4, lane = threadIdx.x % 32;");
  accumulators(b);
  store_flags(b);
  consumer_stream(b, at);
  epilogue(b);
  k.line("#endif");
  --k.indent;
  k.line("}");
  k.close("  // namespace wg");
  std::vector<TmaOperand> ops;
  for (const auto& o : f.operands) ops.push_back({o.array, o.cols, o.rows, 64, static_cast<std::uint32_t>(o.streamed ? f.TQ : f.TX)});
  bool any_tma_store = false;
  for (const auto& t : f.tiles)
    if (t.tma_store) {  // the boxes of the swizzled staging: 64 elements of the inner axis by T_Q rows of Q or 64 of X
      ops.push_back({t.s->name, t.x_inner ? f.X : f.Q, t.x_inner ? f.Q : f.X, 64, static_cast<std::uint32_t>(t.x_inner ? f.TQ : 64)});
      any_tma_store = true;
    }
  KernelEmit r;
  r.device_code = k.text;
  // With TMA stores turned off by the host (napkin::tma_store_enabled: compute-sanitizer's initcheck), the mma.sync variant runs.
  r.launch_code = tma_launch(c, kernel_ns(kc.plan.name), ops, f.dtype, fallback, any_tma_store ? "napkin::tma_store_enabled()" : "true");
  return r;
}

}  // namespace napkin::cuda::bwd
