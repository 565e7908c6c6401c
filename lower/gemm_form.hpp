/** \file gemm_form.hpp
 *  The gemm form of a kernel: contractions of 16-bit operands (int8, both K-major, with int32
 *  accumulators; 8-bit floats on the wgmma variant only) over one or several axes with
 *  element-wise epilogues (matmul, bias + GELU, SwiGLU's dual GEMM, an output projection over
 *  heads and head width). M and N (a T_M x T_N output tile per thread block) are two output axes
 *  the schedule tiles (grouped, or kept whole: thin M or N), each in one operand; the other output
 *  axes are batch axes (one grid slice each, offsetting every operand that has them). Of the
 *  contracted axes, K (the one an operand stores innermost, else the streamed one) is walked in
 *  chunks of T_K; the others (`k_outer`) one index at a time around it, each chunk then a 2-D
 *  tile of each operand at a base offset. Read by lowering (lower.cpp), rendered by
 *  emit/cuda/gemm.cpp.
 */
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "diagrams/typing.hpp"
#include "hardware/hardware.hpp"
#include "lower/kernel_shape.hpp"
#include "lower/options.hpp"
#include "diagrams/zero_band.hpp"

namespace napkin {

/** One operand of a contraction: the array and how it is stored. */
struct GemmOperand {
  std::string array;
  bool k_inner = true;  ///< stored with K contiguous (else M or N contiguous)
};

/** A contraction's two operands oriented for output rows M and columns N: `a` holds M (not N),
 *  `b` holds N (not M); `swapped` when that is the diagram's second operand. The rule lowering's
 *  gemm form and the BLAS problem (blas_problem.hpp) share. */
struct OperandRoles {
  std::string a, b;
  AxisList a_axes, b_axes;
  bool swapped = false;
};
/** `x` and `y` (arrays with axes `xa`, `ya`) oriented for M and N; nullopt when M and N are
 *  not one operand's each. */
std::optional<OperandRoles> orient_operands(const std::string& x, const AxisList& xa, const std::string& y, const AxisList& ya, const std::string& M,
                                            const std::string& N);

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
  /** The mma.sync path's cp.async width for this operand, bytes (16, 8 or 4; 0: element by element,
   *  synchronously): the widest that divides every stride of the array in bytes, the run-time rule
   *  of emit/cuda/device/movers.cuh copy_width for an aligned base address (lower.cpp). */
  int copy_bytes = 16;
};

/** Everything both variants need to know about a gemm-shaped kernel. */
struct GemmForm {
  std::string M, N, K;            ///< output rows, output columns, contracted axis walked in chunks of T_K
  AxisList k_outer;               ///< the other contracted axes, walked one index at a time (outermost first)
  AxisList batch;                 ///< other axes of the output (grid slices)
  std::vector<GemmContraction> gemms;  ///< 1 (matmul) or 2 (SwiGLU's dual GEMM), same operand A
  std::vector<GemmTile> tiles;    ///< operand tiles, one per distinct array
  DType dtype = DType::bf16;      ///< operand dtype (bf16, fp16, int8 (int32 accumulate), fp8e4m3 or fp8e5m2)
  std::int64_t TM = 0, TN = 0, TK = 0;  ///< tile extents (elements); a whole M or N rounded up to the MMA's rows
  int warps = 0;                  ///< compute warps per thread block (the schedule's `warps`)
  /** `warps 8 pingpong` (Directive::pingpong): on the wgmma path the two consumer warpgroups
   *  take whole T_M x T_N tiles in turn, so that one's epilogue may run beside the other's MMAs
   *  (CUTLASS's ping-pong Hopper kernels; measured on the H200 it did not: docs/benchmarks.md
   *  session 34), instead of splitting one tile's rows; the mma.sync path runs one consumer's
   *  warps (4) on one tile per block. */
  bool pingpong = false;
  /** Consumer warpgroups sharing one output tile on the wgmma path: warps / 4, or 1 with pingpong. */
  int tile_consumers() const { return pingpong ? 1 : warps / 4; }
  /** Output tiles a block has in flight on the wgmma path: one per consumer with pingpong, else 1. */
  int tiles_in_flight() const { return pingpong ? warps / 4 : 1; }
  /** Warps of the mma.sync path, which splits one tile's rows: `warps`, or 4 with pingpong. */
  int sync_warps() const { return pingpong ? 4 : warps; }
  std::string k_note;             ///< how the schedule treats K (streamed, or kept whole) and k_outer
  /** A zero band of an operand over K and M (or N) (diagrams/zero_band.hpp): each output tile walks
   *  only the chunks of K that hold a nonzero element of its rows (or columns), the others
   *  contribute 0 to every contraction (0 times a finite value). Set where the band's operand is
   *  in every contraction, K is the only contracted axis and every row of M (or N) has an element
   *  inside the band (lower/gemm_form.cpp find_k_band); `k_band_axis` is M or N, empty for
   *  none. The elements outside the band inside a walked chunk are read, so the array holds its
   *  zeros there (its producer writes them). */
  std::optional<ZeroBand> k_band;
  std::string k_band_axis, k_band_array;  ///< M or N; the operand the band is of
  double k_active_fraction = 1;   ///< share of (tile of k_band_axis, chunk of K) pairs walked
  /** The grid order of a banded GEMM (gemm_band_order): the tiles of k_band_axis slowest, in
   *  `band_ranks` order (the longest first), the other axis's tiles and the batch fastest, so
   *  every batch slice's tile of one rank is handed out together. The mma.sync path (one block
   *  per tile) is dispatched in that order; the persistent wgmma path walks it in snake order
   *  (even rounds block b takes tile round x blocks + b, odd rounds the mirror), so a block that
   *  took a long tile takes a short one next. Without it, the tiles go in the rasterised order
   *  (gemm_tile_origin) and the tiles' unequal lengths are not priced. */
  bool band_order = false;
  bool band_reversed = false;  ///< rank r is the band axis's tile (tiles - 1 - r), else tile r
  /** Chunks of K each tile of k_band_axis walks, by rank (band_order): non-increasing where the
   *  band makes the tiles' lengths monotone. */
  std::vector<std::int64_t> band_ranks;
};

/** Sets GemmForm::band_order, band_reversed and band_ranks for a banded GEMM (k_band) of kernel
 *  `k` at its extents: where no cluster is asked for (its blocks are adjacent tiles of the
 *  rasterised order) and the operands the band's tiles share (the other side's, over every batch
 *  slice, in their storage dtypes) fit in half of the L2, since the order hands out every
 *  slice's tiles at once (the flash forward's rule, FlashForm::slices_fastest; session 28: dQ of
 *  causal attention at B4 H16 N4096, K 64 MB, ran 387 -> 421 us with the slices fastest). */
void gemm_band_order(GemmForm& g, const Diagram& d, const KernelShape& k, const Hardware& hw, const ModelOptions& opt);

/** The makespan over the mean of a banded GEMM's tiles (GemmForm::band_order) with `blocks` tiles
 *  in all (every rank's tile repeated over the other axis and the batch): dispatched in rank order
 *  to `slots` block slots as they come free (`persistent` false: one block per tile, list
 *  scheduling), or walked by `slots` persistent blocks in snake order. 1 where the tiles pack
 *  evenly; at least 1 / the wave efficiency. */
double gemm_band_stretch(const GemmForm& g, std::int64_t blocks, std::int64_t slots, bool persistent);

/** The chunks of K that tile [first, last] of g.k_band_axis walks (GemmForm::k_band), as chunk
 *  indices {begin, end} (end exclusive, begin <= end); all of K's chunks without a band. */
std::pair<std::int64_t, std::int64_t> gemm_k_chunks(const GemmForm& g, std::int64_t first, std::int64_t last, std::int64_t k_extent);

/** Reads kernel `k` of `d` as a gemm; nullopt with `why` set when it is not of that form.
 *  `typer` types `d`'s expressions; dtypes are storage_dtype(d, ., opt). M and N: the first pair
 *  of tiled output axes (group directives in order, then axes kept whole with extent over 1) of
 *  which each is in one operand only, swapped when only the second pair member's tile is whole
 *  mma.sync rows for the warps (16 per warp). K: the contracted axis an operand stores innermost
 *  (both operands that do must agree), else the one the schedule streams by over 1, else the
 *  innermost contracted axis of the M operand; the schedule must stream the other contracted
 *  axes by 1 or keep them whole. */
std::optional<GemmForm> analyse_gemm(const Diagram& d, Typer& typer, const KernelShape& k, const ModelOptions& opt, std::string& why);

/** cp.async pipeline stages of the mma.sync variant (emit/cuda/gemm.cpp): as many as fit the
 *  block's SMEM, at most 4, each stage every operand tile with rows padded by 16 bytes
 *  (gemm_mma_sync_pad_elems: ldmatrix without bank conflicts); 0 with `why` set when the variant
 *  cannot take the form: no m16n8 mma.sync in the hardware's [[mma]] table for the dtype with 32
 *  bytes of K per row (k16 of 16-bit types, k32 of int8: the fragment ldmatrix loads) and fp32
 *  accumulate (int32 for integer operands), an 8-bit operand stored MN-major (ldmatrix .trans
 *  transposes 16-bit elements only), T_K not a multiple of the atom's k, tiles not multiples of
 *  the mma shape per warp, fewer than two stages fit. */
int gemm_mma_sync_stages(const GemmForm& g, const Hardware& hw, std::string& why);
/** Elements of `t` in the 16 bytes the mma.sync variant pads each SMEM row by (8 of a 16-bit type,
 *  16 of int8). */
std::int64_t gemm_mma_sync_pad_elems(DType t);
/** SMEM bytes per block of the mma.sync variant with `stages` stages (rows padded, elements of the
 *  operand dtype). */
std::int64_t gemm_mma_sync_smem_bytes(const GemmForm& g, int stages);

/** TMA pipeline stages of the wgmma variant (emit/cuda/gemm.cpp, sm_90a): tiles in 128-byte
 *  swizzled rows (1024-byte atoms), as many stages as fit the block's SMEM less 2 KB of barriers,
 *  at most 6; 0 with `why` set when the variant cannot take the form: no wgmma or TMA, warps not
 *  one or two consumer warpgroups, T_M not m64 per warpgroup, T_N not whole wgmma atoms
 *  (gemm_wgmma_atoms), T_K not whole 128-byte swizzle rows (64 16-bit or 128 fp8 columns),
 *  8-bit operands (fp8, int8) not both K-major (8-bit wgmma has no transposed SMEM operands: PTX
 *  ISA 9.7.15.5.1), accumulators over 160
 *  registers per thread, tiles not whole TMA boxes, arrays of over 5 axes (TMA's limit), a
 *  cluster along an axis other than M or N or of more than 2 blocks. `cluster` and `cluster_axis`:
 *  the schedule's cluster directive (1 and empty without). `reserved_bytes`: SMEM the block needs
 *  beside the ring (the TMA store's staging buffers). */
int gemm_wgmma_stages(const GemmForm& g, const Diagram& d, const Hardware& hw, int cluster, const std::string& cluster_axis, std::string& why,
                      std::int64_t reserved_bytes = 0);
/** Whether `t` is an 8-bit float (fp8e4m3, fp8e5m2): the gemm form's operands may be, and then
 *  only the wgmma variant takes them (no m16n8k16 mma.sync for them in the [[mma]] tables). */
bool is_fp8(DType t);
/** Elements of `t` in one 128-byte swizzle row (64 of a 16-bit type, 128 of fp8): the wgmma
 *  variant's T_K is whole rows, and the T_K a schedule that keeps K whole is staged in. */
std::int64_t gemm_swizzle_row_elems(DType t);
/** The Ns of the wgmma atoms the wgmma variant issues side by side, in order along the tile's N,
 *  for each m64 subtile and k step (PTX ISA 9.7.15.2: N a multiple of 8 up to 256): {T_N} where
 *  T_N is one such N; a wider T_N split into the fewest atoms, as equal as the B tile's layout
 *  allows: equal Ns over a B stored K innermost, whole 64-column swizzle blocks over a B stored
 *  N-major (320: 160 + 160, or 192 + 128). cuBLAS's bf16 GEMMs at 4096 x 14336 x 4096 and the
 *  grouped linear ran nvjet 320x128 tiles on the H200 (session 47). Empty where none. */
std::vector<std::int64_t> gemm_wgmma_atoms(const GemmForm& g);
/** Rows of each TMA box of an operand tile stored K innermost (`free` rows along M or N, each one
 *  128-byte swizzle row of K), when a cluster's `split` ranks multicast its boxes in turn: the
 *  largest multiple of 8 (one 1024-byte swizzle atom) up to 256 (TMA's box limit, PTX ISA
 *  9.7.9.25.5.1) such that the tile is a whole number of boxes, `split` per rank round
 *  (256 / split for a tile of 256 rows, 160 for one of 320). 0 where none. */
std::int64_t gemm_tma_box_rows(std::int64_t free, int split);
/** SMEM bytes per stage of the wgmma variant (every operand tile, unpadded, of the operand dtype). */
std::int64_t gemm_wgmma_stage_bytes(const GemmForm& g);

/** The wgmma variant's epilogue through SMEM (emit/cuda/render_store.cpp): each consumer
 *  warpgroup writes its rows of the output tile, 64 columns at a time, into one of the staging
 *  buffers (128-byte swizzle; KernelSpec::tma_store_buffers) and one thread stores them by TMA (cp.async.bulk.tensor, PTX ISA
 *  9.7.9.25.5.2), so the stores run while the next tile's MMAs do (CUTLASS's Hopper epilogues do
 *  the same); each output in turn (a dual GEMM's two), through the same ring of buffers. Why the
 *  form cannot take it (empty when it can): an output not 16-bit or without N innermost and M
 *  among its axes, T_N not whole 64-column boxes, more than
 *  256 rows per consumer warpgroup (one TMA box), over 5 axes. The strides are checked by the
 *  caller (TMA's 16-byte rule, lower.cpp). */
std::string gemm_tma_store_problem(const GemmForm& g, const Diagram& d, const std::vector<std::string>& outputs, const ModelOptions& opt);
/** SMEM bytes of the TMA store's staging: `buffers` buffers of T_M rows x 64 columns of 16-bit
 *  elements (T_M * 128 bytes each) for each tile in flight (GemmForm::tiles_in_flight: two with
 *  pingpong, each consumer staging its own tile). */
std::int64_t gemm_tma_store_bytes(const GemmForm& g, int buffers);

}  // namespace napkin
