/** \file lower.hpp
 *  Lowering: one kernel of a checked schedule -> the kernel as it will run (KernelSpec). This is
 *  the one place that decides a kernel's strategy, its MMA instruction and its pipeline: the
 *  performance model (perfmodel/cost.hpp) prices the spec and the emitters (emit/) render it, so
 *  what the model prices is what the emitter writes.
 *
 *  Strategies, tried in order (their forms: gemm_form.hpp, flash_form.hpp):
 *  - call:  a statement calling another diagram (the callee's kernels are its own specs);
 *  - gemm:  contractions of 16-bit operands (over one axis or several: gemm_form.hpp) with
 *           element-wise epilogues, on mma.sync
 *           (sm_80 on) and, where the hardware has wgmma and TMA and the tiles fit, on wgmma fed by
 *           TMA (sm_90a, picked at run time on a Hopper GPU); of fp8 operands (both K-major) on
 *           mma.sync m16n8k32 where the hardware table has it (sm_89 on) and wgmma, else on
 *           wgmma alone, taken only where that path fits; of int8 operands (both K-major) on
 *           mma.sync m16n8k32 (and wgmma m64nNk32) with int32 accumulators (the epilogue
 *           converts them to fp32); operands whose strides TMA cannot take are read by the
 *           wgmma path from copies with rows of whole 128-byte lines (KernelSpec::repacks);
 *  - flash: contraction, element-wise score maps, softmax along the streamed axis (online softmax,
 *           paper §4) or no normaliser, contraction; on mma.sync and, where it fits, wgmma; of
 *           fp8 operands (V with x innermost) on wgmma alone, taken only where that path fits;
 *  - flash_bwd: tile statements over a grouped axis X and a streamed axis Q (contractions of an
 *           array resident per block with one streamed per chunk, element-wise maps) feeding
 *           outputs accumulated over Q (FlashAttention-2's backward: flash_bwd_form.hpp), on
 *           mma.sync with cp.async and, where flash_bwd_wgmma_fits, wgmma on TMA (sm_90a);
 *  - rows:  one normaliser (softmax, layernorm, rmsnorm) of element-wise arguments, or one
 *           reduction along the arrays' innermost axis: a team of lanes or warps per row;
 *  - cols:  one reduction down the columns (the reduced axis outer, the statement's innermost axis
 *           innermost in every array read along it): lanes across columns, threads split the rows;
 *  - transpose: one copy `Y = X` into another order with another innermost axis: tiles through
 *           SMEM, loaded along X's innermost axis and stored along Y's (transpose_form.hpp);
 *  - simt:  anything else: one kernel per statement, one thread per element, reductions as loops
 *           (no tensor cores, intermediates through global memory). `declined` says why the
 *           tensor-core strategies did not take the kernel.
 */
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "diagrams/program.hpp"
#include "hardware/hardware.hpp"
#include "lower/flash_bwd_form.hpp"
#include "lower/flash_form.hpp"
#include "lower/gemm_form.hpp"
#include "lower/kernel_shape.hpp"
#include "lower/options.hpp"
#include "lower/cols_form.hpp"
#include "lower/transpose_form.hpp"
#include "lower/rows_form.hpp"

namespace napkin {

enum class Strategy { call, gemm, flash, flash_bwd, rows, cols, transpose, simt };
/** "call", "gemm", "flash", "flash_bwd", "rows", "cols", "transpose", "simt": the names the emitted CUDA's kernel_strategy() returns. */
std::string_view strategy_name(Strategy s);

/** How a path of a tensor-core kernel moves operand tiles from global memory into SMEM: cp.async
 *  issued by every thread of the block into a ring of stages, or TMA issued by one thread of a
 *  producer warpgroup behind full/empty mbarriers (the other warpgroups are the consumers). */
enum class Mover { cp_async, tma };

/** One path of a tensor-core kernel (KernelSpec::path): its MMA atom (a row of the hardware's
 *  [[mma]] table: scope "warp" is mma.sync, "warpgroup" wgmma), its mover, its pipeline stages and
 *  its SMEM bytes per thread block. The renderers read these fields, not a variant name. */
struct KernelPath {
  const MmaShape* atom = nullptr;
  Mover mover = Mover::cp_async;
  int stages = 0;
  std::int64_t smem_bytes = 0;
  bool wgmma() const { return atom->scope == "warpgroup"; }
};

/** An operand the wgmma path reads by TMA from a copy whose rows are `pitch` bytes apart (the
 *  array's innermost extent in bytes rounded up to whole 128-byte L2 lines: repack_pitch_bytes),
 *  made before the kernel by napkin::pitch_copy (emit/cuda/device/tiles.cuh), where the array's
 *  own strides are not multiples of 16 bytes, which TMA needs (CUDA driver API
 *  cuTensorMapEncodeTiled); `why` says which. The model prices the copy (KernelCost::t_repack). */
struct OperandRepack {
  std::string array;
  std::int64_t pitch = 0;  ///< bytes between the copy's rows
  std::string why;
};

/** Bytes between the rows of the copy of an operand whose rows are `row_bytes` long: whole 128-byte
 *  L2 lines, so that no tile row of the copy starts off a line (perfmodel/cost.cpp line_fetch_factor). */
inline std::int64_t repack_pitch_bytes(std::int64_t row_bytes) { return (row_bytes + 127) / 128 * 128; }

/** One kernel as it will run. */
struct KernelSpec {
  KernelShape shape;
  Strategy strategy = Strategy::simt;
  /** For rows and simt kernels: why gemm and flash declined ("gemm: ...; flash: ..."). */
  std::string declined;
  std::optional<GemmForm> gemm;    ///< strategy gemm
  std::optional<FlashForm> flash;  ///< strategy flash
  std::optional<FlashBwdForm> flash_bwd;  ///< strategy flash_bwd
  std::optional<RowsForm> rows;    ///< strategy rows: the launch shape (rows_form.hpp)
  std::optional<ColsForm> cols;    ///< strategy cols: the launch shape (cols_form.hpp)
  std::optional<TransposeForm> transpose;  ///< strategy transpose: the tiles (transpose_form.hpp)
  /** The mma.sync path (sm_80 on; every gemm and flash kernel has it, but a flash kernel of fp8
   *  operands and a gemm of fp8 operands on hardware without an 8-bit float mma.sync row (before
   *  sm_89), which have the wgmma path alone: gemm_form.hpp is_fp8): its atom (a row of the
   *  hardware's [[mma]] table), cp.async stages (flash: K and V double-buffered, 2) and SMEM bytes
   *  per thread block. */
  std::optional<MmaShape> mma_sync;
  int stages = 0;
  std::int64_t smem_bytes = 0;
  /** The sm_90a path: wgmma fed by TMA, a producer warpgroup beside the schedule's warps as
   *  consumer warpgroups; its atom, TMA stages and SMEM bytes per block; or why it is not emitted. */
  bool wgmma = false;
  std::optional<MmaShape> wgmma_mma;
  int wgmma_stages = 0;
  std::int64_t wgmma_smem_bytes = 0;
  std::string why_no_wgmma;
  /** The wgmma path's operands read from repacking copies (gemm and flash; empty: all in place). */
  std::vector<OperandRepack> repacks;
  /** The repack of `array`, or null where the wgmma path reads it in place. */
  const OperandRepack* repack(const std::string& array) const {
    for (const auto& r : repacks)
      if (r.array == array) return &r;
    return nullptr;
  }
  /** The wgmma GEMM stores interior output tiles through SMEM by TMA, overlapped with the next
   *  tile's MMAs (gemm_form.hpp gemm_tma_store_problem); its staging SMEM is in wgmma_smem_bytes.
   *  Taken where the ring keeps at least min(its stages, 4) stages beside two staging buffers
   *  (measured on the H100, matmul 8192x4096x256: 5 stages 37.2 us, 4 stages 41.6 us: a memory-bound
   *  main loop needs its stages more than the epilogue needs buffers); else why not.
   *  `tma_store_buffers`: staging buffers of T_M rows x 64 columns (T_M * 128 bytes each): two, and
   *  more, up to one per 64 columns of the tile (T_N / 64), while they cost the ring no stage. A
   *  consumer reuses a buffer once its store has read it (bulk_wait_read), which with the
   *  stmatrix epilogue did not show in the time (8192x256x4096: 2 buffers 41.5 us, 4 buffers 42.2). */
  bool tma_store = false;
  /** With tma_store: the edge tiles (past N_M or N_N) are stored by TMA too, which writes only what
   *  lies inside the array (CUDA C++ Programming Guide, "Using TMA to transfer multi-dimensional
   *  arrays"): H200, session 45, fp8 GEMM 2048 x 2000 x 2048 23.7 -> 19.9 us, bf16 2000^3 30.8 ->
   *  28.3 us. Not where the epilogue reads an array along M or N (a bias): those reads would need
   *  bounds on every tile (bias + GELU 4096 x 1024 x 4096: 97.8 us against 94.2), so the edge tiles
   *  keep the bounded stores from registers. */
  bool tma_store_edges = false;
  int tma_store_buffers = 0;
  std::string why_no_tma_store;
  /** Thread blocks per cluster (1: none) and the axis along which they are adjacent: granted
   *  only to a gemm kernel on the wgmma path of hardware with clusters. */
  int cluster = 1;
  std::string cluster_axis;

  /** The mma.sync path on cp.async (every gemm and flash kernel), or with `hopper` the wgmma path
   *  on TMA (only where `wgmma`). Points into this spec. */
  KernelPath path(bool hopper) const {
    if (hopper) return {&*wgmma_mma, Mover::tma, wgmma_stages, wgmma_smem_bytes};
    return {&*mma_sync, Mover::cp_async, stages, smem_bytes};
  }

  /** Whether the kernel's contractions run on tensor cores (gemm, flash, flash_bwd). */
  bool tensor_cores() const { return strategy == Strategy::gemm || strategy == Strategy::flash || strategy == Strategy::flash_bwd; }
};

/** Lowers kernel `plan` of a checked schedule of `d` (in `p`) at `sizes` on `hw`; `weave` is
 *  weave_analysis(p, d). Raises nothing: a kernel no tensor-core strategy takes lowers to simt
 *  with the reasons in `declined`. */
KernelSpec lower_kernel(const Program& p, const Diagram& d, const std::vector<StatementWeave>& weave, const KernelPlan& plan, const SizeMap& sizes,
                        const Hardware& hw, const ModelOptions& opt = {});

/** lower_kernel for kernel `index` of schedule `s`, with what it takes from the kernels after it:
 *  a flash_bwd kernel's causal skip writes the zeros of a stored tile only where the tile's
 *  readers read them, when every reader in `s` is a gemm walking the chunks inside the tile's
 *  zero band over Q and X (BwdTile::zero_readers) and the tile is no output of `d`; else every
 *  skipped element (as with a schedule of that kernel alone). Raises nothing. */
KernelSpec lower_kernel_of(const Program& p, const Diagram& d, const std::vector<StatementWeave>& weave, const Schedule& s, std::size_t index,
                           const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt = {});

/** One line describing the spec: "gemm on mma.sync m16n8k16 (4 stages) and wgmma (5 stages)",
 *  "gemm over g, r, then d in chunks of 64 on mma.sync ..." (several contracted axes: the outer
 *  ones walked one index at a time), "simt (gemm: ...; flash: ...)". */
std::string describe_spec(const KernelSpec& s);

}  // namespace napkin
