/** \file flash_form.hpp
 *  The flash form of a kernel (attention, generalised): a contraction S = f(contract(Q, K; dk)),
 *  any chain of fused element-wise statements over the score's axes (scale, bias and mask arrays
 *  indexed by them), then P = softmax(g(..); x) (the online-softmax lemma) or P = g(..) with no
 *  normaliser (sigmoid attention: O is a plain sum over x, no rescaling), then
 *  O = h(contract(P, V; x)); x streamed (or kept whole and walked in chunks of 64), the query axis
 *  grouped, d_qk and d_v independent: FlashAttention-2's loop (paper §4). Read by lowering
 *  (lower.cpp), rendered by emit/cuda/flash.cpp (mma.sync on cp.async, and wgmma on TMA on sm_90a).
 *  Operands bf16 or fp16 (both paths; V stored with d_v innermost), or 8-bit floats (fp8e4m3,
 *  fp8e5m2: the wgmma path alone, V stored with x innermost: below).
 */
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "diagrams/typing.hpp"
#include "hardware/hardware.hpp"
#include "lower/kernel_shape.hpp"
#include "lower/options.hpp"

namespace napkin {

/** Lazy rescaling's bound on P = exp(S - m), in log2: 2^8 = 256, within e4m3's largest finite
 *  448 (the narrowest type P is rounded to; OCP FP8 v1.0) and far inside fp32's range for l and
 *  O. Taken by the flash kernel's wgmma path (emit/cuda/render_lemma.cpp) and priced so
 *  (perfmodel/cost.cpp: one rescale of O per row). Rescaling only past a bound is
 *  FlashAttention-4's conditional rescaling (Blackwell); the bound here is e4m3's. */
inline constexpr double kLazyRescaleLog2 = 8;

struct FlashForm {
  std::string x, M, dk, dv;            ///< key axis (streamed), query axis (grouped), head dimensions
  std::string Qn, Kn, Vn;              ///< operand arrays: Q[.., M, dk], K[.., x, dk], V[.., x, dv] or V[.., dv, x] (v_x_inner)
  /** S holds the first contraction, P is what the last contraction reads (S itself when the
   *  chain has one statement), O the stored statement. */
  const Statement *S = nullptr, *P = nullptr, *O = nullptr;
  const Expr *cs = nullptr, *co = nullptr;  ///< the two contraction nodes (in S and in O)
  /** The score map, evaluated element by element with cs as the accumulator: P's argument under
   *  a softmax, P's expression without a normaliser. It reads the statements of `inlined` (the
   *  chain from S to P, dataflow order), which the renderers expand in place. */
  const Expr* score = nullptr;
  std::vector<std::string> inlined;
  /** The softmax scale folded into the exponent (lower/flash_scale.hpp): `scaled` the mul or div
   *  node of the score chain whose operand `scale` (uniform: no axes) is taken out, the chain
   *  rendered with `scaled` as its other operand and P = exp2(B * scale * log2 e - m), m the
   *  running max of B (of -B where the scale is negative); `scale_divides` where `scaled` divides
   *  by `scale`; `scale_sign_at_run_time` where the scale reads a scalar input (an fp8
   *  dequantisation factor), so that its sign is known only when the kernel runs. Null: nothing
   *  folded. */
  const Expr *scaled = nullptr, *scale = nullptr;
  bool scale_divides = false, scale_sign_at_run_time = false;
  /** "online-softmax" (paper §3; running max, sum and rescaled O), or empty: no normaliser, O is
   *  an associative sum over x of P = score. */
  std::string normaliser_lemma;
  /** The softmax's row statistics the kernel also computes (FlashAttention-2 stores logsumexp
   *  for its backward): fused statements over P's axes but x whose expressions are element-wise
   *  maps of max(A; x) and sum(exp(A - M); x), A the softmax's argument and M a statement
   *  max(A; x) (the online-rescaled-sum lemma), e.g. lse = M + log(sum(exp(A - M); x)). Each is
   *  the running max m and the running sum l at the end of the stream. */
  std::vector<const Statement*> stats;
  AxisList batch;                      ///< O's axes other than M and dv (grid slices)
  DType dtype = DType::bf16;           ///< Q, K and V's dtype: bf16, fp16, fp8e4m3 or fp8e5m2
  /** V stored with the contracted axis x innermost (V[.., dv, x]): O += P V reads V K-major, the
   *  one layout 8-bit wgmma takes for B (PTX ISA 9.7.15.5.1: no transpose for 8-bit types). Taken
   *  for 8-bit operands only; 16-bit operands are read with d_v innermost. */
  bool v_x_inner = false;
  std::int64_t TQ = 0, TX = 0, DK = 0, DV = 0;  ///< q tile, x chunk, head dimensions (elements)
  int warps = 0;                       ///< the schedule's warps per thread block
  bool skip = false;                   ///< causal: chunks past the tile's last row are skipped
  /** Under the skip, the chunks of x each tile of M computes, the longest first: the order the
   *  grid hands out each batch slice's tiles (emit/cuda/render_grid.cpp flash_tile_origin), so
   *  that no long block starts last (longest-processing-time-first list scheduling; the model
   *  replays it, perfmodel/cost.cpp dispatch_stretch). Empty without a skip. */
  std::vector<std::int64_t> tile_chunks;
  /** Under the skip, the grid runs the batch slices fastest (every slice's longest tile first,
   *  then every slice's next: one global longest-first order) where K and V, whole, fit in half
   *  of L2, so that a slice's K and V stay there between its tiles' blocks; else each slice's
   *  tiles run together, the longest first, sharing its K and V in L2 as they stream them
   *  (session 24, H200: GQA at s 2048, K and V 8 MB, 100.8 -> 86.9 us slices fastest; B4 H16
   *  N4096, 134 MB, 550.8 -> 615.4 us, so not there). */
  bool slices_fastest = false;
  std::string x_note;                  ///< how the schedule treats x
};

/** Whether `e` is element-wise (positional index maps included) apart from its contraction
 *  nodes, which it appends to `cons` (pre-order). Shared by the flash and flash_bwd forms. */
bool elementwise_but_contractions(const Expr& e, std::vector<const Expr*>& cons);

/** Reads kernel `k` of `d` as the flash form (above) on `hw`: the kernel stores one contraction
 *  (O) and, beside it, only row statistics of the softmax (`stats`); its other statements are
 *  element-wise over the score's axes (structurally: no name of a
 *  diagram or array matters); tiles multiples of 16; Q and K stored with d_qk innermost. 16-bit
 *  operands (the mma.sync variant's checks: m16n8k16 mma.sync, Q and double-buffered K and V tiles
 *  with rows padded by 16 bytes within the block's SMEM) with V's d_v innermost; 8-bit float
 *  operands (no mma.sync: the wgmma variant alone, checked by flash_wgmma_fits) with V's x
 *  innermost, else refused with the reason (fp8 wgmma reads K-major B only; no in-kernel transpose
 *  of V). nullopt with `why` set otherwise. Dtypes are storage_dtype(d, ., opt). */
std::optional<FlashForm> analyse_flash(const Diagram& d, const KernelShape& k, const Hardware& hw, const ModelOptions& opt, std::string& why);

/** SMEM bytes per block of the mma.sync variant: Q's tile and two stages of K and V, rows padded by 8 elements. */
std::int64_t flash_mma_sync_smem_bytes(const FlashForm& f);
/** Registers per thread the mma.sync variant (emit/cuda/flash.cpp, render_mma.cpp) declares: each
 *  warp owns MT = T_Q / (16 x warps) m16 row blocks and holds, per block, Q's A fragments (D_K / 16
 *  x 4 words), O's accumulator (D_V / 8 x 4 floats), S's (T_X / 8 x 4 floats), one P fragment (4
 *  words) and the online softmax's running max and sum (4), plus one V fragment (4) and
 *  `base` registers of indices and pointers. Over the hardware's limit, nvcc spills them to local
 *  memory (H200, session 44: attention d64 B16 H16 N1024 with MT = 2, 276 registers, 449 us; MT
 *  = 4, 516, 9395 us; with MT = 2 and T_X = 64, 212, 383 us). */
int flash_mma_sync_registers(const FlashForm& f, int base);

/** Whether the wgmma variant (emit/cuda/flash.cpp, sm_90a) takes the form: wgmma and TMA on
 *  the hardware, a warpgroup MMA for the dtype, 64 rows of q per consumer warpgroup (one or two),
 *  T_X a multiple of 16 up to 256 (a wgmma N, PTX ISA 9.7.15), head dimensions whole 128-byte
 *  swizzle rows (64 16-bit or 128 8-bit elements; d_v up to 256), with V's x innermost (8-bit) T_X
 *  whole swizzle rows too, S, P and O at most 200 registers per thread (P: T_X / 4 of 16 bits,
 *  T_X / 8 of 8 bits), Q, K, V of at most 5 axes (TMA), Q and two stages of K and V within SMEM.
 *  False with `why` set otherwise. */
bool flash_wgmma_fits(const FlashForm& f, const Diagram& d, const Hardware& hw, std::string& why);
/** SMEM bytes per block of the wgmma variant: Q, two stages of K and V (of the operand dtype),
 *  barriers and alignment. */
std::int64_t flash_wgmma_smem_bytes(const FlashForm& f);
/** Elements of the operand dtype in one 128-byte swizzle row of the wgmma variant's tiles (64 of
 *  a 16-bit type, 128 of an 8-bit one). */
std::int64_t flash_swizzle_row_elems(const FlashForm& f);
/** Whether the operands are 8-bit floats: then the form has the wgmma path alone. */
bool flash_fp8(const FlashForm& f);

/** Which statistic of the online softmax of `f` the reduction node `n` is: 'm' for max(A; x),
 *  'l' for sum(exp(A - M); x) with M a fused statement max(A; x) (A the softmax's argument,
 *  compared as printed), 0 otherwise. */
char flash_statistic(const Diagram& d, const FlashForm& f, const Expr& n);

}  // namespace napkin
