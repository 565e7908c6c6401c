// Operand staging by TMA of the gemm renderer (contract: render.hpp): the SMEM stage layout (each
// operand tile as 128-byte swizzled rows in 1024-byte atoms, its TMA boxes, a cluster's shared
// tiles split into boxes multicast by the ranks in turn), the full/empty mbarrier ring, and the
// producer warpgroup, one thread of which streams every tile's chunks into the ring.
#include <algorithm>

#include "emit/cuda/render.hpp"

namespace napkin::cuda {

namespace {

/** SwiGLU's dual GEMM: when both B tiles are stored alike and side by side in SMEM, one wgmma of
 *  N = 2 T_N multiplies A by both (columns [0, T_N) of the accumulator belong to the B tile placed
 *  first), so each m64 subtile of A is read from SMEM once per k16 instead of twice. Returns the
 *  gemm whose B tile comes first, -1: one wgmma per gemm. */
int joint_gemm_first(const GemmForm& g, const std::vector<GemmTmaTile>& lay) {
  int joint_first = -1;
  if (g.gemms.size() == 2 && 2 * g.TN <= 256 && g.gemms[0].a.array == g.gemms[1].a.array && g.gemms[0].b.k_inner == g.gemms[1].b.k_inner &&
      (!g.gemms[0].b.k_inner || g.TK == 64)) {
    auto find = [&](const std::string& a) { return std::find_if(lay.begin(), lay.end(), [&](const GemmTmaTile& L) { return L.t->array == a; }); };
    auto b0 = find(g.gemms[0].b.array), b1 = find(g.gemms[1].b.array);
    if (b0 != lay.end() && b1 != lay.end() && b0->bytes == b1->bytes) {
      if (b1->off == b0->off + b0->bytes) joint_first = 0;
      else if (b0->off == b1->off + b1->bytes) joint_first = 1;
    }
  }
  return joint_first;
}

}  // namespace

GemmTmaStage gemm_tma_stage(const GemmForm& g, int cluster, const std::string& cax) {
  GemmTmaStage st;
  const std::int64_t row = gemm_swizzle_row_elems(g.dtype), esize = dtype_bits(g.dtype) / 8;
  const std::string row_s = std::to_string(row);
  for (const auto& t : g.tiles) {
    GemmTmaTile L{&t, st.bytes, t.R * t.C * esize, {}, static_cast<std::uint32_t>(row), 0};
    const std::string free = t.k_rows ? t.cols : t.rows;
    const std::int64_t F = t.k_rows ? t.C : t.R;  // extent along the free axis
    // Shared tiles (not varying along the cluster's axis) are split into `cluster` times as many
    // boxes, multicast by the ranks in turn.
    const int split = t.rows != cax && t.cols != cax ? cluster : 1;
    if (!t.k_rows) {
      const std::int64_t rb = gemm_tma_box_rows(F, split);
      NAPKIN_ASSERT(rb > 0) << "tile of " << t.array << " not whole TMA boxes, which lowering refuses";
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
    st.bytes += L.bytes;
    st.tiles.push_back(L);
  }
  NAPKIN_ASSERT(st.bytes == gemm_wgmma_stage_bytes(g)) << "wgmma stage bytes differ from lowering's";
  st.joint_first = joint_gemm_first(g, st.tiles);
  return st;
}

void gemm_tma_barriers(Code& code, int cluster, int releasers) {
  code.open("if (threadIdx.x == 0)");
  code.open("for (int s = 0; s < STAGES; ++s)");
  code.line("napkin::mbar_init(&full[s], 1);");
  if (releasers == 1)
    code.line("napkin::mbar_init(&empty[s], CLUSTER * 4);  // one arrival per warp of the consumer whose tile it holds, in every block of the cluster");
  else
    code.line("napkin::mbar_init(&empty[s], CLUSTER * CONSUMERS * 4);  // one arrival per consumer warp of every block in the cluster");
  code.close();
  code.line("napkin::mbar_init_fence();");
  code.close();
  code.line(cluster > 1 ? "napkin::cluster_sync();  // barriers initialised in both blocks before either signals the other's" : "__syncthreads();");
  if (cluster > 1) code.line("const unsigned rank = napkin::cluster_rank();");
}

void gemm_tma_producer(Code& code, Context& c, const GemmForm& g, const GemmTmaStage& st, int cluster, const std::string& cax) {
  code.open("if (threadIdx.x / 128 == 0)");
  code.line("// producer warpgroup: one thread issues the loads");
  code.line("napkin::setmaxnreg_dec<40>();");
  code.open("if (threadIdx.x == 0)");
  code.line("int64_t it = 0;  // chunks loaded by this block, over all its tiles");
  gemm_tile_walk(code, g, cluster, cax);
  code.open("for (int64_t kc = 0; kc < chunks; ++kc, ++it)");
  code.line("const int s = static_cast<int>(it % STAGES);");
  code.line("if (it >= STAGES) napkin::mbar_wait(&empty[s], static_cast<unsigned>((it / STAGES - 1) & 1));");
  code.line(std::string("napkin::mbar_expect_tx(&full[s], STAGE_BYTES);  // every box counts in full, zero-filled parts too") +
            (cluster > 1 ? "; the other block's multicasts too" : ""));
  code.line("unsigned char* st = smem + s * STAGE_BYTES;");
  if (!g.k_outer.empty()) {
    code.line("int64_t ko = kc / k_chunks;");
    code.line("const int64_t o_k = kc % k_chunks * T_K;");
    decompose(code, "ko", g.k_outer);
  } else {
    code.line(g.k_band ? "const int64_t o_k = (k_first + kc) * T_K;" : "const int64_t o_k = kc * T_K;");
  }
  for (const auto& L : st.tiles) {
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
  code.close(" else {");
  ++code.indent;
}

void gemm_tma_stage_wait(Code& code) {
  code.line("const int s = static_cast<int>(it % STAGES);");
  code.line("napkin::mbar_wait(&full[s], static_cast<unsigned>((it / STAGES) & 1));");
  code.line("const unsigned char* st = smem + s * STAGE_BYTES;");
}

void gemm_tma_release(Code& code, int cluster, const std::string& chunk) {
  if (cluster > 1) code.line("  for (unsigned r = 0; r < CLUSTER; ++r) napkin::mbar_arrive_cluster(&empty[(" + chunk + ") % STAGES], r);");
  else code.line("  napkin::mbar_arrive(&empty[(" + chunk + ") % STAGES]);");
}

}  // namespace napkin::cuda
