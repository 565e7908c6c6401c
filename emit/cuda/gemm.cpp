// Strategy gemm: contractions of 16-bit operands (int8 and fp8 too) with element-wise epilogues
// (lower/gemm_form.hpp). Contract: see strategies.hpp. One renderer of the spec: each path
// lowering accepted (KernelSpec::path) is rendered by the same sequence (kernel head, the mover's
// staging, grid decode, accumulators, stream loop, epilogue), which reads the path's atom and
// mover and calls their pieces: render_grid.cpp (the tile decode, the persistent tile walk),
// render_staging.cpp (cp.async), render_tma.cpp (the TMA ring, its producer, cluster multicast),
// render_mma.cpp (the atoms' fragments, descriptors and issue), render_epilogue.cpp and
// render_store.cpp (the epilogue, its wide stores), render_launch.cpp (the launcher).
// - mma.sync on cp.async (sm_80 on): grid = tiles of (M, N) rasterised in groups of 8 M tiles
//   (concurrent blocks share operand tiles in L2) x batch axes; K streamed in chunks of T_K
//   through a STAGES-deep cp.async pipeline; each warp owns WM = T_M/WARPS rows of M and all T_N
//   columns; fragments come from SMEM by ldmatrix (.trans for operands stored with M or N
//   contiguous); accumulators stay in registers until the epilogue. int8 operands (K-major both)
//   take the m16n8k32 atom with int32 accumulators, converted to fp32 where the epilogue reads them.
// - wgmma on TMA (sm_90a, picked at run time on a Hopper GPU): same tiles; the thread block is
//   warp-specialised (FlashAttention-3 and CUTLASS's "warp-specialised" Hopper kernels use the
//   same split): warpgroup 0 is the producer, one thread of which streams the K chunks in by TMA
//   (128-byte swizzled boxes, out-of-bounds zero fill) into a STAGES-deep ring guarded by
//   full/empty mbarriers; the schedule's warps form the consumer warpgroups, each owning
//   WM = T_M / CONSUMERS rows of M as m64 subtiles, issuing wgmma.m64n<T_N>k16 on SMEM descriptors
//   (a T_N over 256 as atoms side by side: lower/gemm_form.hpp gemm_wgmma_atoms)
//   with one wgmma group in flight (setmaxnreg moves registers from the producer to the
//   consumers). The epilogue: on interior tiles, 16-byte stores after a quad transpose or, with
//   the spec's tma_store, stmatrix into SMEM and a TMA store; otherwise the mma.sync path's (the
//   accumulator layout of wgmma is that of m16n8 tiles per warp, PTX ISA 9.7.15.5.1.1). With a
//   `cluster A by 2` directive, two blocks with adjacent tiles along A (M or N) form a cluster:
//   each loads half of the tiles that do not vary along A by TMA multicast into both (CUTLASS's
//   Hopper GEMMs do the same); a stage is refilled once the consumers of both blocks released it.
//   The kernel is persistent: one block per SM walks the output tiles `gridDim.x` apart, the
//   ring's stage and phase counting on across tiles, so the producer loads the next tile while
//   the consumers store the last (CUTLASS's persistent kernels).
//   With `warps 8 pingpong` (GemmForm::pingpong) the two consumers take whole tiles in turn (tile
//   t of the block's walk is consumer t % 2's) and walk the other's chunks through the ring
//   uncounted; named barriers 3 and 4 order their main loops (consumer 0 first, each hands over
//   once its MMAs are issued), which also keeps a consumer from waiting on a ring stage two
//   phases ahead of the producer (without them the kernel hung: session 34).
// - 8-bit floats (fp8e4m3, fp8e5m2) take mma.sync m16n8k32 where the hardware's [[mma]] table has
//   it (the launcher refuses it below compute capability 8.9); without it, the wgmma path alone,
//   and where that cannot run the launcher fails with the reason.
// - An operand whose strides TMA cannot take (not multiples of 16 bytes) is copied by
//   napkin::pitch_copy into a workspace with rows of whole 128-byte lines before the wgmma path's
//   launch, and its tensor map reads the copy (KernelSpec::repacks); the mma.sync path reads it in
//   place by the widest cp.async its strides allow (GemmTile::copy_bytes).
#include <map>

#include "emit/cuda/preamble.hpp"
#include "emit/cuda/render.hpp"

namespace napkin::cuda {

namespace {

/** One path of the gemm spec being rendered. */
struct GemmKernel {
  Context& c;
  const KernelChoice& kc;
  const GemmForm& g;
  const KernelSpec& spec;
  KernelPath path;
  Code& code;
  GemmTmaStage stage{};     ///< the TMA ring's stage (wgmma path)
  std::map<std::int64_t, std::string> wg_names{};  ///< the wgmma wrappers' names by N (wgmma path)
};

/** The plan's comment and the strategy's line (with `warp_rows`, the warps' rows of M). */
void head_comment(const GemmKernel& gk, bool warp_rows) {
  const GemmForm& g = gk.g;
  gk.code.line(describe_plan(gk.kc.plan));
  const int warps = warp_rows ? g.sync_warps() : g.warps;
  gk.code.line("// strategy gemm: M = " + g.M + " (group " + std::to_string(g.TM) + ", " + std::to_string(warps) + " warps" +
               (warp_rows ? " x " + std::to_string(g.TM / warps) + " rows" : std::string()) + "), N = " + g.N + " (group " + std::to_string(g.TN) +
               "), K = " + g.K + " (" + g.k_note + ")");
}

/** The kernel's namespace opened with the tile constants both paths read. */
void head_namespace(const GemmKernel& gk) {
  const GemmForm& g = gk.g;
  gk.code.open("namespace " + kernel_ns(gk.kc.plan.name));
  gk.code.line("using T = " + ctype(g.dtype) + ";");
  gk.code.line("constexpr int T_M = " + std::to_string(g.TM) + ", T_N = " + std::to_string(g.TN) + ", T_K = " + std::to_string(g.TK) + ";");
}

/** mma.sync on cp.async: comments, namespace, constants (warps, the SMEM layout: each operand
 *  tile per stage, rows padded by 16 bytes), and the kernel opened. */
void head_cp_async(const GemmKernel& gk) {
  Code& code = gk.code;
  const GemmForm& g = gk.g;
  const bool int8 = is_integer_dtype(g.dtype);
  const std::string pad = std::to_string(gemm_mma_sync_pad_elems(g.dtype));
  head_comment(gk, true);
  code.line("// mma.sync variant (sm_80 and later): " + std::to_string(gk.path.stages) + "-stage cp.async pipeline; " + gk.path.atom->ptx + "; " +
            (int8 ? "int32" : "fp32") + " accumulators in registers");
  head_namespace(gk);
  code.line("constexpr int WARPS = " + std::to_string(g.sync_warps()) + ", THREADS = WARPS * 32, STAGES = " + std::to_string(gk.path.stages) + ";");
  code.line("constexpr int WM = T_M / WARPS, MT = WM / 16, NT = T_N / 8;  // rows per warp; m16 and n8 tiles per warp");
  std::int64_t off = 0;
  for (const auto& t : g.tiles) {
    code.line("// SMEM tile of " + t.array + ": [" + t.rows + "][" + t.cols + "], rows padded by " + pad + " elements (16 bytes) so ldmatrix is free of bank conflicts");
    code.line("constexpr int P_" + t.array + " = " + std::to_string(t.C) + " + " + pad + ", OFF_" + t.array + " = " + std::to_string(off) + ";");
    off += t.R * (t.C + gemm_mma_sync_pad_elems(g.dtype));
  }
  code.line("constexpr int STAGE_ELEMS = " + std::to_string(gemm_mma_sync_smem_bytes(g, 1) * 8 / dtype_bits(g.dtype)) + ";");
  code.line("constexpr size_t SMEM_BYTES = size_t{STAGES} * STAGE_ELEMS * sizeof(T);");
  code.line("");
  code.line("__global__ void __launch_bounds__(THREADS) kernel(const Args a) {");
  ++code.indent;
  gk.c.declare_sizes(code);
  code.line("extern __shared__ __align__(16) unsigned char smem_raw[];");
  code.line("T* smem = reinterpret_cast<T*>(smem_raw);");
  code.line("const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;");
}

/** wgmma on TMA: namespace `wg` opened, the atom's wrapper, the warpgroup roles, the ring's
 *  constants and SMEM bytes. */
void head_tma_constants(const GemmKernel& gk, const std::string& wg_fn) {
  Code& code = gk.code;
  const GemmForm& g = gk.g;
  const KernelSpec& spec = gk.spec;
  const MmaShape& mma = *gk.path.atom;
  const int consumers = g.warps / 4;
  code.line("// wgmma variant (sm_90a): warpgroup 0 loads by TMA into a " + std::to_string(gk.path.stages) + "-stage ring of 128-byte-swizzled tiles;");
  if (g.pingpong)
    code.line("// pingpong: the " + std::to_string(consumers) + " consumer warpgroups take the output tiles in turn, their main loops one after the other (named barriers " +
              "3 + cw), so that one's epilogue may run beside the other's MMAs (CUTLASS's ping-pong Hopper kernels);");
  code.line("// " + std::to_string(consumers) + " consumer warpgroup(s) x " + std::to_string(g.TM / g.tile_consumers()) + " rows of " + g.M + " issue " +
            mma.ptx.substr(0, mma.ptx.find(".m64")) + ".m64n" + std::to_string(g.TN) + "k" + std::to_string(mma.k) + " on SMEM descriptors, " +
            (is_integer_dtype(g.dtype) ? "int32" : "fp32") + " accumulators in registers");
  code.open("namespace wg");
  code.text += wg_fn;
  if (spec.cluster > 1) {
    std::string shared;
    for (const auto& L : gk.stage.tiles)
      if (!L.boxes.empty() && L.boxes[0].rank >= 0) shared += (shared.empty() ? "" : ", ") + L.t->array;
    code.line("// clusters of " + std::to_string(spec.cluster) + " blocks along " + spec.cluster_axis + " share the tiles of " + shared +
              ": each block multicasts half of them into both");
  }
  code.line("constexpr int CONSUMERS = " + std::to_string(consumers) + ", THREADS = (CONSUMERS + 1) * 128, STAGES = " + std::to_string(gk.path.stages) + ";");
  code.line("[[maybe_unused]] constexpr int CLUSTER = " + std::to_string(spec.cluster) + ";  // blocks per cluster");
  code.line("constexpr int STAGE_BYTES = " + std::to_string(gk.stage.bytes) + ";");
  if (spec.tma_store)
    code.line("constexpr int OUT_BYTES = " + std::string(g.pingpong ? "CONSUMERS * " : "") + "T_M * 128, OUT_BUFS = " + std::to_string(spec.tma_store_buffers) +
              ";  // the TMA store's staging buffers: T_M rows x 64 columns each" + (g.pingpong ? " per consumer" : "") + ", 128-byte swizzle");
  code.line(std::string("constexpr size_t SMEM_BYTES = size_t{STAGES} * STAGE_BYTES") + (spec.tma_store ? " + OUT_BUFS * OUT_BYTES" : "") +
            " + 2 * STAGES * sizeof(uint64_t) + 1024;  // + barriers, + alignment");
}

/** wgmma on TMA: the kernel (taking the tensor maps) opened, SMEM carved (the ring's tiles, the
 *  TMA store's buffers, the mbarriers), `chunks` and `tile_blocks`. */
void head_tma_kernel(const GemmKernel& gk) {
  Code& code = gk.code;
  const GemmForm& g = gk.g;
  const KernelSpec& spec = gk.spec;
  std::string params = "const Args a";
  for (const auto& L : gk.stage.tiles) params += ", const __grid_constant__ CUtensorMap tm_" + L.t->array;
  if (spec.tma_store) {
    for (const auto& o : gk.kc.cost.outputs) params += ", const __grid_constant__ CUtensorMap tm_" + o;
    params += ", const bool tma_store";
  }
  code.line(std::string("__global__ void __launch_bounds__(THREADS, 1) ") + (spec.cluster > 1 ? "NAPKIN_CLUSTER_DIMS(CLUSTER) " : "") + "kernel(" + params + ") {");
  ++code.indent;
  code.line("#if defined(__CUDA_ARCH_FEAT_SM90_ALL)");
  if (g.pingpong) code.line("constexpr int WM = T_M, MS = WM / 64;  // pingpong: every row of its own tile per consumer warpgroup; m64 subtiles");
  else code.line("constexpr int WM = T_M / CONSUMERS, MS = WM / 64;  // rows per consumer warpgroup; m64 subtiles each");
  const std::int64_t row = gemm_swizzle_row_elems(g.dtype);  // elements per 128-byte row
  const std::string rs = std::to_string(row);
  for (const auto& L : gk.stage.tiles)
    code.line("constexpr int OFF_" + L.t->array + " = " + std::to_string(L.off) + ";  // SMEM bytes: " + L.t->array + " [" +
              (L.t->k_rows ? std::to_string(L.t->C / row) + " blocks of " + rs + " " + L.t->cols + "][" + g.K + " " + std::to_string(g.TK) + "][" + rs + "]"
                           : std::to_string(g.TK / row) + " blocks of " + rs + " " + g.K + "][" + L.t->rows + " " + std::to_string(L.t->R) + "][" + rs + "]") +
              ", 128-byte swizzle");
  gk.c.declare_sizes(code);
  code.line("extern __shared__ __align__(1024) unsigned char smem_raw[];");
  code.line("unsigned char* smem = napkin::align_smem_1024(smem_raw);  // in the shared window (LDS/STS through it)");
  if (spec.tma_store) code.line("unsigned char* const out_stage = smem + STAGES * STAGE_BYTES;  // the staging buffers of the TMA store");
  code.line(std::string("uint64_t* full = reinterpret_cast<uint64_t*>(smem + STAGES * STAGE_BYTES") + (spec.tma_store ? " + OUT_BUFS * OUT_BYTES" : "") +
            ");  // chunk landed in the stage");
  code.line("uint64_t* empty = full + STAGES;                                           // stage consumed");
  gemm_chunk_count(code, g);  // with outer contracted axes each a TMA coordinate with a box of 1
  // Persistent: the grid holds one block per SM and each block walks the tiles `tile_blocks` apart;
  // the producer runs on into the next tile while the consumers store the last one.
  gemm_tile_count(code, g, spec.cluster_axis);
}

/** The stream loop of mma.sync on cp.async: the first STAGES - 1 chunks in flight, then per
 *  chunk its stage and its MMAs. */
void stream_uniform(const GemmKernel& gk) {
  Code& code = gk.code;
  gemm_cp_async_prologue(code, gk.g);
  code.open("for (int64_t kc = 0; kc < chunks; ++kc)");
  gemm_cp_async_stage(code, gk.g);
  gemm_mma_sync_step(code, gk.g, *gk.path.atom);
  code.close();
  code.line("napkin::cp_async_wait<0>();");
}

/** The consumers' stream loop of one tile on wgmma: per chunk, wait for its stage, issue its
 *  MMAs, release the previous chunk's stage; after the loop, the last one's. */
void stream_warp_specialised(const GemmKernel& gk) {
  Code& code = gk.code;
  const int cluster = gk.spec.cluster;
  if (gk.g.pingpong) code.line("napkin::named_sync(3 + cw, 256);  // pingpong: this warpgroup's turn on the tensor cores");
  code.open("for (int64_t kc = 0; kc < chunks; ++kc, ++it)");
  gemm_tma_stage_wait(code);
  gemm_wgmma_issue(code, gk.g, *gk.path.atom, gk.stage.joint_first, gk.wg_names);
  code.line("if (kc > 0 && lane == 0)");
  gemm_tma_release(code, cluster, "it - 1");
  code.close();
  if (gk.g.pingpong) code.line("napkin::named_arrive(4 - cw, 256);  // the tile's MMAs are issued: the other warpgroup's turn");
  code.line("napkin::wgmma_wait<0>();");
  gemm_wgmma_fence(code, gk.stage.joint_first >= 0 ? 1 : gk.g.gemms.size());
  code.line("if (chunks > 0 && lane == 0)  // the tile's last chunk: the producer refills it while this block stores");
  gemm_tma_release(code, cluster, "it - 1");
}

/** The kernel of one path, in one sequence: head, the mover's staging and the grid decode (the
 *  TMA ring's producer, then the consumers' persistent tile walk), accumulators, stream loop,
 *  epilogue. Adds the outputs to `stored`. */
void gemm_kernel(Context& c, const KernelChoice& kc, const KernelPath& path, Code& code, std::set<std::string>& stored) {
  const KernelSpec& spec = *kc.cost.spec;
  const GemmForm& g = *spec.gemm;
  const bool tma = path.mover == Mover::tma;
  GemmKernel gk{c, kc, g, spec, path, code, {}, {}};
  if (tma) {
    gk.stage = gemm_tma_stage(g, spec.cluster, spec.cluster_axis);
    std::string wg_fn;
    for (std::int64_t n : gemm_issue_atoms(g, gk.stage.joint_first))
      if (!gk.wg_names.count(n)) wg_fn += wgmma_function(*path.atom, static_cast<int>(n), false, gk.wg_names[n]);
    head_tma_constants(gk, wg_fn);
    head_tma_kernel(gk);
    gemm_tma_barriers(code, spec.cluster, g.tile_consumers());
    gemm_tma_producer(code, c, g, gk.stage, spec.cluster, spec.cluster_axis);
    code.line("// consumer warpgroups");
    code.line("napkin::setmaxnreg_inc<232>();");
    code.line("const int cw = threadIdx.x / 128 - 1, t = threadIdx.x % 128, warp = t / 32, lane = t % 32;");
    if (g.pingpong) {
      code.line("constexpr int r0 = 0;  // pingpong: this warpgroup's tile is its own, from its first row");
      code.line("if (cw == 1) napkin::named_arrive(3, 256);  // warpgroup 0 takes the tensor cores first");
    } else {
      code.line("const int r0 = cw * WM;  // this warpgroup's first row of the tile");
    }
    code.line("int64_t it = 0;  // chunks consumed by this block, over all its tiles");
    if (spec.tma_store) code.line("int sb = 0;  // staging buffers used by this warpgroup (in turn)");
    gemm_tile_walk(code, g, spec.cluster, spec.cluster_axis, g.pingpong);
  } else {
    head_cp_async(gk);
    gemm_tile_origin(code, g);
    gemm_operand_origins(code, c, g);
    gemm_chunk_count(code, g);
    gemm_chunk_loader(code, c, g);
  }
  gemm_accumulators_declare(code, g, path, gk.stage.joint_first);
  if (tma) stream_warp_specialised(gk);
  else stream_uniform(gk);
  gemm_path_epilogue(code, c, kc, g, path, gk.stage.joint_first, stored);
  if (tma) {
    code.close();  // the tile walk
    if (g.pingpong) code.line("if (turn % CONSUMERS == cw) napkin::named_sync(3 + cw, 256);  // the turn no tile took: the other warpgroup's last arrival");
    if (spec.tma_store) code.line("if (t == 0) napkin::bulk_wait<0>();  // this warpgroup's TMA stores are complete");
    code.close();  // the consumers' branch
    if (spec.cluster > 1) code.line("napkin::cluster_sync();  // neither block leaves while the other may still signal its barriers");
    code.line("#endif");
  }
  --code.indent;
  code.line("}");
  if (!tma) code.line("");
}

/** The wgmma path on TMA: namespace `wg` with its kernel, and the launch that falls back to
 *  `fallback` where it cannot run. */
KernelEmit wgmma_path(Context& c, const KernelChoice& kc, const std::string& fallback, std::set<std::string>& stored) {
  const KernelSpec& spec = *kc.cost.spec;
  KernelEmit wg;
  Code w;
  gemm_kernel(c, kc, spec.path(true), w, stored);
  w.close("  // namespace wg");
  wg.device_code = w.text;
  wg.launch_code = gemm_tma_launch(c, kc, gemm_tma_stage(*spec.gemm, spec.cluster, spec.cluster_axis), fallback);
  return wg;
}

}  // namespace

KernelEmit emit_gemm(Context& c, const KernelChoice& kc) {
  const KernelSpec& spec = *kc.cost.spec;
  const GemmForm& g = *spec.gemm;
  const std::string ns = kernel_ns(kc.plan.name);
  KernelEmit r;
  r.strategy = "gemm";
  Code code;
  if (spec.mma_sync) {
    gemm_kernel(c, kc, spec.path(false), code, r.stored);
  } else {  // 8-bit floats without an mma.sync row: the wgmma path alone (lower.cpp), in the namespace's constants
    GemmKernel head{c, kc, g, spec, spec.path(true), code, {}, {}};
    head_comment(head, false);
    code.line("// no mma.sync variant: " + std::string(dtype_name(g.dtype)) + " operands run on wgmma alone (sm_90a)");
    head_namespace(head);
  }
  Code l;
  gemm_launch_blocks(l, g);
  const std::string alone = "this " + std::string(dtype_name(g.dtype)) +
                            " GEMM runs on the sm_90a wgmma path alone: it needs a Hopper GPU, a binary built for sm_90a and 16-byte-aligned arrays";
  add_path_variants(r, code, l, spec, ns, alone, [&](const std::string& fallback) { return wgmma_path(c, kc, fallback, r.stored); });
  if (spec.wgmma) r.buffers = repack_buffers(c, kc);
  code.close("  // namespace " + ns);
  r.device_code = code.text;
  r.launch_code = l.text;
  return r;
}

}  // namespace napkin::cuda
