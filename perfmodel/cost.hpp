/** \file cost.hpp
 *  The IO performance model: the cost of a scheduled (relabelled) diagram on a hardware
 *  description: the price of each kernel as lowering specifies it (lower/lower.hpp). Per kernel it gives bytes moved per level (symbolic and evaluated), bytes resident
 *  per level, FLOPs per unit, occupancy, predicted time and the bound. Formulas (docs/cost-model.md):
 *
 *  - Transfers (paper §2.3, §3): a kernel input A moves |A| x prod(N_a / g_a) bytes into SMEM, the
 *    product over the grouped axes a that A lacks (A is re-read by every group along them); an
 *    output moves |A| once. Streaming does not change transfers; it bounds residency.
 *  - HBM: each kernel input and output once (compulsory), plus the re-reads that miss L2: the
 *    per-stream-step working set of the blocks in flight is compared with the L2 capacity.
 *  - Residency per thread block: SMEM holds the input tiles (x stages for streamed ones);
 *    registers hold output accumulators, intermediate tiles and lemma state in fp32; intermediates
 *    move to SMEM when the register file is full.
 *  - FLOPs: 2 per multiply-add of a contraction of two or more arrays (tensor core when the dtype
 *    has one), 1 per element-wise operation (FP32), 1 special-function op per exp, log, tanh,
 *    sigmoid, silu, gelu, rsqrt, sqrt and softmax element; fully masked causal tiles are skipped.
 *  - Time: t = max(memory, compute) when streamed inputs are pipelined (cp.async, >= 2 stages)
 *    and at least 8 warps per SM can hide one under the other (with w < 8 warps, (1 - w/8) of the
 *    shorter term is exposed),
 *    memory = max(HBM, L2->SMEM, SMEM reads), compute = tensor + FP32 + SFU (one warp issues
 *    all three: no overlap is assumed between them), each divided by the wave efficiency of the
 *    grid; plus, for the persistent wgmma GEMM, its epilogue's output stores (not overlapped with
 *    the main loop: output bytes / HBM bandwidth, taken out of the HBM term; overlapped where the
 *    spec stores through SMEM by TMA); plus the launch
 *    overhead. The bound is the largest term.
 *  - Flash forward kernels (perfmodel/cost.cpp flash_fwd_compute): compute = max(tensor, softmax)
 *    + (1 - h) min(tensor, softmax) + (tensor + softmax) / chunks per block, with softmax = FP32 +
 *    SFU + chunks in series x a per-chunk latency, h the share two consumer warpgroups hide on
 *    wgmma, 1 - (1 - h0) min / max, and the last term each block's first MMAs and last softmax
 *    (its pipeline's ends); one consumer, or mma.sync, hides none and has no ends term (compute =
 *    tensor + softmax); plus each block's start, a loaded HBM round trip per block in series. h0
 *    and the chunk latency are hardware fits (Hardware::flash_softmax_hidden,
 *    flash_chunk_latency_s).
 *  - Kernels lowered to SIMT are priced as emitted (perfmodel/simt_cost.hpp), rows kernels as
 *    lowering shapes them (perfmodel/rows_cost.hpp: registers and occupancy of the emitted launch
 *    bounds, dependent rounds of loads by Little's law); the schedule's own claims (tiles that
 *    fit, clusters) are still checked.
 */
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "diagrams/program.hpp"
#include "diagrams/schedule.hpp"
#include "diagrams/sizes.hpp"
#include "diagrams/weave.hpp"
#include "hardware/hardware.hpp"
#include "lower/lower.hpp"

namespace napkin {

/** One array's transfer between two levels in one kernel. */
struct Transfer {
  std::string array;
  MemLevel from = MemLevel::hbm, to = MemLevel::smem;
  double bytes = 0;        ///< evaluated, whole grid
  double reuse = 1;        ///< times each element moves (re-reads across groups)
  std::string symbolic;    ///< in elements, e.g. "b·h·x·d·q/g_q"
};

struct KernelCost {
  /** The kernel as lowering says it will run (lower/lower.hpp): what this cost prices and what
   *  the emitters render. */
  std::shared_ptr<const KernelSpec> spec;
  std::string name;
  std::vector<std::string> statements;
  std::map<std::string, AxisPlan> axes;
  std::vector<std::string> inputs, outputs, internal;
  std::map<std::string, MemLevel> level;  ///< level of each array's occurrence inside the kernel
  std::vector<Transfer> transfers;
  double hbm_bytes = 0, l2_to_smem_bytes = 0, smem_read_bytes = 0;
  /** Bytes TMA writes into SMEM (the wgmma GEMM: every landed operand byte, multicast ones into
   *  each block), priced with smem_read_bytes in t_smem; 0 elsewhere. */
  double smem_fill_bytes = 0;
  std::string smem_symbolic;               ///< H at the SMEM level, elements, symbolic
  double smem_resident_bytes = 0;          ///< per thread block
  double register_bytes = 0;               ///< per thread block (fp32 accumulators, tiles, state)
  int registers_per_thread = 0;
  double flops_tensor = 0, flops_fp32 = 0, sfu_ops = 0;
  double causal_active_fraction = 1;       ///< share of (q tile, x chunk) pairs not fully masked
  std::string causal_q, causal_x;          ///< the axes of the skipped causal mask (empty: none)
  /** Kept offsets index(causal_x) - index(causal_q): lo <= d <= hi (KernelShape::causal_lo). */
  std::optional<std::int64_t> causal_lo, causal_hi = 0;
  std::int64_t blocks = 1;
  int warps = 4, blocks_per_sm = 0, warps_per_sm = 0;
  double wave_efficiency = 1;
  double t_hbm = 0, t_l2 = 0, t_smem = 0, t_tensor = 0, t_fp32 = 0, t_sfu = 0, t_launch = 0, t_total = 0;
  /** Seconds of the persistent wgmma GEMM's epilogue I/O not overlapped with the main loop
   *  (emit/cuda/render_store.cpp): its output stores unless stored by TMA, and the epilogue's own
   *  inputs (read from global after the main loop, and waited for: a round per 64-column block of
   *  the tile through the TMA store's staging ring), added to the total; 0 elsewhere. */
  double t_epilogue = 0;
  /** Seconds of the wgmma GEMM's epilogue maps (its FP32 and SFU work: bias, GELU, ...), run by
   *  the consumer warpgroups between one tile's MMAs and the next: added to the total, not
   *  overlapped (t_fp32 and t_sfu hold them too); 0 elsewhere. */
  double t_epilogue_maps = 0;
  /** Seconds the wgmma GEMM's consumers spend between one tile's MMAs and the next's: tiles per
   *  SM x (Hardware::gemm_tile_turnover_s + the TMA-stored tiles' staging, T_N / 64 blocks per
   *  output x m64 subtiles per consumer x Hardware::staged_store_block_s), the tensor cores idle:
   *  added to the tensor time (both the consumers' work), overlapped with the memory terms; 0
   *  elsewhere. */
  double t_tile_turnover = 0;
  /** A wgmma GEMM's last tile on each SM, stored by TMA with no next tile to overlap: T_N/64
   *  column blocks per output x Hardware::gemm_last_store_block_s, in series (seconds). */
  double t_last_stores = 0;
  /** The mma.sync GEMM's operands copied element by element (GemmTile::copy_bytes 0: strides that
   *  no 4-byte cp.async divides): each thread loads 16 bytes of elements, waits one loaded L2 round
   *  trip (Hardware::l2_loaded_latency_s, else the HBM one) and stores them to SMEM, rounds of all
   *  the block's threads in series, per K chunk; co-resident blocks overlap each other's. In series
   *  with the rest (seconds); 0 elsewhere. */
  double t_scalar_staging = 0;
  /** The wgmma path's operands read from a copy with rows padded to 128-byte lines
   *  (KernelSpec::repacks, gemm and flash): per copy, its source read and its rows written at the HBM bandwidth,
   *  plus a launch (Hardware::launch_overhead_s), before the kernel, in series (seconds). */
  double t_repack = 0;
  /** The wgmma GEMM's TMA ring (perfmodel/cost.cpp gemm_ring_terms): each of its `wgmma_stages`
   *  slots turns over once per load round trip plus the consumers' MMAs on it, so an SM walks at
   *  most stages / (latency + hold) stages per second (Little's law). `ring_latency_s`: one
   *  stage's round trip (the loaded HBM latency where one of its tiles is read from HBM, else the
   *  loaded L2 latency, plus the cluster's lockstep); `ring_landing_s`: one stage's bytes at one
   *  SM's share of the L2 -> SMEM rate; `t_ring`: (stages walked per SM x that latency + the
   *  first tile's stages x the landing + t_tensor) / stages, a memory term (overlapped with
   *  compute); the ring's first fill (one latency and one landing) is c_.t_fill. 0 elsewhere, and
   *  where the hardware gives no L2 latency. */
  double ring_latency_s = 0, ring_landing_s = 0, t_ring = 0;
  /** Seconds of zeros a flash_bwd kernel writes into its stored tiles over the chunks its causal
   *  skip leaves out (flash_bwd_causal_skip), before its stream loop and by the same warps: added
   *  to the total, not overlapped; 0 elsewhere. */
  double t_skipped_zeros = 0;
  /** Outputs accumulated by atomic adds (KernelShape::atomic, lemma atomic-sum): the fp32 payload
   *  bytes every block adds into global memory (each atomic output's elements times the blocks
   *  along the reduced grouped axis, times the chunks that run), and their seconds at the L2's
   *  atomic bandwidth (Hardware::l2_atomic_bandwidth_bytes_per_s), overlapped with the other
   *  memory terms; `t_zero`, the launcher's zeroing of those outputs before the kernel (their
   *  bytes at HBM bandwidth plus a launch), added to the total. 0 elsewhere. */
  double atomic_bytes = 0, t_atomic = 0, t_zero = 0;
  /** Seconds of a flash_bwd kernel's SMEM reads its two consumer warpgroups do not hide behind
   *  their MMAs: t_smem x Hardware::flash_bwd_smem_exposed, added to the total; 0 elsewhere. */
  double t_smem_exposed = 0;
  /** A flash forward kernel's (perfmodel/cost.cpp flash_fwd_compute): `t_fill`, seconds its
   *  blocks wait at their start for Q and the first K chunk (a loaded HBM round trip each, times
   *  the blocks per SM slot), added to the total, not overlapped; `t_chunk_latency`, seconds of
   *  the per-chunk latency (Hardware::flash_chunk_latency_s times the chunks in series on an SM
   *  slot), counted with the softmax. 0 elsewhere. */
  double t_fill = 0, t_chunk_latency = 0;
  /** A flash forward kernel's with two consumer warpgroups on wgmma: seconds of each block's
   *  first chunk's MMAs and last chunk's softmax, which have nothing of the other kind to overlap
   *  (the pipeline's fill and drain): (tensor + softmax) / chunks per block, counted with the
   *  compute. 0 elsewhere. */
  double t_pipeline_ends = 0;
  /** A flash forward kernel's on mma.sync: seconds beyond its summed compute terms, (Hardware::
   *  flash_mma_sync_factor x Hardware::flash_mma_sync_alone where every block has its SM alone, -
   *  1) x (tensor + FP32 + SFU + chunk latency), counted with the compute. 0 elsewhere. */
  double t_mma_sync_chain = 0;
  /** A flash_bwd kernel's blocks' makespan over their mean time per block slot (>= 1; 1
   *  elsewhere): a causal skip gives the blocks different numbers of chunks
   *  (FlashBwdForm::tile_chunks), handed to the SMs in grid order; in one wave the longest block
   *  sets the time, in several the long blocks dispatched last. Compute terms are scaled by it. */
  double imbalance = 1;
  /** Dependent rounds of loads in series (seconds; rows kernels only, perfmodel/rows_cost.hpp):
   *  the rows' rounds of both walks over the teams of warps resident at once, times the loaded
   *  round-trip time. */
  double t_latency = 0;
  /** The tensor-core path: wgmma (Hopper: warps a multiple of 4, at most two consumer
   *  warpgroups, the warps' axis tiled by a multiple of 64 rows per consumer warpgroup (wgmma's
   *  m64), wgmma and TMA on the hardware; the emitter's sm_90a variant) or mma.sync, and the
   *  share of the tensor-core peak it reaches (hardware wgmma_fraction / mma_sync_fraction). */
  bool warpgroup_mma = false;
  double tensor_fraction = 1;
  /** Thread blocks per cluster (schedule `cluster A by 2`; 1: none): adjacent tiles of A whose
   *  blocks share the operand tiles that do not vary along A, each block loading 1/cluster of them
   *  by TMA multicast into all (PTX ISA 9.7.9.25.5.1, `.multicast::cluster`; emit/cuda/render_tma.cpp).
   *  Those tiles' L2 -> SMEM bytes are divided by it. Only GEMM kernels on the wgmma path. */
  int cluster = 1;
  std::vector<std::string> cluster_shared;  ///< arrays whose tiles the cluster's blocks share
  double cluster_saved_bytes = 0;           ///< L2 -> SMEM bytes the multicast saves (whole grid)
  double l2_offline_bytes = 0;              ///< L2 line bytes fetched beyond those landed: tile rows off a 128-byte line boundary (whole grid)
  /** Whether a `cluster` directive could apply: a GEMM kernel on the wgmma path on hardware with
   *  clusters (the search then tries one along each grouped axis). */
  bool clusterable = false;
  std::string bound;
  std::vector<std::string> problems;       ///< why it does not fit (empty when it does)
};

struct ScheduleCost {
  std::vector<KernelCost> kernels;
  double t_total = 0, hbm_bytes = 0, l2_to_smem_bytes = 0, flops = 0;
  bool fits() const;
};

/** Cost of `s` for `d` at `sizes` on `hw`. `s` must have passed check_schedule (derive/).
 *  Call statements are costed here only for what surrounds the call: derive adds the callee. */
/** Cost of the lowered kernel `spec` (lower_kernel of the same p, d, weave, sizes, hw, opt). */
KernelCost price_kernel(const Program& p, const Diagram& d, const std::vector<StatementWeave>& weave, std::shared_ptr<const KernelSpec> spec,
                        const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt = {});
ScheduleCost cost_schedule(const Program& p, const Diagram& d, const Schedule& s, const SizeMap& sizes,
                           const Hardware& hw, const ModelOptions& opt = {});
KernelCost cost_kernel(const Program& p, const Diagram& d, const std::vector<StatementWeave>& weave,
                       const Schedule& s, std::size_t kernel, const SizeMap& sizes, const Hardware& hw,
                       const ModelOptions& opt = {});

}  // namespace napkin
