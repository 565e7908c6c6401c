// Grid decode of the CUDA renderers (contract: render.hpp): which tile of the output, and which
// batch indices, a thread block computes, and how many chunks of the streamed axis it walks.
#include <algorithm>

#include "emit/cuda/render.hpp"

namespace napkin::cuda {

/** The banded grid order (GemmForm::band_order): the other axis's tiles and the batch fastest,
 *  the band axis's tiles slowest by rank, the longest first. */
void gemm_band_tile_origin(Code& code, const GemmForm& g, const std::string& block) {
  const std::string &M = g.M, &N = g.N, &a = g.k_band_axis;
  const std::string other = a == M ? N : M;
  code.line("// grid: tiles of " + other + (g.batch.empty() ? std::string() : ", then " + join(g.batch)) + " fastest, tiles of " + a +
            " slowest, the longest first (GemmForm::band_order: the zero band gives the tiles of " + a + " different numbers of chunks)");
  code.line("[[maybe_unused]] const int64_t tiles_m = (N_" + M + " + T_M - 1) / T_M, tiles_n = (N_" + N + " + T_N - 1) / T_N;");
  code.line("int64_t bid = " + block + ";");
  code.line("const int64_t t_" + other + " = bid % tiles_" + (a == M ? "n" : "m") + ";");
  code.line("bid /= tiles_" + std::string(a == M ? "n" : "m") + ";");
  decompose(code, "bid", g.batch);
  const std::string tiles = a == M ? "tiles_m" : "tiles_n", T = a == M ? "T_M" : "T_N", To = a == M ? "T_N" : "T_M";
  code.line("const int64_t o_" + a + " = " + (g.band_reversed ? "(" + tiles + " - 1 - bid)" : std::string("bid")) + " * " + T + ";  // bid: the rank");
  code.line("const int64_t o_" + other + " = t_" + other + " * " + To + ";");
  code.line("const int n_M = static_cast<int>(min(int64_t{T_M}, N_" + M + " - o_" + M + ")), n_N = static_cast<int>(min(int64_t{T_N}, N_" + N +
            " - o_" + N + "));");
  gemm_band_chunks(code, g);
}

void gemm_tile_origin(Code& code, const GemmForm& g, int cluster, const std::string& cluster_axis, const std::string& block) {
  if (g.band_order) return gemm_band_tile_origin(code, g, block);
  const std::string &M = g.M, &N = g.N;
  const std::string batch = g.batch.empty() ? "no batch axes" : "batch axes " + join(g.batch);
  // A cluster takes `cluster` consecutive tiles along its axis and one along the other: the
  // rasterisation runs over cluster rows (of M) or cluster columns (of N) instead of tiles.
  const bool along_m = cluster > 1 && cluster_axis == M, along_n = cluster > 1 && !along_m;
  const std::string rows = along_m ? "rows" : "tiles_m", cols = along_n ? "cols" : "tiles_n";
  const std::string group = std::to_string(along_m ? std::max(1, 8 / cluster) : 8);  // groups of 8 M tiles (in cluster rows along M)
  if (cluster > 1)
    code.line("// grid: clusters of " + std::to_string(cluster) + " blocks over " + (along_m ? std::to_string(cluster) + " tiles of " + M + " and one of " + N
                                                                                          : "one tile of " + M + " and " + std::to_string(cluster) + " tiles of " + N) +
              "; " + (along_m ? "cluster rows of " + M + " x tiles of " + N : "tiles of " + M + " x cluster columns of " + N) + ", in groups of 8 " + M +
              " tiles; then " + batch);
  else
    code.line("// grid: tiles of " + M + " x tiles of " + N + ", in groups of 8 " + M + " tiles; then " + batch);
  code.line("const int64_t tiles_m = (N_" + M + " + T_M - 1) / T_M, tiles_n = (N_" + N + " + T_N - 1) / T_N;");
  if (along_m) code.line("const int64_t rows = (tiles_m + CLUSTER - 1) / CLUSTER;");
  if (along_n) code.line("const int64_t cols = (tiles_n + CLUSTER - 1) / CLUSTER;");
  code.line("int64_t bid = " + block + (cluster > 1 ? " / CLUSTER" : "") + ";");
  code.line("const int64_t tile = bid % (" + rows + " * " + cols + ");");
  code.line("bid /= " + rows + " * " + cols + ";");
  code.line("const int64_t first_m = tile / (" + group + " * " + cols + ") * " + group + ", group_m = min(int64_t{" + group + "}, " + rows + " - first_m);");
  const std::string r = "first_m + tile % (" + group + " * " + cols + ") % group_m", c = "tile % (" + group + " * " + cols + ") / group_m";
  code.line("const int64_t o_" + M + " = " + (along_m ? "((" + r + ") * CLUSTER + " + block + " % CLUSTER) * T_M;" : "(" + r + ") * T_M;"));
  code.line("const int64_t o_" + N + " = " + (along_n ? "((" + c + ") * CLUSTER + " + block + " % CLUSTER) * T_N;" : "(" + c + ") * T_N;"));
  decompose(code, "bid", g.batch);
  code.line("const int n_M = static_cast<int>(min(int64_t{T_M}, N_" + M + " - o_" + M + ")), n_N = static_cast<int>(min(int64_t{T_N}, N_" + N +
            " - o_" + N + "));");
  if (g.k_band) gemm_band_chunks(code, g);
}

void gemm_band_chunks(Code& code, const GemmForm& g) {
  const ZeroBand o = oriented(*g.k_band, g.k_band_axis);  // index(K) - index(axis) in [lo, hi]
  const std::string& a = g.k_band_axis;
  const std::string n = a == g.M ? "n_M" : "n_N";
  code.line("// zero band (GemmForm::k_band): the tile's " + a + " [o_" + a + ", o_" + a + " + " + n + ") has nonzeros of " + o.b + " only at " +
            (o.lo ? std::to_string(*o.lo) + " <= " : std::string()) + g.K + " - " + a + (o.hi ? " <= " + std::to_string(*o.hi) : std::string()) +
            ": it walks those chunks of " + g.K + " alone");
  code.line("[[maybe_unused]] const int64_t k_first = " + (o.lo ? "max(int64_t{0}, o_" + a + " + (" + std::to_string(*o.lo) + ")) / T_K" : std::string("0")) + ";");
  code.line("int64_t k_end = (N_" + g.K + " + T_K - 1) / T_K;");
  if (o.hi) {
    code.line("const int64_t k_last = o_" + a + " + " + n + " - 1 + (" + std::to_string(*o.hi) + ");  // the last index of " + g.K + " with a nonzero");
    code.line("k_end = k_last < 0 ? 0 : min(k_end, k_last / T_K + 1);");
  }
  code.line("const int64_t chunks = max(int64_t{0}, k_end - k_first);");
}

void gemm_tile_count(Code& code, const GemmForm& g, const std::string& cluster_axis) {
  auto tiles = [&](const std::string& a, const std::string& tile) {
    const std::string n = "(N_" + a + " + " + tile + " - 1) / " + tile;
    return a == cluster_axis ? "((" + n + " + CLUSTER - 1) / CLUSTER * CLUSTER)" : "(" + n + ")";
  };
  std::string total = tiles(g.M, "T_M") + " * " + tiles(g.N, "T_N");
  for (const auto& b : g.batch) total += " * N_" + b;
  code.line("const int64_t tile_blocks = " + total + ";  // the non-persistent grid: one block per output tile");
}

void gemm_tile_walk(Code& code, const GemmForm& g, int cluster, const std::string& cluster_axis, bool pingpong_consumer) {
  // A pingpong consumer counts the block's tiles (`turn`) to take every CONSUMERS-th; nothing else reads it.
  const std::string turn = pingpong_consumer ? ", ++turn" : "";
  if (pingpong_consumer) code.line("int64_t turn = 0;  // tiles this block walked");
  if (g.band_order)  // snake order: a block that took a long tile takes a short one next (GemmForm::band_order)
    code.open("for (int64_t round = 0, vb = blockIdx.x; vb < tile_blocks; ++round" + turn +
              ", vb = round * gridDim.x + (round % 2 ? gridDim.x - 1 - blockIdx.x : blockIdx.x))");
  else
    code.open("for (int64_t vb = blockIdx.x; vb < tile_blocks; vb += gridDim.x" + turn + ")");
  gemm_tile_origin(code, g, cluster, cluster_axis, "vb");
  if (pingpong_consumer) {
    code.open("if (turn % CONSUMERS != cw)");
    code.line("it += chunks;  // pingpong: the other consumer's tile; its chunks pass through the ring before this one's next");
    code.line("continue;");
    code.close();
  }
}

void flash_tile_origin(Code& k, const FlashForm& f) {
  const std::string& M = f.M;
  k.line("int64_t bid = blockIdx.x;");
  k.line("const int64_t tiles_q = (N_" + M + " + T_Q - 1) / T_Q;");
  if (f.skip && f.slices_fastest) {  // FlashForm::tile_chunks: the longest tiles first, every batch slice's block of a tile together
    k.line("// grid: " + (f.batch.empty() ? std::string("no batch axes") : join(f.batch)) + " (fastest) x tiles of " + M +
           ", the longest first (the causal skip leaves the tiles different numbers of chunks; K and V stay in L2)");
    decompose(k, "bid", f.batch);
    k.line("const int64_t o_" + M + " = (tiles_q - 1 - bid) * T_Q;");
  } else if (f.skip) {  // each slice's tiles together (they share its K and V in L2), the longest first
    k.line("// grid: tiles of " + M + " (fastest, the longest first: consecutive blocks share K and V in L2) x " + join(f.batch));
    k.line("const int64_t o_" + M + " = (tiles_q - 1 - bid % tiles_q) * T_Q;");
    k.line("bid /= tiles_q;");
    decompose(k, "bid", f.batch);
  } else {
    k.line("const int64_t o_" + M + " = bid % tiles_q * T_Q;");
    k.line("bid /= tiles_q;");
    decompose(k, "bid", f.batch);
  }
  k.line("const int n_q = static_cast<int>(min(int64_t{T_Q}, N_" + M + " - o_" + M + "));");
}

void flash_chunks(Code& k, const FlashForm& f) {
  if (f.skip)
    k.line("const int64_t chunks = min((N_" + f.x + " + T_X - 1) / T_X, (o_" + f.M + " + n_q - 1) / T_X + 1);  // causal: later chunks are fully masked");
  else
    k.line("const int64_t chunks = (N_" + f.x + " + T_X - 1) / T_X;");
}

}  // namespace napkin::cuda
