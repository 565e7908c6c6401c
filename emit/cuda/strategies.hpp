/** \file strategies.hpp
 *  The renderers of one schedule kernel as CUDA, one per strategy lowering chose (lower/lower.hpp:
 *  KernelSpec; emit/cuda/unit.cpp dispatches on it). A renderer never declines a spec: where it
 *  could not render what lowering accepted, that is an internal error (lowering and emission
 *  disagree), not a fallback. The steps they share (grid decode, staging, lemmas, score chain,
 *  epilogue, host launch) are in render.hpp, one file per concern.
 *  - gemm:  grid = tiles of M and N x the batch axes, warps split M, K streamed through a
 *           cp.async pipeline of the spec's stages, ldmatrix into mma.sync, fp32 accumulators,
 *           the element-wise epilogue on the accumulators; with the spec's wgmma path also an
 *           sm_90a variant (wgmma on TMA, rendered by the same sequence in gemm.cpp) that the
 *           launcher picks at run time on a Hopper GPU;
 *  - flash: contraction, softmax along the streamed axis, contraction (attention): the
 *           online-softmax lemma (paper §4) with S and P in registers;
 *  - flash_bwd: tiles over a grouped axis and a streamed one feeding accumulated outputs
 *           (FlashAttention-2's backward, flash_bwd.cpp): tiles transposed in mma.sync fragments,
 *           repacked as the A operand of the outputs' MMAs; stored tiles through SMEM staging;
 *           with the spec's wgmma path also an sm_90a variant (flash_bwd_wgmma.cpp: a producer
 *           warpgroup streaming by TMA, consumer warpgroups of 64 rows on wgmma);
 *  - rows:  a normaliser (softmax, layernorm, rmsnorm) along an axis kept whole or streamed: one
 *           warp (or several) per row, statistics reduced with shuffles, then the map (from the
 *           row's end; a staged prefix of the row read back from SMEM);
 *  - cols:  a reduction down the columns (cols.cpp): lanes across columns, threads splitting the
 *           reduced axis, partials added in SMEM in a fixed order;
 *  - transpose: a copy into another order with another innermost axis (transpose.cpp): tiles
 *           loaded along the source's innermost axis into SMEM, stored along the copy's;
 *  - simt:  anything else, and reference mode: one thread per output element, reductions as loops.
 */
#pragma once
#include <map>
#include <optional>
#include <set>
#include <string>

#include "emit/cuda/context.hpp"

namespace napkin::cuda {

/** A buffer a kernel needs in HBM beyond the diagram's intermediates (a call's result before
 *  the rest of its statement, a callee's workspace): `type* name` in Args, carved from the
 *  workspace with `bytes` (a host expression over `const Args& a`). */
struct WorkspaceBuffer {
  std::string name, type, bytes, comment;
};

/** One schedule kernel as CUDA text. */
struct KernelEmit {
  std::string strategy;     ///< "gemm", "flash", "rows", "simt"
  std::string device_code;  ///< namespace k_<kernel> { ... __global__ ... }
  std::string launch_code;  ///< host statements launching it on `stream` from `const Args& a`
  std::set<std::string> stored;  ///< arrays this kernel writes to global memory
  bool hopper = false;           ///< uses the Hopper primitives (an sm_90a variant)
  std::vector<WorkspaceBuffer> buffers;  ///< extra workspace
  /** Texts of callees' units that device_code refers to by nested_marker(id) (strategy call):
   *  spliced in once, by the top unit, so that each level of nested calls is not copied again by
   *  every level above it (which made emitting quadratic in the call depth). */
  std::vector<std::pair<std::size_t, std::string>> nested;
};

/** Renderers of a kernel whose spec (k.cost.spec) has strategy gemm, flash, flash_bwd and rows. */
KernelEmit emit_gemm(Context& c, const KernelChoice& k);
KernelEmit emit_flash(Context& c, const KernelChoice& k);
KernelEmit emit_flash_bwd(Context& c, const KernelChoice& k);
KernelEmit emit_rows(Context& c, const KernelChoice& k);
/** The columns kernel of `k` (lower/cols_form.hpp). */
KernelEmit emit_cols(Context& c, const KernelChoice& k);
/** The transpose kernel of `k` (lower/transpose_form.hpp). */
KernelEmit emit_transpose(Context& c, const KernelChoice& k);
/** A statement calling another diagram: the unit of the callee lifted over the call's woven axes
 *  (derived separately, `sub`, whose `lifted` it is) nested in the caller's namespace and run once
 *  on the caller's arrays, the woven axes batch axes of its kernels' grids; the rest of the statement (`X2 + mlp(...)`) as a SIMT kernel over the
 *  call's result. Arguments the callee cannot read in place (an expression, another layout or
 *  dtype: lower/call_arguments.hpp) are first copied by a SIMT kernel into a buffer it reads. */
KernelEmit emit_call(Context& c, const Statement& s, const Derivation& sub, const Hardware& hw);
/** One SIMT kernel per statement in `statements` (topological order); `over` renders call nodes. */
KernelEmit emit_simt(Context& c, const std::string& name, const std::vector<std::string>& statements,
                     const NodeOverride& over = {});

/** The run path of a SIMT kernel as vectors: each thread's run of 8 elements along the innermost
 *  axis reads `loads` (arrays whose innermost axis it is, each indexed by the run's other
 *  indices alone) as 8 consecutive elements (napkin::copy_run8: 16-byte loads where aligned) into
 *  run_<array>[8], computes `value` (fp32, reading run_<array>[j]) into run_<out>[8] and stores
 *  it with copy_run8. Without it (`out` empty) the run stores element by element. */
struct ElementwiseRun {
  std::vector<std::string> loads;
  std::string out, value;
};

/** One SIMT kernel `fn` in the open namespace `ns` (which declares THREADS) into `k`, its launch
 *  into `l`: a grid-stride loop over the elements of `axes` (the last fastest), `i_<axis>`
 *  decomposed from `idx`, then `store` (a statement writing element idx); runs of 8 along the
 *  innermost axis where its extent allows, as vectors where `run` says. */
void render_elementwise_kernel(Context& c, const std::string& ns, const std::string& fn, const AxisList& axes,
                               const std::string& store, Code& k, Code& l, const ElementwiseRun& run = {});

/** Helpers shared by the strategies. */
/** Name of the kernel namespace for a schedule kernel. */
std::string kernel_ns(const std::string& kernel);
/** Every node of `e` (pre-order). */
void walk(const Expr& e, const std::function<void(const Expr&)>& f);
/** `// kernel NAME: fuse ...; group ...` */
std::string describe_plan(const KernelPlan& p);
/** Opens a form's kernel `kernel(const Args a)` bounded to `registers` per thread by
 *  __launch_bounds__(THREADS, blocks_per_sm) (the resident blocks the model prices; `form` names
 *  the lowering header that chose them), with the axis sizes declared. The caller closes it. */
void open_bounded_kernel(Code& k, const Context& c, int registers, int blocks_per_sm, const std::string& form);
/** Code decomposing `linear` (a non-negative int64_t variable, consumed) into `i_<axis>` over
 *  `axes`, last fastest, through napkin::split_index (one 32-bit division per axis where the
 *  values fit, emit/cuda/device/numeric.cuh); with `maybe_unused`, declared [[maybe_unused]] (indices the code after may not read). */
void decompose(Code& code, const std::string& linear, const AxisList& axes, bool maybe_unused = false);
/** Element offset of `array` with axis `a` at index expression `at(a)` (Horner over N_). */
std::string offset(const Context& c, const std::string& array, const std::function<std::string(const std::string&)>& at);
/** Host expression: bytes of an array of `type` over `axes` (sizes from `const Args& a`). */
std::string host_bytes(const std::string& type, const AxisList& axes);
/** Stride (elements) of axis `axis` in `array`: the product of the later axes' sizes. */
std::string stride(const Context& c, const std::string& array, const std::string& axis);

/** Adds a kernel's sm_90a variant where `spec.wgmma`: `make(fallback)` emits it given the
 *  mma.sync launch of `ns`::kernel as its fallback. Appends its device code to `device` and its
 *  launch to `launch` (setting r.hopper); without spec.wgmma, a comment saying why
 *  (spec.why_no_wgmma) and the mma.sync launch alone. */
void add_hopper_variant(KernelEmit& r, Code& device, Code& launch, const KernelSpec& spec, const std::string& ns,
                        const std::function<KernelEmit(const std::string&)>& make);
/** An operand loaded by TMA in 128-byte swizzled boxes: the array, its two tile axes (cols
 *  contiguous), the box (elements; box_cols times the element size = 128 bytes), and its dtype
 *  where it differs from the one tma_launch is given (a bf16 output of an fp8 GEMM). */
struct TmaOperand {
  std::string array, cols, rows;
  std::uint32_t box_cols = 64, box_rows = 0;
  std::optional<DType> dtype{};
  /** Where set, the map reads the Args member `repack` (workspace), a copy of the array made first
   *  by napkin::pitch_copy with rows padded to whole 128-byte lines (GemmTile::repack_pitch). */
  std::string repack{};
};
/** Device code: the TMA coordinates of `array`'s axes other than `rows` and `cols` (its batch
 *  axes at `i_<axis>`, innermost first), each as ", static_cast<int>(i_<axis>)". */
std::string tma_batch_coords(const Context& c, const std::string& array, const std::string& rows, const std::string& cols);
/** Host statements (inside run_kernel, with `blocks` defined) that build a tensor map per operand
 *  (axes innermost first: cols, rows, then the other axes) and launch `ns`::wg::kernel(a, maps...)
 *  on `grid` blocks (a host expression) when napkin::hopper_kernel says the sm_90a code can run,
 *  `condition` (a host expression) holds and every map encodes; `fallback` (the mma.sync launch)
 *  otherwise. `extra_args` (", expr...") follow the maps in the kernel's arguments. */
std::string tma_launch(const Context& c, const std::string& ns, const std::vector<TmaOperand>& ops, DType dtype, const std::string& fallback,
                       const std::string& condition = "true", const std::string& grid = "blocks", const std::string& extra_args = "");

}  // namespace napkin::cuda
