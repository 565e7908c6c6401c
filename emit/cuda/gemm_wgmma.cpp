// The sm_90a variant of strategy gemm (contract: gemm_form.hpp). Same grid and tiles as the
// mma.sync variant; the thread block is warp-specialised (FlashAttention-3 and CUTLASS's
// "warp-specialised" Hopper kernels use the same split): warpgroup 0 is the producer, one thread
// of which streams the K chunks in by TMA (128-byte swizzled boxes, out-of-bounds zero fill)
// into a STAGES-deep ring guarded by full/empty mbarriers; the schedule's warps form the consumer
// warpgroups, each owning WM = T_M / CONSUMERS rows of M as m64 subtiles, issuing
// wgmma.m64n<T_N>k16 on SMEM descriptors with one wgmma group in flight, accumulators in
// registers (setmaxnreg moves registers from the producer to the consumers). The epilogue: on
// interior tiles of 16-bit outputs, 16-byte stores after a quad transpose (gemm_wide_store.hpp);
// otherwise the mma.sync variant's (gemm_epilogue): the accumulator layout of wgmma is that of
// m16n8 tiles per warp (PTX ISA 9.7.15.5.1.1).
// With a `cluster A by 2` directive, two blocks with adjacent tiles along A (the GEMM's M or N)
// form a cluster: each loads half of the tiles that do not vary along A by TMA multicast into both
// (CUTLASS's Hopper GEMMs do the same), so L2 -> SMEM traffic for those tiles halves. A stage is
// then refilled only when the consumers of both blocks have released it: each consumer warp
// arrives on the `empty` barrier of every block in the cluster.
// The kernel is persistent: one block per SM walks the output tiles `gridDim.x` apart, the ring's
// stage and phase counting on across tiles, so the producer loads the next tile while the
// consumers store the last (CUTLASS's persistent kernels; the epilogue itself is not overlapped).
#include <algorithm>

#include "emit/cuda/gemm_form.hpp"
#include "emit/cuda/gemm_wide_store.hpp"
#include "emit/cuda/preamble.hpp"

namespace napkin::cuda {

namespace {

/** One TMA box load of a tile per stage. */
struct Box {
  std::int64_t dst = 0;           ///< byte offset inside the tile
  std::string c0, c1;             ///< coordinates of the two matrix axes (innermost first)
  int rank = -1;                  ///< cluster rank that multicasts it, -1: not shared (each block loads its own)
};

/** One operand tile in a pipeline stage: its byte offset and size in the stage, its TMA boxes. */
struct Layout { const GemmTile* t; std::int64_t off, bytes; std::vector<Box> boxes; std::uint32_t box_inner, box_outer; };

/** SMEM layout per stage: each tile as 128-byte rows (64 16-bit or 128 fp8 elements: `row`) in
 *  1024-byte swizzle atoms. K-major tile [R][T_K]: T_K/row column blocks of R rows; MN-major tile
 *  [T_K][R]: R/row blocks of T_K rows. Tiles
 *  shared by a cluster's blocks (not varying along `cax`) are split into `cluster` times as many
 *  boxes, multicast by the ranks in turn. Adds each tile's bytes to `stage_bytes`. */
std::vector<Layout> stage_layout(const GemmForm& g, int cluster, const std::string& cax, std::int64_t& stage_bytes) {
  std::vector<Layout> lay;
  const std::int64_t row = gemm_swizzle_row_elems(g.dtype), esize = dtype_bits(g.dtype) / 8;
  const std::string row_s = std::to_string(row);
  for (const auto& t : g.tiles) {
    Layout L{&t, stage_bytes, t.R * t.C * esize, {}, static_cast<std::uint32_t>(row), 0};
    const std::string free = t.k_rows ? t.cols : t.rows;
    const std::int64_t F = t.k_rows ? t.C : t.R;  // extent along the free axis
    // Shared tiles (not varying along the cluster's axis) are split into `cluster` times as many
    // boxes, multicast by the ranks in turn.
    const int split = t.rows != cax && t.cols != cax ? cluster : 1;
    if (!t.k_rows) {
      const std::int64_t rb = std::min<std::int64_t>(F, 256) / split;
      NAPKIN_ASSERT(F % rb == 0) << "tile of " << t.array << " not whole boxes of 256 rows, which lowering refuses";
      L.box_outer = static_cast<std::uint32_t>(rb);
      for (std::int64_t kb = 0; kb < g.TK / row; ++kb)
        for (std::int64_t r = 0; r < F / rb; ++r)
          L.boxes.push_back({kb * F * 128 + r * rb * 128, "static_cast<int>(o_k) + " + std::to_string(kb * row),
                             "static_cast<int>(o_" + free + ") + " + std::to_string(r * rb)});
    } else {
      NAPKIN_ASSERT(F % row == 0 && g.TK <= 256) << "tile of " << t.array << " not whole " << row_s << "-column blocks of at most 256 rows, which lowering refuses";
      const std::int64_t kb = g.TK / split;  // rows of K per box
      L.box_outer = static_cast<std::uint32_t>(kb);
      for (std::int64_t j = 0; j < F / row; ++j)
        for (std::int64_t h = 0; h < split; ++h)
          L.boxes.push_back({j * g.TK * 128 + h * kb * 128, "static_cast<int>(o_" + free + ") + " + std::to_string(j * row),
                             "static_cast<int>(o_k) + " + std::to_string(h * kb)});
    }
    if (split > 1)
      for (std::size_t b = 0; b < L.boxes.size(); ++b) L.boxes[b].rank = static_cast<int>(b % split);
    stage_bytes += L.bytes;
    lay.push_back(L);
  }
  return lay;
}

/** SwiGLU's dual GEMM: when both B tiles are stored alike and side by side in SMEM, one wgmma of
 *  N = 2 T_N multiplies A by both (columns [0, T_N) of the accumulator belong to the B tile placed
 *  first), so each m64 subtile of A is read from SMEM once per k16 instead of twice. Returns the
 *  gemm whose B tile comes first, -1: one wgmma per gemm. */
int joint_gemm_first(const GemmForm& g, const std::vector<Layout>& lay) {
  int joint_first = -1;
  if (g.gemms.size() == 2 && 2 * g.TN <= 256 && g.gemms[0].a.array == g.gemms[1].a.array && g.gemms[0].b.k_inner == g.gemms[1].b.k_inner &&
      (!g.gemms[0].b.k_inner || g.TK == 64)) {
    auto find = [&](const std::string& a) { return std::find_if(lay.begin(), lay.end(), [&](const Layout& L) { return L.t->array == a; }); };
    auto b0 = find(g.gemms[0].b.array), b1 = find(g.gemms[1].b.array);
    if (b0 != lay.end() && b1 != lay.end() && b0->bytes == b1->bytes) {
      if (b1->off == b0->off + b0->bytes) joint_first = 0;
      else if (b0->off == b1->off + b1->bytes) joint_first = 1;
    }
  }
  return joint_first;
}

/** Renders one kernel's sm_90a variant in named steps (the file's header comment): constants and
 *  SMEM carving, barriers, the producer, the consumers' main loop, the epilogue, the launcher. */
class WgmmaGemmRenderer {
 public:
  WgmmaGemmRenderer(Context& c, const KernelChoice& kc, const GemmForm& g)
      : c_(c), kc_(kc), g_(g), spec_(*kc.cost.spec), mma_(&*spec_.wgmma_mma), consumers_(g.warps / 4), cluster_(spec_.cluster),
        stages_(spec_.wgmma_stages), cax_(spec_.cluster_axis) {
    // Lowering accepted this variant (lower/gemm_form.cpp gemm_wgmma_stages): its atom, stages and cluster.
    lay_ = stage_layout(g_, cluster_, cax_, stage_bytes_);
    NAPKIN_ASSERT(stage_bytes_ == gemm_wgmma_stage_bytes(g_)) << "wgmma stage bytes differ from lowering's";
    joint_first_ = joint_gemm_first(g_, lay_);
    joint_ = joint_first_ >= 0;
    wg_fn_ = wgmma_function(*mma_, static_cast<int>(joint_ ? 2 * g_.TN : g_.TN), false, wg_name_);
    outer_ = !g_.k_outer.empty();
    if (spec_.tma_store) out_ = kc_.cost.outputs.at(0);
  }

  KernelEmit render(const std::string& fallback_launch) {
    KernelEmit r;
    r.strategy = "gemm";
    r.hopper = true;
    kernel_head();
    barriers();
    producer();
    code_.close(" else {");
    ++code_.indent;
    consumers(r);
    code_.close();
    if (cluster_ > 1) code_.line("napkin::cluster_sync();  // neither block leaves while the other may still signal its barriers");
    code_.line("#endif");
    --code_.indent;
    code_.line("}");
    code_.close("  // namespace wg");
    r.device_code = code_.text;
    r.launch_code = launch(fallback_launch);
    return r;
  }

 private:
  /** Comments, constants, the kernel's signature, SMEM carving, the chunk and tile counts. */
  void kernel_head() {
    Code& code = code_;
    Context& c = c_;
    const GemmForm& g = g_;
    const std::string &M = g.M, &k = g.K;
    const int stages = stages_, consumers = consumers_, cluster = cluster_;
    const auto& lay = lay_;
    const auto& mma = mma_;
    const std::string& cax = cax_;
    const std::int64_t stage_bytes = stage_bytes_;
    code.line("// wgmma variant (sm_90a): warpgroup 0 loads by TMA into a " + std::to_string(stages) + "-stage ring of 128-byte-swizzled tiles;");
    code.line("// " + std::to_string(consumers) + " consumer warpgroup(s) x " + std::to_string(g.TM / consumers) + " rows of " + M + " issue " + mma->ptx.substr(0, mma->ptx.find(".m64")) +
              ".m64n" + std::to_string(g.TN) + "k" + std::to_string(mma->k) + " on SMEM descriptors, " + (is_integer_dtype(g.dtype) ? "int32" : "fp32") + " accumulators in registers");
    code.open("namespace wg");
    code.text += wg_fn_;
    if (cluster > 1) {
      std::string shared;
      for (const auto& L : lay)
        if (!L.boxes.empty() && L.boxes[0].rank >= 0) shared += (shared.empty() ? "" : ", ") + L.t->array;
      code.line("// clusters of " + std::to_string(cluster) + " blocks along " + cax + " share the tiles of " + shared + ": each block multicasts half of them into both");
  }
  code.line("constexpr int CONSUMERS = " + std::to_string(consumers) + ", THREADS = (CONSUMERS + 1) * 128, STAGES = " + std::to_string(stages) + ";");
  code.line("[[maybe_unused]] constexpr int CLUSTER = " + std::to_string(cluster) + ";  // blocks per cluster");
  code.line("constexpr int STAGE_BYTES = " + std::to_string(stage_bytes) + ";");
  if (spec_.tma_store)
    code.line("constexpr int OUT_BYTES = T_M * 128, OUT_BUFS = " + std::to_string(spec_.tma_store_buffers) +
              ";  // the TMA store's staging buffers: T_M rows x 64 columns each, 128-byte swizzle");
  code.line(std::string("constexpr size_t SMEM_BYTES = size_t{STAGES} * STAGE_BYTES") + (spec_.tma_store ? " + OUT_BUFS * OUT_BYTES" : "") +
            " + 2 * STAGES * sizeof(uint64_t) + 1024;  // + barriers, + alignment");
  std::string params = "const Args a";
  for (const auto& L : lay) params += ", const __grid_constant__ CUtensorMap tm_" + L.t->array;
  if (spec_.tma_store) params += ", const __grid_constant__ CUtensorMap tm_" + out_ + ", const bool tma_store";
  code.line(std::string("__global__ void __launch_bounds__(THREADS, 1) ") + (cluster > 1 ? "NAPKIN_CLUSTER_DIMS(CLUSTER) " : "") + "kernel(" + params + ") {");
  ++code.indent;
  code.line("#if defined(__CUDA_ARCH_FEAT_SM90_ALL)");
  code.line("constexpr int WM = T_M / CONSUMERS, MS = WM / 64;  // rows per consumer warpgroup; m64 subtiles each");
  const std::int64_t row = gemm_swizzle_row_elems(g.dtype);  // elements per 128-byte row
  const std::string rs = std::to_string(row);
  for (const auto& L : lay)
    code.line("constexpr int OFF_" + L.t->array + " = " + std::to_string(L.off) + ";  // SMEM bytes: " + L.t->array + " [" +
              (L.t->k_rows ? std::to_string(L.t->C / row) + " blocks of " + rs + " " + L.t->cols + "][" + k + " " + std::to_string(g.TK) + "][" + rs + "]"
                           : std::to_string(g.TK / row) + " blocks of " + rs + " " + k + "][" + L.t->rows + " " + std::to_string(L.t->R) + "][" + rs + "]") +
              ", 128-byte swizzle");
  c.declare_sizes(code);
  code.line("extern __shared__ __align__(1024) unsigned char smem_raw[];");
  code.line("unsigned char* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) / 1024 * 1024);");
  if (spec_.tma_store) code.line("unsigned char* const out_stage = smem + STAGES * STAGE_BYTES;  // the staging buffers of the TMA store");
  code.line(std::string("uint64_t* full = reinterpret_cast<uint64_t*>(smem + STAGES * STAGE_BYTES") + (spec_.tma_store ? " + OUT_BUFS * OUT_BYTES" : "") +
            ");  // chunk landed in the stage");
  code.line("uint64_t* empty = full + STAGES;                                           // stage consumed");
  // Several contracted axes: chunk kc is index kc / k_chunks of the outer axes (decomposed, last
  // fastest; each a TMA coordinate with a box of 1) and chunk kc % k_chunks of K.
  const bool outer = outer_;
  std::string outer_count;
  for (const auto& a : g.k_outer) outer_count += " * N_" + a;
  if (outer) code.line("const int64_t k_chunks = (N_" + k + " + T_K - 1) / T_K, chunks = k_chunks" + outer_count + ";");
  else code.line("const int64_t chunks = (N_" + k + " + T_K - 1) / T_K;");
  // Persistent: the grid holds one block per SM and each block walks the tiles `tile_blocks` apart;
  // the producer runs on into the next tile while the consumers store the last one.
  auto tiles = [&](const std::string& a, const std::string& tile) {
    const std::string n = "(N_" + a + " + " + tile + " - 1) / " + tile;
    return a == cax ? "((" + n + " + CLUSTER - 1) / CLUSTER * CLUSTER)" : "(" + n + ")";
    };
    std::string total = tiles(M, "T_M") + " * " + tiles(g.N, "T_N");
    for (const auto& b : g.batch) total += " * N_" + b;
    code.line("const int64_t tile_blocks = " + total + ";  // the non-persistent grid: one block per output tile");
  }

  /** Opens the persistent loop over output tiles (`tile_blocks` apart) and decodes the tile's origin. */
  void tile_loop() {
    code_.open("for (int64_t vb = blockIdx.x; vb < tile_blocks; vb += gridDim.x)");
    gemm_tile_origin(code_, g_, cluster_, cax_, "vb");
  }

  /** The full/empty mbarriers of the stage ring, initialised before any block of the cluster signals. */
  void barriers() {
    Code& code = code_;
    const int cluster = cluster_;
    code.open("if (threadIdx.x == 0)");
    code.open("for (int s = 0; s < STAGES; ++s)");
    code.line("napkin::mbar_init(&full[s], 1);");
    code.line("napkin::mbar_init(&empty[s], CLUSTER * CONSUMERS * 4);  // one arrival per consumer warp of every block in the cluster");
    code.close();
    code.line("napkin::mbar_init_fence();");
    code.close();
    code.line(cluster > 1 ? "napkin::cluster_sync();  // barriers initialised in both blocks before either signals the other's" : "__syncthreads();");
    if (cluster > 1) code.line("const unsigned rank = napkin::cluster_rank();");
  }

  /** Warpgroup 0: one thread streams the chunks of every tile of this block into the ring by TMA. */
  void producer() {
    Code& code = code_;
    Context& c = c_;
    const GemmForm& g = g_;
    const int cluster = cluster_;
    code.open("if (threadIdx.x / 128 == 0)");
    code.line("// producer warpgroup: one thread issues the loads");
    code.line("napkin::setmaxnreg_dec<40>();");
    code.open("if (threadIdx.x == 0)");
    code.line("int64_t it = 0;  // chunks loaded by this block, over all its tiles");
    tile_loop();
    code.open("for (int64_t kc = 0; kc < chunks; ++kc, ++it)");
    code.line("const int s = static_cast<int>(it % STAGES);");
    code.line("if (it >= STAGES) napkin::mbar_wait(&empty[s], static_cast<unsigned>((it / STAGES - 1) & 1));");
    code.line(std::string("napkin::mbar_expect_tx(&full[s], STAGE_BYTES);  // every box counts in full, zero-filled parts too") +
              (cluster > 1 ? "; the other block's multicasts too" : ""));
    code.line("unsigned char* st = smem + s * STAGE_BYTES;");
    if (outer_) {
      code.line("int64_t ko = kc / k_chunks;");
      code.line("const int64_t o_k = kc % k_chunks * T_K;");
      decompose(code, "ko", g.k_outer);
    } else {
      code.line("const int64_t o_k = kc * T_K;");
  }
  for (const auto& L : lay_) {
    // Batch coordinates: the operand's other axes, innermost first after the two matrix axes.
    const std::string extra = tma_batch_coords(c, L.t->array, L.t->rows, L.t->cols);
    for (const auto& b : L.boxes) {
      const std::string dst = "st + OFF_" + L.t->array + " + " + std::to_string(b.dst) + ", &tm_" + L.t->array + ", &full[s], ";
      if (b.rank < 0) code.line("napkin::tma_load(" + dst + b.c0 + ", " + b.c1 + extra + ");");
      else
        code.line("if (rank == " + std::to_string(b.rank) + ") napkin::tma_load_multicast(" + dst + "(1u << CLUSTER) - 1, " + b.c0 + ", " + b.c1 + extra + ");");
    }
  }
  code.close();
  code.close();
  code.close();
  }

  /** Release of stage `chunk` % STAGES: one arrival per consumer warp on every block of the cluster. */
  void release(const std::string& chunk) {
    if (cluster_ > 1) code_.line("  for (unsigned r = 0; r < CLUSTER; ++r) napkin::mbar_arrive_cluster(&empty[(" + chunk + ") % STAGES], r);");
    else code_.line("  napkin::mbar_arrive(&empty[(" + chunk + ") % STAGES]);");
  }

  /** Orders the accumulators' registers around the asynchronous wgmma (wgmma.fence's contract). */
  void fence_all() {
    code_.line("#pragma unroll");
    code_.open("for (int ms = 0; ms < MS; ++ms)");
    for (std::size_t i = 0; i < accumulators(); ++i) code_.line("napkin::fence_regs(acc" + std::to_string(i) + "[ms]);");
    code_.close();
  }

  std::size_t accumulators() const { return joint_ ? 1 : g_.gemms.size(); }

  /** The consumer warpgroups: per tile, the accumulators, the chunk loop, then the epilogue. */
  void consumers(KernelEmit& r) {
    Code& code = code_;
    const GemmForm& g = g_;
    const bool joint = joint_;
    const int joint_first = joint_first_;
    code.line("// consumer warpgroups");
    code.line("napkin::setmaxnreg_inc<232>();");
    code.line("const int cw = threadIdx.x / 128 - 1, t = threadIdx.x % 128, warp = t / 32, lane = t % 32;");
    auto contraction = [&](std::size_t i) { return "contract(" + g.gemms[i].a.array + ", " + g.gemms[i].b.array + "; " + join(g.gemms[i].node->axes) + ")"; };
    const std::size_t accs = accumulators();
    code.line("int64_t it = 0;  // chunks consumed by this block, over all its tiles");
    if (spec_.tma_store) code.line("int sb = 0;  // staging buffers used by this warpgroup (in turn)");
    tile_loop();
    const std::string acc_t = is_integer_dtype(g.dtype) ? "int32_t" : "float";  // int8: int32 accumulators (wgmma .s32.s8.s8)
    if (joint)
      code.line(acc_t + " acc0[MS][T_N] = {};  // registers: " + contraction(joint_first) + " in columns [0, T_N), " + contraction(1 - joint_first) +
                " in [T_N, 2 T_N)");
    else
      for (std::size_t i = 0; i < accs; ++i) code.line(acc_t + " acc" + std::to_string(i) + "[MS][T_N / 2] = {};  // registers: " + contraction(i));
    main_loop();
    code.line("napkin::wgmma_wait<0>();");
    fence_all();
    code.line("if (chunks > 0 && lane == 0)  // the tile's last chunk: the producer refills it while this block stores");
    release("it - 1");
    code.line("// epilogue: per m64 subtile, warp w holds rows 16w..16w+15 as m16n8 accumulator tiles");
    epilogue(r);
    code.close();
    if (spec_.tma_store) code.line("if (t == 0) napkin::bulk_wait<0>();  // this warpgroup's TMA stores are complete");
  }

  /** One tile's chunk loop: wait for the stage, issue the wgmmas of its k16 steps, release the previous stage. */
  void main_loop() {
    Code& code = code_;
    const GemmForm& g = g_;
    const bool joint = joint_;
    const int joint_first = joint_first_;
    const std::string& wg_name = wg_name_;
    code.open("for (int64_t kc = 0; kc < chunks; ++kc, ++it)");
    code.line("const int s = static_cast<int>(it % STAGES);");
    code.line("napkin::mbar_wait(&full[s], static_cast<unsigned>((it / STAGES) & 1));");
    code.line("const unsigned char* st = smem + s * STAGE_BYTES;");
    fence_all();
    code.line("napkin::wgmma_fence();");
    code.line("#pragma unroll");
    code.open("for (int kk = 0; kk < T_K; kk += " + std::to_string(mma_->k) + ")");
    const std::string row = std::to_string(gemm_swizzle_row_elems(g.dtype)), esize = std::to_string(dtype_bits(g.dtype) / 8);
    auto desc = [&](const GemmOperand& o, bool is_a) {
      const std::string R = is_a ? "T_M" : "T_N";
      const std::string row0 = is_a ? "(cw * WM + ms * 64)" : "0";
      if (o.k_inner)  // [T_K/row blocks][R rows][row]: advance 32 bytes per MMA k step inside the swizzle atom
        return "napkin::smem_desc(st + OFF_" + o.array + " + (kk / " + row + ") * " + R + " * 128 + " + row0 + " * 128 + (kk % " + row + ") * " + esize +
               ", 16, 1024)";
      // [R/64 blocks][T_K rows][64]: a k16 step is 16 rows of 128 bytes; blocks T_K * 128 bytes apart
      return "napkin::smem_desc(st + OFF_" + o.array + " + " + row0 + " / 64 * T_K * 128 + kk * 128, T_K * 128, 1024)";
    };
    std::set<std::string> described;
    for (std::size_t i = 0; i < g.gemms.size(); ++i)
      if ((!joint || static_cast<int>(i) == joint_first) && described.insert(g.gemms[i].b.array).second)
        code.line("const uint64_t db_" + g.gemms[i].b.array + " = " + desc(g.gemms[i].b, false) + ";" +
                  (joint ? "  // and the B tile after it: N = 2 T_N" : ""));
    code.line("#pragma unroll");
    code.open("for (int ms = 0; ms < MS; ++ms)");
    code.line("const uint64_t da = " + desc(g.gemms[0].a, true) + ";");
    for (std::size_t i = 0; i < g.gemms.size(); ++i) {
      if (joint && static_cast<int>(i) != joint_first) continue;
      code.line(wg_name + "<" + (g.gemms[i].a.k_inner ? "0" : "1") + ", " + (g.gemms[i].b.k_inner ? "0" : "1") + ">(acc" + std::to_string(joint ? 0 : i) +
                "[ms], da, db_" + g.gemms[i].b.array + ");");
  }
  code.close();
  code.close();
  code.line("napkin::wgmma_commit();");
  fence_all();
  code.line("napkin::wgmma_wait<1>();  // the MMAs of the tile's previous chunk are done: release its stage");
  code.line("if (kc > 0 && lane == 0)");
  release("it - 1");
  code.close();
  }

  /** The epilogue: 16-byte stores on interior tiles of 16-bit outputs (gemm_wide_store.hpp), else
   *  the mma.sync variant's bounded and paired stores (gemm_epilogue). */
  void epilogue(KernelEmit& r) {
    Code& code = code_;
    Context& c = c_;
    const KernelChoice& kc = kc_;
    const GemmForm& g = g_;
    const bool joint = joint_;
    const int joint_first = joint_first_;
    const std::string wide = wide_store_condition(c, kc, g);
    const bool integer = is_integer_dtype(g.dtype);
    auto acc = [&](std::size_t i) {
      const std::string a = joint ? std::string("acc0[ms][") + (static_cast<int>(i) == joint_first ? "" : "T_N / 2 + ") + "nt * 4 + h * 2 + q]"
                                  : "acc" + std::to_string(i) + "[ms][nt * 4 + h * 2 + q]";
      return integer ? "static_cast<float>(" + a + ")" : a;  // int32 -> fp32 where the epilogue reads it
    };
    auto fragment_loops = [&](bool by_32_columns, const std::function<void()>& body) {
      code.line("#pragma unroll");
      code.open("for (int ms = 0; ms < MS; ++ms)");
      code.line("#pragma unroll");
      code.open(by_32_columns ? "for (int ng = 0; ng < T_N / 32; ++ng)" : "for (int nt = 0; nt < T_N / 8; ++nt)");
      code.line("#pragma unroll");
      code.open("for (int h = 0; h < 2; ++h)");
      code.line(std::string("const int row = cw * WM + ms * 64 + warp * 16 + lane / 4 + h * 8") + (by_32_columns ? ";" : ", col = nt * 8 + (lane % 4) * 2;"));
      body();
      code.close();
      code.close();
      code.close();
    };
    if (spec_.tma_store) {  // interior tiles through SMEM by TMA; the rest as the mma.sync variant stores
      code.line("// interior tiles through SMEM by TMA unless the host turned it off (napkin::tma_store_enabled)");
      code.open("if (tma_store && n_M == T_M && n_N == T_N)");
      tma_store_epilogue(acc);
      code.close(" else {");
      ++code.indent;
      gemm_epilogue(code, c, kc, g, [&](const std::function<void()>& body) { fragment_loops(false, body); }, acc, r.stored);
      --code.indent;
      code.line("}");
      return;
    }
    // Interior tiles of 16-bit outputs: 16-byte stores (gemm_wide_store.hpp); the rest as the mma.sync variant stores.
    if (!wide.empty()) {
      code.open("if (" + wide + ")");
      gemm_wide_store_epilogue(code, c, kc, g, [&](const std::function<void()>& body) { fragment_loops(true, body); }, acc, r.stored);
      code.close(" else {");
      ++code.indent;
  }
  gemm_epilogue(code, c, kc, g, [&](const std::function<void()>& body) { fragment_loops(false, body); }, acc, r.stored);
  if (!wide.empty()) {
    --code.indent;
    code.line("}");
  }
  }

  /** The interior tile's epilogue through SMEM (lowering's tma_store, gemm_form.hpp): per block of
   *  64 columns, each consumer warpgroup waits until the buffer it used OUT_BUFS blocks ago (KernelSpec::tma_store_buffers) has been
   *  read by its TMA store, writes its rows by stmatrix (16x16 blocks of accumulator fragments,
   *  no shuffles; 128-byte swizzle: 16-byte chunk c of row r at chunk c ^ (r % 8)), makes them
   *  visible to the async proxy, and one thread stores them by TMA, not waiting for the write. */
  void tma_store_epilogue(const std::function<std::string(std::size_t)>& acc) {
    Code& code = code_;
    const GemmForm& g = g_;
    const std::string batch = tma_batch_coords(c_, out_, g.M, g.N);
    code.line("// interior tile: through SMEM, stored by TMA while the next tile's MMAs run (named barrier 1 + cw: this warpgroup)");
    code.line("#pragma unroll");
    code.open("for (int cb = 0; cb < T_N / 64; ++cb, ++sb)");
    code.line("unsigned char* const ob = out_stage + (sb % OUT_BUFS) * OUT_BYTES;");
    code.line("if (t == 0) napkin::bulk_wait_read<OUT_BUFS - 1>();  // the store from this buffer OUT_BUFS blocks ago has read it");
    code.line("napkin::named_sync(1 + cw, 128);");
    code.line("#pragma unroll");
    code.open("for (int ms = 0; ms < MS; ++ms)");
    code.line("const int row0 = cw * WM + ms * 64 + warp * 16;  // this warp's 16 rows of the m64 subtile");
    code.line("// stmatrix: lanes 8i..8i+7 address the rows of matrix i (rows 8 (i % 2).., 16-byte chunk i / 2 of the pair)");
    code.line("const int srow = row0 + ((lane / 8) % 2) * 8 + lane % 8, schunk = lane / 16;");
    code.line("#pragma unroll");
    code.open("for (int j = 0; j < 4; ++j)");
    code.line("const int nt0 = cb * 8 + j * 2;  // 8-column blocks nt0, nt0 + 1: 16-byte chunks 2j, 2j + 1 of the block's rows");
    gemm_pack_matrices(code, c_, kc_, g, acc);
    code.line("// 16-byte chunk c of row r sits at c ^ (r % 8): each 8-row matrix hits 8 distinct 16-byte slots");
    code.line("napkin::stsm_x4(ob + srow * 128 + (((j * 2 + schunk) ^ (srow % 8)) * 16), p_" + out_ + "[0], p_" + out_ + "[1], p_" + out_ +
              "[2], p_" + out_ + "[3]);");
    code.close();
    code.close();
    code.line("napkin::fence_proxy_async();  // the writes, before the TMA store reads them");
    code.line("napkin::named_sync(1 + cw, 128);");
    code.open("if (t == 0)");
    code.line("napkin::tma_store(&tm_" + out_ + ", ob + cw * WM * 128, static_cast<int>(o_" + g.N + ") + cb * 64, static_cast<int>(o_" + g.M + ") + cw * WM" +
              batch + ");");
    code.line("napkin::bulk_commit();");
    code.close();
    code.close();
  }

  /** Host statements: the tensor maps and the persistent launch, falling back to `fallback_launch`. */
  std::string launch(const std::string& fallback_launch) const {
    std::vector<TmaOperand> ops;
    for (const auto& L : lay_) ops.push_back({L.t->array, L.t->cols, L.t->rows, L.box_inner, L.box_outer});
    if (spec_.tma_store) ops.push_back({out_, g_.N, g_.M, 64, static_cast<std::uint32_t>(g_.TM / consumers_), c_.dtype(out_)});
    // Persistent grid: at most one block per SM (the SMEM ring fills the SM), whole clusters.
    const std::string grid = "napkin::persistent_grid(blocks, " + std::to_string(cluster_) + ")";
    return tma_launch(c_, kernel_ns(kc_.plan.name), ops, g_.dtype, fallback_launch, "true", grid, spec_.tma_store ? ", napkin::tma_store_enabled()" : "");
  }

  Context& c_;
  const KernelChoice& kc_;
  const GemmForm& g_;
  const KernelSpec& spec_;
  const MmaShape* mma_;
  const int consumers_, cluster_, stages_;
  const std::string cax_;
  std::vector<Layout> lay_;
  std::int64_t stage_bytes_ = 0;
  int joint_first_ = -1;
  bool joint_ = false, outer_ = false;
  std::string wg_name_, wg_fn_;
  std::string out_;  ///< the output stored by TMA (spec_.tma_store)
  Code code_;
};

}  // namespace

KernelEmit emit_gemm_wgmma(Context& c, const KernelChoice& kc, const GemmForm& g, const std::string& fallback_launch) {
  return WgmmaGemmRenderer(c, kc, g).render(fallback_launch);
}

}  // namespace napkin::cuda
