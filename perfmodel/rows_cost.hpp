/** \file rows_cost.hpp
 *  The price of a rows kernel as lowering shapes it (lower/rows_form.hpp) and emit/cuda/rows.cpp
 *  writes it: teams of warps (or of lanes, for short rows) walking rows twice (statistics, then
 *  the map), or once for a reduction.
 *
 *  - HBM bytes: every array the kernel reads once and each stored output once, plus the share of
 *    the second walk's re-read (lower/rows_form.hpp reread_arrays(): the arrays both walks load
 *    that carry a row axis, past the staged prefix) that the L2 does not keep. The emitter loads
 *    the re-read lines with the L2 policy evict_last and everything else it touches once (the
 *    staged prefix, the re-read itself, the outputs) with evict_first (PTX ISA 9.7.9.18
 *    createpolicy), so the re-read competes only with itself: with B the re-read bytes in flight
 *    (resident teams x the re-read bytes of a row) and C the bytes of evict_last lines the L2
 *    keeps (l2.reread_capacity_bytes, a fit: 15 MB on the H200 of its 60 MiB; the capacity where
 *    not given), a share min(1, C / B) hits and the rest comes from HBM. Before the policies
 *    (session 36) a re-read at 87-339 MB in flight missed entirely and one at 11 MB hit (ncu,
 *    RMSNorm 4096 x 4096: a 47% L2 hit rate, the second of two equal reads;
 *    hardware/measured/h100-2026-11-22-session9-rows-ncu.txt). The map walk takes the row's
 *    chunks last first (emit/cuda/rows.cpp), the lines the L2 likeliest still holds. Where
 *    lowering stages a prefix of each row in SMEM (RowsForm::staged), the map walk reads it
 *    there: only the rest is re-read, and the SMEM bytes lower the blocks per SM.
 *  - L2 bytes: the walks' loads; a scalar array strided along the walk (another axis innermost)
 *    costs a 32-byte sector per element.
 *  - Latency: a walk over a row is rounds_per_walk() dependent rounds of loads (each lane keeps one
 *    16-byte access per unroll step in flight, then consumes them), the map walk map_rounds() (those
 *    past the staged prefix; SMEM's latency is not counted). The rows' rounds are spread
 *    over the teams resident at once (blocks per SM from the form's registers and warps, or fewer
 *    where the grid does not fill the GPU), so the kernel takes
 *        t_latency = rows x (rounds of the walks) / resident teams x L
 *    with L the round-trip time at the kernel's HBM load: from the idle latency_s to
 *    hbm.loaded_latency_s (every SM loading at full rate), linear in the HBM utilisation over
 *    the kernel's time (rounds_under_load in rows_cost.cpp). This is Little's law with one round
 *    in flight per team.
 *  - HBM time: the bytes at hbm.rows_fraction of the copy bandwidth (a fit, Hardware::
 *    rows_hbm_fraction: the two walks and the stores of a row keep fewer bytes in flight than a
 *    copy), after a fill of one loaded round trip (t_fill: no byte lands before the first round).
 *  - Time: max(max(HBM, L2) + fill, latency, compute) + launch: the terms overlap across teams.
 */
#pragma once
#include <cstdint>

#include "diagrams/program.hpp"
#include "diagrams/sizes.hpp"
#include "hardware/hardware.hpp"
#include "lower/options.hpp"
#include "lower/cols_form.hpp"
#include "lower/rows_form.hpp"
#include "lower/transpose_form.hpp"

namespace napkin {

struct RowsCost {
  double hbm_bytes = 0, l2_bytes = 0;   ///< bytes, whole kernel
  double rounds = 0;                    ///< dependent rounds of loads per resident team, every walk
  double resident_teams = 0;            ///< teams in flight over the GPU (fractional: a partial wave)
  double t_hbm = 0, t_l2 = 0, t_latency = 0;  ///< seconds
  /** Seconds before the bandwidth terms start: the first round of loads in flight (rows kernels:
   *  one loaded HBM round trip, Hardware::loaded_latency_s; 0 for cols and transpose, whose latency
   *  term counts every round). Added to max(HBM, L2), not to the latency term, which counts it. */
  double t_fill = 0;
  double reread_in_flight_bytes = 0;  ///< bytes of the second walk's re-reads in flight at once (rows kernels: reread_in_flight_bytes())
  double reread_hbm_bytes = 0;        ///< the second walk's re-reads counted in hbm_bytes (the share the L2 does not keep), bytes
};

/** The memory side of rows kernel `form` of `d` at `sizes` on `hw` (compute is priced with every
 *  other kernel's FLOPs). Raises nothing. */
RowsCost price_rows(const RowsForm& form, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt);

/** The memory side of columns kernel `form` (lower/cols_form.hpp, emit/cuda/cols.cpp) of `d` at
 *  `sizes` on `hw`. HBM bytes: every array once and Y once. L2 bytes: the loads along the axis,
 *  a warp row of col_lanes x vec elements served in whole 32-byte sectors. Latency: each thread waits
 *  rounds() dependent rounds (unroll loads per array in flight), one wave of blocks after another;
 *  a round takes the latency L (the loaded latency where the blocks run in more than one wave,
 *  every SM busy with loads, as the rows kernels' fit; else the unloaded one), or the time HBM
 *  needs to deliver the bytes every resident thread has in flight if longer (Little's law):
 *      t_latency = waves x rounds x max(L, resident threads x unroll x bytes per row / HBM bandwidth),
 *  a thread's bytes per row being `vec` elements of each array.
 *  `resident_teams` holds the resident threads. Raises nothing. */
RowsCost price_cols(const ColsForm& form, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt);

/** The memory side of transpose kernel `form` (lower/transpose_form.hpp, emit/cuda/transpose.cpp)
 *  of `d` at `sizes` on `hw`. HBM bytes: X once and Y once; L2 bytes the same (a warp's row of a
 *  tile is 32 consecutive elements: whole 32-byte sectors for every dtype). Latency: a thread loads
 *  its per_thread() elements of a tile at once, then stores them from SMEM; one round of loads
 *  per wave of blocks, each the latency L (loaded over several waves) or the time HBM needs to
 *  deliver what every resident thread has in flight (Little's law: for 1-byte elements that is
 *  the bound):
 *      t_latency = waves x max(L, resident threads x per_thread x element bytes / HBM bandwidth).
 *  Raises nothing. */
RowsCost price_transpose(const TransposeForm& form, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt);

}  // namespace napkin
