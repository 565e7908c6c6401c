/** \file hardware.hpp
 *  Hardware descriptions as data (the .toml files of hardware/): memory levels with capacity and bandwidth, SM
 *  count, per-SM and per-block limits, tensor-core rate per dtype, FP32 and special-function rates,
 *  MMA instruction shapes and asynchronous-copy features. Each bundled number carries its source in
 *  a comment of its file. Units: bytes, bytes per second, FLOP per second (2 per multiply-add),
 *  operations per second, seconds, hertz.
 */
#pragma once
#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "diagrams/diagnostics.hpp"
#include "diagrams/dtype.hpp"

namespace napkin {

/** One tensor-core instruction: per `scope` (a warp, or a warpgroup of 4 warps), it multiplies an
 *  m x k tile by a k x n tile of `dtype` and accumulates an m x n tile. PTX ISA 9.7.14/9.7.15. */
struct MmaShape {
  DType dtype = DType::bf16;
  int m = 16, n = 8, k = 16;
  std::string scope = "warp";  ///< "warp" (mma.sync) or "warpgroup" (wgmma)
  std::string ptx;
  /** Whether the atom reads operands stored MN-major (M or N innermost, K strided) from memory:
   *  true for 16-bit types (wgmma's transpose bits, PTX ISA 9.7.15.5.1; ldmatrix .trans, 9.7.14.5.15);
   *  false where only K-major operands are read (8-bit wgmma and mma.sync). Optional, default false. */
  bool mn_major = false;
  /** Share of the dtype's [tensor_core] peak this instruction reaches, where it differs from the
   *  hardware's mma_sync_fraction (scope "warp") or wgmma_fraction ("warpgroup"): e.g. Hopper runs
   *  mma.sync m16n8k32 e4m3 as conversions to f16 and two HMMA.16816 (SASS of
   *  kernels/calibrate/microbench.cu mma8_rate), at about the f16 rate. Optional; 0: that fraction. */
  double fraction = 0;
};

/** A memory level's size and the rate at which data moves into it. */
struct Level {
  double capacity_bytes = 0;          ///< per device (HBM, L2) or per SM (SMEM, registers)
  double bandwidth_bytes_per_s = 0;   ///< aggregate over the device
};

struct Hardware {
  std::string name, arch, file;
  std::vector<std::string> aliases;
  int sm_count = 0;
  double clock_hz = 0;
  double launch_overhead_s = 0;
  Level hbm, l2, smem;
  double smem_max_per_block_bytes = 0;
  int registers_per_sm = 0;             ///< 32-bit registers
  int max_registers_per_thread = 0;
  int max_warps_per_sm = 0, max_threads_per_block = 0, max_blocks_per_sm = 0;
  double fp32_flops_per_s = 0;
  double sfu_ops_per_s = 0;             ///< exp2, rsqrt, ... per second
  double mma_sync_fraction = 1;         ///< share of the tensor-core peak reachable with mma.sync
  /** Share of the tensor-core peak reachable with wgmma (Hopper, PTX ISA 9.7.15), measured by
   *  `napkin calibrate` (m64n128k16 from SMEM); 0 when not known: mma_sync_fraction applies. */
  double wgmma_fraction = 0;
  /** Share of the tensor-core peak a long tensor-bound kernel sustains under the board's power
   *  limit, where the SM clock drops below the one the peak is quoted at: cuBLAS's bf16 GEMM
   *  8192^3 run back to back, measured by `napkin calibrate`; 0 when not known (no cap). The model
   *  takes the smaller of it and the instruction's fraction. */
  double sustained_tensor_fraction = 0;
  /** Share of a flash_bwd kernel's SMEM reads (its wgmma operands and staged tiles, the model's
   *  t_smem) that its two consumer warpgroups do not hide behind their MMAs: each chunk's chain
   *  S -> P -> dP -> dS -> staged tiles -> dV, dK waits on its own SMEM traffic. A fit to measured
   *  kernels (the hardware TOML files give the fit and its data); 0 when not fitted: not priced. */
  double flash_bwd_smem_exposed = 0;
  /** Share of the shorter of a flash forward kernel's tensor time and softmax time (FP32 + SFU +
   *  chunk latency) that its two consumer warpgroups hide behind each other on wgmma when the two
   *  are equal (FlashAttention-3 §3.1: one's softmax beside the other's MMAs; a lone consumer
   *  hides none; the exposed rest shrinks in proportion to shorter / longer: perfmodel/cost.cpp),
   *  and the latency (seconds) each chunk of x adds on an SM slot beyond its arithmetic (barrier
   *  hand-overs, MMA waits, row reductions). Fits to measured kernels (the hardware TOML files
   *  give the fit and its data); 0 when not fitted: the terms add up, no chunk latency. */
  double flash_softmax_hidden = 0, flash_chunk_latency_s = 0;
  /** How much longer a flash forward kernel on mma.sync runs than its summed compute terms
   *  (tensor at mma_sync_fraction, FP32, SFU, chunk latency): each warp's chunk is one dependent
   *  chain of MMAs, fragment packing, softmax and O's rescale, which the summed rates do not
   *  price (>= 1; 1 where not fitted). A fit (the hardware TOML files give its data). */
  double flash_mma_sync_factor = 1;
  /** The share of that time a flash forward block on mma.sync takes alone on its SM (a grid no
   *  larger than the SMs: the blocks are spread one to an SM) against beside a second block, which
   *  the factor above was fitted with (<= 1; 1 where not fitted). A fit (the TOML files give it). */
  double flash_mma_sync_alone = 1;
  /** L2 -> SMEM bandwidth of the bulk-copy engine that TMA loads use (bytes/s, whole device),
   *  two blocks per SM reading the same chunks in the same order (a GEMM's co-resident blocks
   *  re-reading an operand's tiles), measured by `napkin calibrate` (kernels/calibrate/microbench.cu
   *  l2_bulk_read; before session 33 each block read distinct chunks); the rate of the wgmma
   *  GEMM's L2 -> SMEM term. 0 when not known: l2.bandwidth_bytes_per_s applies. */
  double l2_bulk_bandwidth_bytes_per_s = 0;
  /** The most one SM's TMA loads land from L2 (bytes/s, one SM; l2.bulk_sm_bandwidth_bytes_per_s,
   *  a fit: the TOML gives its data): a wgmma GEMM of fewer tiles than SMs lands
   *  min(l2_bulk_bandwidth_bytes_per_s, tiles x this). 0 when not known: each SM lands its share
   *  of the whole device's rate, l2_bulk_bandwidth_bytes_per_s / sm_count. */
  double l2_bulk_sm_bandwidth_bytes_per_s = 0;
  /** Round trip of one TMA load that hits in L2 while every SM keeps its ring of loads in flight
   *  (seconds; l2.loaded_latency_s): from the producer's issue to the bytes landed in SMEM. Read
   *  by the wgmma GEMM's ring term (perfmodel/cost.cpp gemm_ring_terms); 0: unknown (the ring is
   *  not priced). */
  double l2_loaded_latency_s = 0;
  /** Bytes of lines loaded with the evict_last policy that the L2 keeps for a second read while
   *  every SM streams other lines through it marked evict_first (l2.reread_capacity_bytes): what a
   *  rows kernel's map walk finds of the rows its statistics walk loaded (perfmodel/rows_cost.hpp:
   *  a share min(1, this / re-read bytes in flight) of the re-read hits). A fit to measured rows
   *  kernels (the TOML gives the data); 0 when not known: l2.capacity_bytes applies. */
  double l2_reread_capacity_bytes = 0;
  /** Seconds a ring stage of a thread-block cluster turns over later than a lone block's
   *  (compute.cluster_stage_latency_s): a stage is refilled only after every block of the cluster
   *  released it (mbarrier arrivals on the other blocks' barriers, PTX ISA 9.7.13.15.11), so the
   *  blocks walk in lockstep at the pace of the slower. A fit (the TOML gives its data); 0: not
   *  priced. */
  double cluster_stage_latency_s = 0;
  /** Seconds the consumer warpgroups of a wgmma GEMM spend on each 64-column block of each m64
   *  subtile of a tile they store through SMEM by TMA (compute.staged_store_block_s: stmatrix
   *  into the staging buffer, fence.proxy.async, two named barriers; emit/cuda/render_store.cpp), the
   *  tensor cores idle meanwhile. A fit (the TOML gives its data); 0: not priced. */
  double staged_store_block_s = 0;
  /** Seconds per 64-column block of the last output tile on each SM of a wgmma GEMM stored by TMA
   *  (compute.gemm_last_store_block_s): staged, stored and waited for in series, nothing to
   *  overlap (a fit: hardware/h200.toml; 0 where not given). */
  double gemm_last_store_block_s = 0;
  /** Seconds the consumers of a persistent wgmma GEMM spend between one tile's last MMAs and the
   *  next tile's first beyond their staging (compute.gemm_tile_turnover_s: draining the wgmma
   *  groups, the epilogue's barriers, the next tile's start). A fit (the TOML gives its data); 0:
   *  not priced. */
  double gemm_tile_turnover_s = 0;
  /** Share of the SMEM bandwidth (smem.bandwidth_bytes_per_s, quoted at the boost clock) a wgmma
   *  GEMM that keeps the tensor cores busy gets, at the clock the power limit leaves it
   *  (compute.sustained_smem_fraction). A fit (the TOML gives its data); 0: the full bandwidth. */
  double sustained_smem_fraction = 0;
  /** fp32 payload bytes/s that red.global.add.f32 (PTX ISA 9.7.13.6 'red') sustains into an
   *  L2-resident buffer, coalesced, distinct addresses, every SM busy, measured by `napkin
   *  calibrate`; 0 when not known: outputs accumulated by atomic adds are not priced (and so never
   *  chosen). */
  double l2_atomic_bandwidth_bytes_per_s = 0;
  /** Latency of one dependent HBM load (seconds; pointer chase, `napkin calibrate`); 0: unknown. */
  double hbm_latency_s = 0;
  /** Time of one round of dependent loads while every SM keeps its loads in flight (seconds;
   *  hbm.loaded_latency_s): queueing in L2 and HBM makes it several times the unloaded latency.
   *  Read by the rows kernel's price (perfmodel/rows_cost.hpp); 0: unknown (latency_s applies). */
  double hbm_loaded_latency_s = 0;
  /** The share of the HBM copy bandwidth a rows kernel (lower/rows_form.hpp: teams walking rows
   *  twice, then storing) sustains once its loads flow (hbm.rows_fraction, a fit: the TOML gives
   *  its data); 0: the whole copy bandwidth. Read by perfmodel/rows_cost.hpp. */
  double rows_hbm_fraction = 0;
  std::map<DType, double> tensor_flops_per_s;  ///< dense, fp32 accumulate; absent: no tensor cores
  bool cp_async = false, tma = false, wgmma = false;
  /** Thread-block clusters whose blocks TMA can multicast one load into (features.clusters; optional, default false. sm_90+: CUDA C++
   *  Programming Guide, "Thread Block Clusters"; PTX ISA 9.7.9.25.5.1, .multicast::cluster). */
  bool clusters = false;
  std::vector<MmaShape> mma;

  /** Tensor-core peak for `t`, or nullopt when the GPU has none for that dtype. */
  std::optional<double> tensor_rate(DType t) const;
  /** One HBM round trip while every SM keeps loads in flight (seconds): hbm_loaded_latency_s,
   *  or the unloaded pointer chase's hbm_latency_s where that is not known. */
  double loaded_latency_s() const { return hbm_loaded_latency_s > 0 ? hbm_loaded_latency_s : hbm_latency_s; }
  /** The warp-level MMA (mma.sync) for `t`, or nullptr. */
  const MmaShape* warp_mma(DType t) const;
  /** The warpgroup-scope (wgmma) instruction with fp32 accumulate (int32 for integer `t`) for `t`,
   *  or nullptr: m64nNkK with K * bits(t) = 256 (32 bytes of K per row: k16 for 16-bit types, k32
   *  for fp8 and int8; PTX ISA 9.7.15.2). */
  const MmaShape* warpgroup_mma(DType t) const;
};

/** Reads a hardware description from TOML text, checked against the schema of
 *  hardware/hardware_schema.hpp. Every problem (a TOML syntax error, a missing key, a key the
 *  schema does not know, with a "did you mean" where one is close, a value of the wrong type, a
 *  real number where an integer belongs, a number out of its range or not finite, an unknown dtype,
 *  SMEM per block above SMEM per SM) is a diagnostic at `file:line:col` of the value that names
 *  the field; returns nullopt if any was reported. Never throws on bad input. */
std::optional<Hardware> parse_hardware(const SourceFile& src, DiagnosticEngine& diags);

/** TOML text of `h` in the layout parse_hardware reads (round trip: parse(format(h)) == h's
 *  fields), with `header` as leading comment lines. */
std::string format_hardware(const Hardware& h, const std::string& header);

/** The bundled descriptions' folder: $NAPKIN_HARDWARE_DIR, else the source tree's hardware/. */
std::string hardware_dir();
/** Loads a description by name or alias (case-insensitive: "h100", "H100-SXM5") from
 *  hardware_dir(), or from a path ending in .toml. Raises UserError for an unknown name (listing
 *  each bundled description once, by its first alias) or an unreadable file. A malformed file,
 *  given by path or bundled and asked for by its file name ("h100" for h100.toml), prints its
 *  located diagnostics and raises UserError naming it; the unknown-name error also names, with
 *  their diagnostics, bundled files that do not load. */
Hardware load_hardware(const std::string& name_or_path);
/** Names of every bundled description, sorted by file name. */
std::vector<std::string> bundled_hardware();

}  // namespace napkin
