/** \file flash_bwd_form.hpp
 *  The flash-backward form of a kernel: FlashAttention-2's backward loop (Dao 2023, §3.2,
 *  Algorithm 2), generalised and read structurally (no name of a diagram or array matters). A
 *  thread block owns a tile of T_X rows of the grouped axis X (keys, in attention's backward) and
 *  streams the axis Q (queries) in chunks of T_Q; per chunk it computes
 *  - tile statements: every fused statement over the tile's axes (batch, Q, X), element-wise but
 *    for at most one contraction contract(R, C; c) of a resident array R[.., X, c] (staged once per
 *    block) with a streamed array C[.., Q, c] (staged per chunk), c innermost in both and whole:
 *    S = Q K^T and dP = dO V^T, then P = exp(S - lse) and dS = P (dP - D) in registers (mma.sync
 *    accumulators, the tile transposed: X rows, Q columns);
 *  - accumulated outputs: statements Out[.., X, e] = g(contract(T, C; Q)) of a tile statement T and
 *    a streamed array C[.., Q, e] (e innermost), g element-wise: dV += P^T dO, dK += dS^T Q in
 *    registers across the whole stream (the associative-sum lemma, paper §3.1), stored once;
 *  - stored tiles: tile statements other kernels read (dS, for dQ = dS K), written per chunk.
 *  Arrays the element-wise maps read beside the tiles along one side only (the row statistics
 *  lse and D) are row or column vectors, loaded once per block or per chunk; any other (a mask
 *  or bias array) is read from global memory at the element's indices. Read by lowering
 *  (lower.cpp), priced by perfmodel/cost.cpp, rendered by emit/cuda/flash_bwd.cpp (mma.sync
 *  m16n8k16 on cp.async) and flash_bwd_wgmma.cpp (sm_90a).
 */
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "diagrams/typing.hpp"
#include "hardware/hardware.hpp"
#include "lower/kernel_shape.hpp"
#include "lower/options.hpp"

namespace napkin {

/** A staged operand array of the flash-backward form: `rows` its axis of the tile (X: resident,
 *  staged once per block; Q: streamed, staged per chunk), `cols` its innermost axis (whole),
 *  `width` that axis's extent (elements). */
struct BwdOperand {
  std::string array, rows, cols;
  std::int64_t width = 0;
  bool streamed = false;
};

/** A kernel after this one that reads a stored tile: a gemm that walks, per tile of T_M rows of
 *  Q, only the chunks of T_K of X inside the tile's zero band lo <= index(X) - index(Q) <= hi
 *  (GemmForm::k_band, a bound absent: none). Of the causal skip's zeros it reads only the rows
 *  of Q whose tiles' chunks reach the block's X (flash_bwd_zero_rows). */
struct ZeroReader {
  std::int64_t TM = 0, TK = 0;
  std::optional<std::int64_t> lo, hi;
};

/** A tile statement: `s` over (batch, Q, X); `node` its one contraction (nullptr: element-wise
 *  only) of resident operand `resident` with streamed operand `streamed` over axis `c`. */
struct BwdTile {
  const Statement* s = nullptr;
  const Expr* node = nullptr;
  std::string resident, streamed, c;
  bool stored = false;  ///< another kernel reads it: written to global memory per chunk
  /** Stored through an SMEM staging tile by 16-byte rows: where the array's innermost axis is X
   *  (`x_inner`: staging T_Q x (T_X + 8), the registers' tile transposed) or Q (T_X x (T_Q + 8))
   *  and its dtype is the operands'; else element by element from the registers. */
  bool staged = false, x_inner = false;
  /** An output accumulated by atomic adds reads it (FlashBwdForm::atomics): per chunk it is also
   *  written, in the operand dtype, into an SMEM tile [T_X][T_Q + 8] (the registers' layout: X
   *  rows, Q contiguous), read transposed (ldmatrix.trans) as the A operand of those outputs' MMAs. */
  bool atomic_staged = false;
  /** The wgmma path's staging (staged, and X innermost or T_Q a multiple of 64): 128-byte-swizzled
   *  boxes of 64 elements of the inner axis, one set per consumer warpgroup for its 64 rows of X
   *  (T_Q x 64 where X is innermost, T_Q / 64 boxes of 64 x 64 where Q is), the layout of a TMA
   *  box. Else the mma.sync path's padded tile. */
  bool swizzled = false;
  /** Swizzled boxes stored by TMA, asynchronously: the copy-out leaves the warpgroup's critical
   *  path, and the next chunk's staging waits only for the store's reads of SMEM (lower.cpp sets
   *  it where the array's strides allow a tensor map). Else the warpgroup's threads copy them out. */
  bool tma_store = false;
  std::vector<std::string> reads;  ///< the arrays its expression reads
  /** Index in FlashBwdForm::tiles of the last tile statement that reads it (its own where none
   *  does): it lives in fp32 registers until then, and only then retires (its outputs packed and
   *  accumulated, its store), so the fp32 tile and its 16-bit copy are never live together. */
  std::size_t last_reader = 0;
  /** Where the causal skip's zeros of a stored tile are written (lower_kernel_of): every reader
   *  of it in the schedule, where each is a banded gemm (ZeroReader); the skip then writes only
   *  the rows of Q they read over the block's X. Empty: every skipped row (a reader of another
   *  kind, a diagram output, or the readers unknown, as while the search prices one kernel). */
  std::vector<ZeroReader> zero_readers;
  double zero_share = 1;  ///< share of the skipped chunks' elements of this tile written as zeros
};

/** An accumulated output `out`[.., X, e] = g(contract(tile, operand; Q)). */
struct BwdOutput {
  const Statement* out = nullptr;
  const Expr* node = nullptr;
  std::string tile, operand, e;
  std::int64_t E = 0;  ///< e's extent (elements)
};

struct FlashBwdForm {
  std::string X, Q;                 ///< the grouped axis (the block's rows) and the streamed axis
  /** Streamed axes walked outside Q, outermost first, one index per step (`stream r by 1`): a
   *  reduction over several axes folds over all of them, nested (the associative-sum lemma, paper
   *  §3.1, applied once per axis). Grouped-query attention's backward streams (r, q): dK and dV
   *  sum over the query heads of a group as well as the queries. Resident operands lack them. */
  AxisList outer;
  std::int64_t outer_steps = 1;     ///< the product of the outer axes' extents
  AxisList batch;                   ///< the tile's other axes (grid slices, one index per block)
  std::vector<BwdTile> tiles;       ///< tile statements, dataflow order
  std::vector<BwdOutput> outputs;   ///< accumulated outputs, dataflow order
  /** Outputs over Q accumulated across the blocks by atomic adds (KernelShape::atomic, lemma
   *  atomic-sum): `out`[.., Q, e] (fp32) += s * contract(tile, operand; X), `operand` a resident
   *  array [.., X, e] (e innermost and whole), s a constant factor (numbers and sizes only). Per
   *  chunk, after the tile's values are final, the block multiplies its staged tile (transposed,
   *  BwdTile::atomic_staged) by the resident operand on mma.sync, each warp items of 16 rows of
   *  Q x atomic_cols() columns of e over all T_X rows, and adds the products into global memory
   *  by red.global.add (PTX ISA 9.7.13.6; two fp32 at once on sm_90). The launcher zeroes `out`
   *  first. BwdOutput::e and E as for the accumulated outputs. */
  std::vector<BwdOutput> atomics;
  std::vector<BwdOperand> operands; ///< staged arrays: resident ones first, then streamed ones
  /** Arrays the tile maps read along one side of the tile only, beside the batch axes (the row
   *  statistics lse and D): `row_vectors` over X (no outer axis), read once per block into
   *  registers; `col_vectors` over Q (and the outer axes), read per chunk. On the wgmma path the
   *  producer warp stages each column vector in the ring beside the chunk's boxes, T_Q fp32 per
   *  stage, so the consumers read it from SMEM after the stage's wait: loaded by the consumers
   *  from global memory, its latency stalled their wgmma issue (a fifth of the samples, ncu,
   *  session 20). */
  std::vector<std::string> row_vectors, col_vectors;
  DType dtype = DType::bf16;        ///< the staged operands' dtype (bf16 or fp16)
  std::int64_t TX = 0, TQ = 0;      ///< rows of X per block, columns of Q per chunk (elements)
  int warps = 0;                    ///< warps per block: each owns T_X / warps rows of X
  /** Stages of the wgmma path's ring of streamed chunks (lower.cpp: the most of 2 to 4 that fit
   *  SMEM). A chunk's loads are issued STAGES - 1 chunks ahead: with 2, a chunk whose compute is
   *  shorter than the loads' latency waits for them (measured: about 3.4 us per chunk whatever
   *  the head width, session 19). The mma.sync path double-buffers. */
  int wg_stages = 2;
  int live_tiles = 0;               ///< the most tile statements held in registers at once
  /** Causal skip (flash_bwd_causal_skip): "" none; "before": the chunks of Q before the block's
   *  first row of X are fully masked (causal(Q, X): X <= Q allowed); "after": the chunks past its
   *  last row (causal(X, Q)). Skipped chunks load and multiply nothing; stored tiles get zeros. */
  std::string skip;
  double active_fraction = 1;       ///< share of (X tile, Q chunk) pairs computed
  double longest_fraction = 1;      ///< the largest share of the Q chunks one X tile computes
  /** Under a skip, the chunks of Q each tile of X computes (per step of the outer streams), in the
   *  order the grid dispatches the tiles: the longest first (tile 0 up for "before", the last tile
   *  down for "after"), each tile's blocks over the batch axes together, the batch axes fastest
   *  (emit/cuda/flash_bwd_parts.cpp grid_and_chunks): longest-processing-time-first list
   *  scheduling, so that no long block starts last. Without a skip: empty, and the grid runs the
   *  tiles of X fastest (blocks of one head, which share its streamed chunks in L2, side by side). */
  std::vector<std::int64_t> tile_chunks;
  /** Columns of e per warp item of an atomic output of width `E`: 64 where E allows (its A
   *  fragments reused over four n16 pairs), else 16. */
  static std::int64_t atomic_cols(std::int64_t E) { return E % 64 == 0 ? 64 : 16; }
  /** Names of the tile statements (what the element-wise maps read in registers). */
  std::vector<std::string> tile_names() const;
  /** Index of `array` in operands, or -1. */
  int operand(const std::string& array) const;
};

/** Reads kernel `k` of `d` as the flash-backward form (above) on `hw`: a one-pass stream of an
 *  axis Q the tile statements weave and every output reduces, nested in streams of other axes in
 *  chunks of 1 (FlashBwdForm::outer) that every output reduces too and no resident operand has; X the grouped axis all outputs keep; at
 *  least one accumulated output, whose epilogue reads no other statement of the kernel (they are
 *  not in global memory yet); outputs accumulated by atomic adds (FlashBwdForm::atomics) of the
 *  form given there, their widths multiples of 16; operands bf16 or fp16 (all the same), stored with their
 *  contracted axis innermost and whole; T_X a multiple of 16 x warps, T_Q of 16, widths of 16; an
 *  m16n8k16 mma.sync; the SMEM (flash_bwd_smem_bytes) and the registers (flash_bwd_registers)
 *  within the hardware's limits. nullopt with `why` set otherwise. */
std::optional<FlashBwdForm> analyse_flash_bwd(const Diagram& d, const KernelShape& k, const Hardware& hw, const ModelOptions& opt, std::string& why);

/** Sets f.skip and f.active_fraction where skipping the chunks past a causal mask's diagonal is
 *  sound: a tile statement Z = exp(mask(E, causal(a, b)) - R) over the tile's two axes (or of a
 *  tile statement holding that mask), R free of masks, is exactly 0 past the diagonal; a tile is
 *  zero there when it is Z or a product with a zero tile as a factor (0 times a finite value:
 *  the operands are finite); the skip holds when every accumulated output contracts a zero tile
 *  and every stored tile is zero (the skipped chunks store zeros), and every row and column of
 *  the tile keeps an element of the mask at `k`'s extents (N_X <= N_Q for causal(Q, X), N_Q <=
 *  N_X for causal(X, Q)): a row masked throughout is NaN in the language, not 0. */
void flash_bwd_causal_skip(FlashBwdForm& f, const KernelShape& k);

/** The rows of Q, [first, end), whose zeros the readers `r` (non-empty) read over the X rows
 *  [x0, x1] of a block: the union of the reader tiles whose walked chunks reach [x0, x1] (a
 *  superset where a bound is absent or tiles are clipped), clipped to [0, n_q). The emitter
 *  (emit/cuda/flash_bwd_parts.cpp, zero_skipped) renders the same arithmetic. */
std::pair<std::int64_t, std::int64_t> flash_bwd_zero_rows(const std::vector<ZeroReader>& r, std::int64_t x0, std::int64_t x1, std::int64_t n_q);

/** Sets each stored tile's zero_share from its zero_readers and the skip, over the blocks of X
 *  at `k`'s extents (the model prices the zeros written: perfmodel/cost.cpp). */
void flash_bwd_zero_shares(FlashBwdForm& f, const KernelShape& k);

/** SMEM bytes per block: the resident operands' tiles (T_X rows), two stages of the streamed
 *  operands' chunks (T_Q rows), rows padded by 8 elements (16 bytes), one staging tile per
 *  staged tile statement (BwdTile::staged: its coalesced store) and one per tile an atomic output
 *  reads (BwdTile::atomic_staged, T_X x (T_Q + 8)), all of the operand dtype. */
std::int64_t flash_bwd_smem_bytes(const FlashBwdForm& f);

/** SMEM bytes per block of the wgmma path (emit/cuda/flash_bwd_wgmma.cpp): the resident tiles
 *  and f.wg_stages stages of the streamed chunks unpadded (128-byte swizzled TMA boxes), the
 *  staging tiles (BwdTile::swizzled: T_X x T_Q unpadded; else as on mma.sync), f.wg_stages x T_Q
 *  fp32 per column vector, 1 + 2 x stages mbarriers and 1024 bytes to align the swizzle atoms. */
std::int64_t flash_bwd_wgmma_smem_bytes(const FlashBwdForm& f);

/** Whether the sm_90a path (wgmma on TMA, FlashAttention-3's backward: Shah et al. 2024 §3) can
 *  run kernel `f` of `d` on `hw`: wgmma and TMA on `hw` with a warpgroup MMA for the dtype; one
 *  or two consumer warpgroups of 64 rows of X each (T_X = 16 x warps, warps 4 or 8); T_Q a
 *  multiple of 16 up to 256 (the tile contractions' N); every operand's width a multiple of 64
 *  (whole 128-byte swizzle rows) and the outputs' up to 256 (their N); at most 5 axes per operand
 *  (TMA); the registers (flash_bwd_registers) within the 240 a consumer gets (setmaxnreg); the
 *  SMEM (flash_bwd_wgmma_smem_bytes) within the block's. False with `why` set otherwise. */
bool flash_bwd_wgmma_fits(const FlashBwdForm& f, const Diagram& d, const Hardware& hw, std::string& why);

/** Registers per thread the emitted kernel needs, estimated: the outputs' fp32 accumulators
 *  (T_X / warps rows x E each, 32 threads a warp), live_tiles fp32 tiles of T_X / warps x T_Q,
 *  one 16-bit A fragment tile row, plus 40 for indices and addresses (an estimate to calibrate
 *  against ptxas -v). The widest atomic output's item (16 x atomic_cols fp32 a warp, while its
 *  products are added out) takes the place of its tile, which has retired by then. */
int flash_bwd_registers(const FlashBwdForm& f);

}  // namespace napkin
