// Operand staging of the CUDA renderers (contract: render.hpp): where each operand's tile starts
// in global memory, and how its chunks reach SMEM (cp.async loaders into a ring of stages, or a
// TMA producer warpgroup behind full/empty mbarriers).
#include "emit/cuda/render.hpp"

namespace napkin::cuda {

void gemm_operand_origins(Code& code, Context& c, const GemmForm& g) {
  const std::string &M = g.M, &N = g.N, &k = g.K;
  for (const auto& t : g.tiles) {
    std::string origin = offset(c, t.array, [&](const std::string& a) {
      if (a == k || contains(g.k_outer, a)) return std::string("0");
      if (a == M || a == N) return "o_" + a;
      return "i_" + a;
    });
    code.line("const T* g_" + t.array + " = a." + t.array + " + " + origin + ";  // tile origin");
    code.line("const int64_t rs_" + t.array + " = " + stride(c, t.array, t.rows) + ";  // elements between rows of the tile (" + t.rows + ")");
    std::string outer;  // the outer contracted axes' offsets keep the alignment too
    for (const auto& a : g.k_outer) outer += " | uint64_t(" + stride(c, t.array, a) + ") * sizeof(T)";
    code.line("const int vec_" + t.array + " = napkin::copy_width(reinterpret_cast<uintptr_t>(g_" + t.array + ") | uint64_t(rs_" + t.array + ") * sizeof(T)" +
              outer + ");  // bytes per cp.async (16, 8, 4; 0: element by element)");
  }
}

void gemm_chunk_count(Code& code, const GemmForm& g) {
  // Several contracted axes: chunk kc is index kc / k_chunks of the outer axes (decomposed, last
  // fastest) and chunk kc % k_chunks of K; each operand's tile sits at its outer axes' offset.
  if (g.k_band) return;  // each tile's own chunks (gemm_tile_origin: gemm_band_chunks)
  std::string outer_count;
  for (const auto& a : g.k_outer) outer_count += " * N_" + a;
  if (!g.k_outer.empty()) code.line("const int64_t k_chunks = (N_" + g.K + " + T_K - 1) / T_K, chunks = k_chunks" + outer_count + ";");
  else code.line("const int64_t chunks = (N_" + g.K + " + T_K - 1) / T_K;");
}

void gemm_chunk_loader(Code& code, Context& c, const GemmForm& g) {
  const std::string &M = g.M, &k = g.K;
  const bool outer = !g.k_outer.empty();
  code.open(std::string("auto load_chunk = [&](int stage, int64_t ") + (outer ? "kc)" : "o_k)"));
  code.line("T* s = smem + stage * STAGE_ELEMS;");
  if (outer) {
    code.line("int64_t ko = kc / k_chunks;");
    code.line("const int64_t o_k = kc % k_chunks * T_K;");
    decompose(code, "ko", g.k_outer);
  }
  code.line("const int n_K = static_cast<int>(min(int64_t{T_K}, N_" + k + " - o_k));");
  for (const auto& t : g.tiles) {
    std::string R = t.rows == k ? "T_K" : (t.rows == M ? "T_M" : "T_N"), C = t.cols == k ? "T_K" : (t.cols == M ? "T_M" : "T_N");
    std::string nr = t.rows == k ? "n_K" : (t.rows == M ? "n_M" : "n_N"), nc = t.cols == k ? "n_K" : (t.cols == M ? "n_M" : "n_N");
    std::string src = t.k_rows ? "g_" + t.array + " + o_k * rs_" + t.array : "g_" + t.array + " + o_k";
    for (const auto& a : g.k_outer) src += " + i_" + a + " * " + stride(c, t.array, a);
    code.line("napkin::load_tile<" + R + ", " + C + ", P_" + t.array + ", THREADS>(s + OFF_" + t.array + ", " + src + ", rs_" + t.array + ", " + nr +
              ", " + nc + ", vec_" + t.array + ");");
  }
  code.close(";");
}

void gemm_cp_async_prologue(Code& code, const GemmForm& g) {
  code.line("// prologue: the first STAGES - 1 chunks in flight");
  code.open("for (int s = 0; s < STAGES - 1; ++s)");
  code.line(!g.k_outer.empty() ? "if (s < chunks) load_chunk(s, s);"
                                : std::string("if (s < chunks) load_chunk(s, ") + (g.k_band ? "(k_first + s)" : "s") + " * int64_t{T_K});");
  code.line("napkin::cp_async_commit();");
  code.close();
}

void gemm_cp_async_stage(Code& code, const GemmForm& g) {
  code.line("napkin::cp_async_wait<STAGES - 2>();  // chunk kc has landed in SMEM");
  code.line("__syncthreads();                     // ... for every thread; and chunk kc - 1 is consumed");
  code.line(std::string("if (kc + STAGES - 1 < chunks) load_chunk((kc + STAGES - 1) % STAGES, ") +
            (!g.k_outer.empty() ? "kc + STAGES - 1);" : g.k_band ? "(k_first + kc + STAGES - 1) * T_K);" : "(kc + STAGES - 1) * T_K);"));
  code.line("napkin::cp_async_commit();");
  code.line("const T* s = smem + (kc % STAGES) * STAGE_ELEMS;");
}

void flash_cp_async_operands(Code& k, Context& c, const FlashForm& f) {
  const std::string &M = f.M, &x = f.x, &dk = f.dk, &dv = f.dv, &Qn = f.Qn, &Kn = f.Kn, &Vn = f.Vn;
  const AxisList& batch = f.batch;
  auto origin = [&](const std::string& arr, const std::string& row_axis, const std::string& row0) {
    return "a." + arr + " + " + offset(c, arr, [&](const std::string& ax) { return ax == row_axis ? row0 : (contains(batch, ax) ? "i_" + ax : "0"); });
  };
  k.line("const T* Q_gmem = " + origin(Qn, M, "o_" + M) + ";  // " + Qn + " tile [" + M + "][" + dk + "]");
  k.line("const T* K_gmem = " + origin(Kn, x, "0") + ";  // " + Kn + " [" + x + "][" + dk + "]");
  k.line("const T* V_gmem = " + origin(Vn, x, "0") + ";  // " + Vn + " [" + x + "][" + dv + "]");
  k.line("const int64_t rs_Q = " + stride(c, Qn, M) + ", rs_K = " + stride(c, Kn, x) + ", rs_V = " + stride(c, Vn, x) + ";");
  k.line("const int vec = napkin::copy_width(reinterpret_cast<uintptr_t>(Q_gmem) | reinterpret_cast<uintptr_t>(K_gmem) | reinterpret_cast<uintptr_t>(V_gmem) | "
         "uint64_t(rs_Q | rs_K | rs_V) * sizeof(T));  // bytes per cp.async (16, 8, 4; 0: element by element)");
}

void flash_cp_async_loaders(Code& k, const FlashForm& f) {
  const std::string& x = f.x;
  k.open("auto load_k = [&](int64_t kc)");
  k.line("napkin::load_tile<T_X, D_K, P_K, THREADS>(smem + OFF_K + (kc % 2) * T_X * P_K, K_gmem + kc * T_X * rs_K, rs_K, static_cast<int>(min(int64_t{T_X}, N_" +
         x + " - kc * T_X)), D_K, vec);");
  k.close(";");
  k.open("auto load_v = [&](int64_t kc)");
  k.line("napkin::load_tile<T_X, D_V, P_V, THREADS>(smem + OFF_V + (kc % 2) * T_X * P_V, V_gmem + kc * T_X * rs_V, rs_V, static_cast<int>(min(int64_t{T_X}, N_" +
         x + " - kc * T_X)), D_V, vec);");
  k.close(";");
}

void flash_cp_async_prologue(Code& k) {
  k.line("// prologue: Q and the first K chunk (one cp.async group), the first V chunk (another)");
  k.line("napkin::load_tile<T_Q, D_K, P_Q, THREADS>(smem, Q_gmem, rs_Q, n_q, D_K, vec);");
  k.line("if (chunks > 0) load_k(0);");
  k.line("napkin::cp_async_commit();");
  k.line("if (chunks > 0) load_v(0);");
  k.line("napkin::cp_async_commit();");
  k.line("napkin::cp_async_wait<1>();");
  k.line("__syncthreads();");
}

void flash_cp_async_k_stage(Code& k) {
  k.line("napkin::cp_async_wait<1>();  // K of chunk kc has landed");
  k.line("__syncthreads();");
  k.line("if (kc + 1 < chunks) load_k(kc + 1);  // next K into the other buffer, during this chunk");
  k.line("napkin::cp_async_commit();");
  k.line("const T* K_smem = smem + OFF_K + (kc % 2) * T_X * P_K;");
}

void flash_cp_async_v_stage(Code& k) {
  k.line("napkin::cp_async_wait<1>();  // V of chunk kc has landed");
  k.line("__syncthreads();");
  k.line("const T* V_smem = smem + OFF_V + (kc % 2) * T_X * P_V;");
}

void flash_cp_async_next_v(Code& k) {
  k.line("if (kc + 1 < chunks) load_v(kc + 1);  // next V into the other buffer, during the next S");
  k.line("napkin::cp_async_commit();");
}

void producer_warpgroup_begin(Code& k, int threads) {
  k.line("__syncthreads();");
  k.open("if (threadIdx.x / 128 == 0)");
  k.line("// producer warpgroup");
  k.line("napkin::setmaxnreg_dec<24>();");
  k.line(threads == 1 ? "if (threadIdx.x != 0) return;" : "if (threadIdx.x >= " + std::to_string(threads) + ") return;");
}

void flash_tma_ring(Code& k, Context& c, const FlashForm& f) {
  const std::string &M = f.M, &x = f.x;
  k.open("if (threadIdx.x == 0)");
  k.line("napkin::mbar_init(q_full, 1);");
  k.line("for (int s = 0; s < 2; ++s) napkin::mbar_init(&k_full[s], 1), napkin::mbar_init(&v_full[s], 1), napkin::mbar_init(&k_empty[s], CONSUMERS * 128), napkin::mbar_init(&v_empty[s], CONSUMERS * 128);");
  k.line("napkin::mbar_init_fence();");
  k.close();
  producer_warpgroup_begin(k);
  const std::string qb = tma_batch_coords(c, f.Qn, M, f.dk), kb = tma_batch_coords(c, f.Kn, x, f.dk), vb = tma_batch_coords(c, f.Vn, x, f.dv);
  const std::string row = std::to_string(flash_swizzle_row_elems(f));  // elements per 128-byte swizzle row: one TMA box's columns
  k.line("napkin::mbar_expect_tx(q_full, Q_BYTES);");
  k.line("for (int j = 0; j < D_K / " + row + "; ++j) napkin::tma_load(smem + j * T_Q * 128, &tm_" + f.Qn + ", q_full, j * " + row + ", static_cast<int>(o_" + M + ")" + qb + ");");
  // K runs one chunk ahead of V: K_kc's stage is released after S_kc, V's only after O += P V, so waiting
  // for V's stage first would hold back the next K
  auto v_load = [&] {  // V of chunk `vc`
    k.line("const int sv = static_cast<int>(vc % 2);");
    k.line("if (vc >= 2) napkin::mbar_wait(&v_empty[sv], static_cast<unsigned>((vc / 2 - 1) & 1));");
    k.line("napkin::mbar_expect_tx(&v_full[sv], V_BYTES);");
    if (f.v_x_inner)  // V [.., dv, x]: boxes of `row` keys by D_V rows, K-major for O += P V
      k.line("for (int j = 0; j < T_X / " + row + "; ++j) napkin::tma_load(smem + OFF_V + sv * V_BYTES + j * D_V * 128, &tm_" + f.Vn +
             ", &v_full[sv], static_cast<int>(vc * T_X) + j * " + row + ", 0" + vb + ");");
    else
      k.line("for (int j = 0; j < D_V / 64; ++j) napkin::tma_load(smem + OFF_V + sv * V_BYTES + j * T_X * 128, &tm_" + f.Vn +
             ", &v_full[sv], j * 64, static_cast<int>(vc * T_X)" + vb + ");");
  };
  k.open("for (int64_t kc = 0; kc < chunks; ++kc)");
  k.line("const int s = static_cast<int>(kc % 2);");
  k.line("if (kc >= 2) napkin::mbar_wait(&k_empty[s], static_cast<unsigned>((kc / 2 - 1) & 1));");
  k.line("napkin::mbar_expect_tx(&k_full[s], K_BYTES);");
  k.line("for (int j = 0; j < D_K / " + row + "; ++j) napkin::tma_load(smem + OFF_K + s * K_BYTES + j * T_X * 128, &tm_" + f.Kn +
         ", &k_full[s], j * " + row + ", static_cast<int>(kc * T_X)" + kb + ");");
  k.open("if (kc >= 1)");
  k.line("const int64_t vc = kc - 1;");
  v_load();
  k.close();
  k.close();
  k.open("");
  k.line("const int64_t vc = chunks - 1;");
  v_load();
  k.close();
  k.line("return;");
  k.close();
}

}  // namespace napkin::cuda
