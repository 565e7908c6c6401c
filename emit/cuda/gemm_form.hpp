/** \file gemm_form.hpp
 *  The shape of a kernel the gemm strategy accepts, shared by its two variants: mma.sync
 *  (emit/cuda/gemm.cpp, sm_80 and later) and wgmma fed by TMA (emit/cuda/gemm_wgmma.cpp, sm_90a).
 *  Both read the same schedule: the first two grouped output axes are M and N (T_M x T_N output
 *  tile per thread block), the contracted axis K is streamed in chunks of T_K, the other output
 *  axes are batch axes (one grid slice each).
 */
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "emit/cuda/strategies.hpp"

namespace napkin::cuda {

/** One operand of a contraction: the array and how it is stored. */
struct GemmOperand {
  std::string array;
  bool k_inner = true;  ///< stored with K contiguous (else M or N contiguous)
};

/** One contraction of the kernel: `node` = contract(a, b; K), a holds M, b holds N. */
struct GemmContraction {
  const Expr* node = nullptr;
  GemmOperand a, b;
};

/** An operand tile staged through SMEM each K chunk: rows x cols, the cols contiguous in global memory. */
struct GemmTile {
  std::string array, rows, cols;  ///< axis names
  std::int64_t R = 0, C = 0;      ///< tile extent (elements)
  bool k_rows = false;            ///< K runs along the rows (the array is M- or N-major)
};

/** Everything both variants need to know about a gemm-shaped kernel. */
struct GemmForm {
  std::string M, N, K;            ///< output rows, output columns, contracted axis
  AxisList batch;                 ///< other axes of the output (grid slices)
  std::vector<GemmContraction> gemms;  ///< 1 (matmul) or 2 (SwiGLU's dual GEMM), same operand A
  std::vector<GemmTile> tiles;    ///< operand tiles, one per distinct array
  DType dtype = DType::bf16;      ///< operand dtype (bf16 or fp16)
  std::int64_t TM = 0, TN = 0, TK = 0;  ///< tile extents (elements)
  int warps = 0;                  ///< compute warps per thread block (the schedule's `warps`)
  std::string k_note;             ///< how the schedule treats K (streamed, or kept whole)
};

/** Reads `kc` as a gemm; nullopt with `why` set when the kernel is not of that form. */
std::optional<GemmForm> analyse_gemm(Context& c, const KernelChoice& kc, std::string& why);

/** Emits the grid decode shared by both variants: `o_<M>`, `o_<N>` (tile origins, L2-rasterised in
 *  groups of 8 M tiles), the batch indices `i_<b>`, `n_M`, `n_N` (valid rows and columns; <= 0 for
 *  a block of a cluster past the last tile). With `cluster` > 1, consecutive blocks (one cluster)
 *  take consecutive tiles along `cluster_axis` (M or N) and the same tile along the other: the
 *  grid then has that axis's tile count rounded up to whole clusters. `block`: the linear block
 *  index to decode (a persistent kernel's virtual block). */
void gemm_tile_origin(Code& code, const GemmForm& g, int cluster = 1, const std::string& cluster_axis = "", const std::string& block = "blockIdx.x");

/** Emits the epilogue: `loops(body)` opens the variant's loops over its accumulator fragments
 *  (defining `row` and `col`, tile-relative, col even), calls `body` and closes them. For each
 *  pair of elements (row, col + q), q = 0, 1, every output of the kernel is computed from `acc(i)`
 *  (the accumulator element of contraction i, an expression that may use `q`) and stored. Twice:
 *  for interior tiles whose outputs take paired stores (the output's innermost axis is N, N even,
 *  the array aligned), one unpredicated 4- or 8-byte store per pair; else predicated against n_M
 *  and n_N, paired where adjacent and aligned. Adds the outputs to `stored`. */
void gemm_epilogue(Code& code, Context& c, const KernelChoice& kc, const GemmForm& g, const std::function<void(const std::function<void()>&)>& loops,
                   const std::function<std::string(std::size_t)>& acc, std::set<std::string>& stored);

/** The sm_90a variant: device code (namespace `wg` inside the kernel's namespace) and the host
 *  statements that launch it when the device and the arrays allow TMA, falling back to
 *  `fallback_launch` otherwise. nullopt with `why` set when the tiles do not fit wgmma. */
std::optional<KernelEmit> emit_gemm_wgmma(Context& c, const KernelChoice& kc, const GemmForm& g, const Hardware& hw,
                                          const std::string& fallback_launch, std::string& why);

}  // namespace napkin::cuda
