/** \file flash_form.hpp
 *  The flash form of a kernel (attention, generalised): a contraction S = f(contract(Q, K; dk)),
 *  any chain of fused element-wise statements over the score's axes (scale, bias and mask arrays
 *  indexed by them), then P = softmax(g(..); x) (the online-softmax lemma) or P = g(..) with no
 *  normaliser (sigmoid attention: O is a plain sum over x, no rescaling), then
 *  O = h(contract(P, V; x)); x streamed (or kept whole and walked in chunks of 64), the query axis
 *  grouped, d_qk and d_v independent: FlashAttention-2's loop (paper §4). Read by lowering
 *  (lower.cpp), rendered by emit/cuda/flash.cpp (mma.sync) and flash_wgmma.cpp (sm_90a).
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

struct FlashForm {
  std::string x, M, dk, dv;            ///< key axis (streamed), query axis (grouped), head dimensions
  std::string Qn, Kn, Vn;              ///< operand arrays: Q[.., M, dk], K[.., x, dk], V[.., x, dv]
  /** S holds the first contraction, P is what the last contraction reads (S itself when the
   *  chain has one statement), O the stored statement. */
  const Statement *S = nullptr, *P = nullptr, *O = nullptr;
  const Expr *cs = nullptr, *co = nullptr;  ///< the two contraction nodes (in S and in O)
  /** The score map, evaluated element by element with cs as the accumulator: P's argument under
   *  a softmax, P's expression without a normaliser. It reads the statements of `inlined` (the
   *  chain from S to P, dataflow order), which the renderers expand in place. */
  const Expr* score = nullptr;
  std::vector<std::string> inlined;
  /** "online-softmax" (paper §3; running max, sum and rescaled O), or empty: no normaliser, O is
   *  an associative sum over x of P = score. */
  std::string normaliser_lemma;
  AxisList batch;                      ///< O's axes other than M and dv (grid slices)
  DType dtype = DType::bf16;
  std::int64_t TQ = 0, TX = 0, DK = 0, DV = 0;  ///< q tile, x chunk, head dimensions (elements)
  int warps = 0;                       ///< the schedule's warps per thread block
  bool skip = false;                   ///< causal: chunks past the tile's last row are skipped
  std::string x_note;                  ///< how the schedule treats x
};

/** Reads kernel `k` of `d` as the flash form (above) for the mma.sync variant on `hw`: the kernel
 *  stores one statement; its statements other than O are element-wise over the score's axes
 *  (structurally: no name of a diagram or array matters); m16n8k16 mma.sync, tiles
 *  multiples of the mma shape, Q and double-buffered K and V tiles, rows padded by 16 bytes, within
 *  the block's SMEM); nullopt with `why` set otherwise. Dtypes are storage_dtype(d, ., opt). */
std::optional<FlashForm> analyse_flash(const Diagram& d, const KernelShape& k, const Hardware& hw, const ModelOptions& opt, std::string& why);

/** SMEM bytes per block of the mma.sync variant: Q's tile and two stages of K and V, rows padded by 8 elements. */
std::int64_t flash_mma_sync_smem_bytes(const FlashForm& f);

/** Whether the wgmma variant (emit/cuda/flash_wgmma.cpp, sm_90a) takes the form: wgmma and TMA on
 *  the hardware, a warpgroup MMA for the dtype, 64 rows of q per consumer warpgroup (one or two),
 *  T_X a multiple of 16 up to 256 (a wgmma N, PTX ISA 9.7.15), head dimensions multiples of 64 (d_v
 *  up to 256), S, P and O at most 200 registers per thread, Q, K, V of at most 5 axes (TMA), Q and
 *  two stages of K and V within SMEM. False with `why` set otherwise. */
bool flash_wgmma_fits(const FlashForm& f, const Diagram& d, const Hardware& hw, std::string& why);
/** SMEM bytes per block of the wgmma variant: Q, two stages of K and V, barriers and alignment. */
std::int64_t flash_wgmma_smem_bytes(const FlashForm& f);

}  // namespace napkin
