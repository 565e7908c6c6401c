// The rows kernel's memory side (contract in rows_cost.hpp).
#include "perfmodel/rows_cost.hpp"

#include <algorithm>
#include <cmath>
#include <set>

namespace napkin {

namespace {

/** Bytes a walk along `axis` loads from L2: a scalar array whose innermost axis is another one
 *  is strided along the walk, each element a 32-byte sector of its own (CUDA C++ Best Practices
 *  Guide, coalesced access to global memory). */
double walk_bytes(const RowsWalk& w, const RowsForm& form, bool map_walk, const Diagram& d, const SizeMap& sizes, const ModelOptions& opt) {
  const std::string& axis = form.axis;
  double b = 0;
  for (const auto& a : w.vector_arrays) b += stored_array_bytes(d, a, sizes, opt) * (map_walk ? 1.0 - staged_share(form, a) : 1.0);
  for (const auto& a : w.scalar_arrays) {
    const double e = dtype_bits(storage_dtype(d, a, opt)) / 8.0;
    b += stored_array_bytes(d, a, sizes, opt) * (d.array_axes(a)->back() == axis ? 1.0 : 32.0 / e);
  }
  return b;
}

/** The second walk's re-reads (reread_arrays(), past the staged prefix): the share the L2 does not
 *  keep, (1 - min(1, l2_reread_capacity / re-read bytes in flight)), comes from HBM (see
 *  rows_cost.hpp): sets c.reread_in_flight_bytes and c.reread_hbm_bytes and adds the latter to
 *  c.hbm_bytes. `c.resident_teams` must be set. */
void reread_misses(RowsCost& c, const RowsForm& form, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt) {
  if (form.reduction || form.rows_total <= 0) return;
  const double reread = reread_bytes(form, d, sizes, opt);  // the arrays loaded twice, outside SMEM
  c.reread_in_flight_bytes = reread_in_flight_bytes(form, c.resident_teams, d, sizes, opt);
  const double capacity = l2_reread_capacity(hw);
  if (capacity <= 0 || c.reread_in_flight_bytes <= capacity) return;
  c.reread_hbm_bytes = reread * (1.0 - capacity / c.reread_in_flight_bytes);
  c.hbm_bytes += c.reread_hbm_bytes;
}

/** Seconds of `rounds` dependent rounds of HBM loads in series when the kernel's HBM traffic
 *  takes `t_hbm` seconds at full rate: a round trip lengthens with the memory system's load,
 *  from the idle pointer chase L0 (hbm.latency_s) to the loaded L1 (hbm.loaded_latency_s, every
 *  SM loading at full rate), taken linear in the utilisation u = t_hbm / t of a kernel lasting t
 *  (the loaded-latency curve of a queue below saturation, as Intel MLC's --loaded_latency
 *  measures it). Where the rounds bind, t = rounds x (L0 + (L1 - L0) t_hbm / t), whose positive
 *  root is t = (a + sqrt(a^2 + 4b)) / 2, a = rounds L0, b = rounds (L1 - L0) t_hbm; where they do
 *  not (rounds x L1 <= t_hbm) the kernel keeps HBM busy and each round takes L1. Measured (H200,
 *  session 43, layernorm 4096 x 1024 at 16.8 MB, 2048 blocks of two-warp teams, 5.2 rounds a
 *  team): 9.4 us, which L1 alone priced at 11.3. Raises nothing. */
double rounds_under_load(double rounds, double t_hbm, const Hardware& hw) {
  const double loaded = hw.loaded_latency_s();
  const double idle = std::min(hw.hbm_latency_s > 0 ? hw.hbm_latency_s : loaded, loaded);
  if (rounds * loaded <= t_hbm || loaded <= idle) return rounds * loaded;
  const double a = rounds * idle, b = rounds * (loaded - idle) * t_hbm;
  return (a + std::sqrt(a * a + 4 * b)) / 2;
}

}  // namespace

RowsCost price_rows(const RowsForm& form, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt) {
  RowsCost c;
  std::set<std::string> read;
  for (const auto* w : {&form.statistics, &form.map})
    for (const auto* list : {&w->vector_arrays, &w->scalar_arrays}) read.insert(list->begin(), list->end());
  read.insert(form.row_arrays.begin(), form.row_arrays.end());
  for (const auto& a : read) c.hbm_bytes += stored_array_bytes(d, a, sizes, opt);
  for (const auto& p : form.parts)
    if (p.stored) c.hbm_bytes += stored_array_bytes(d, p.statement, sizes, opt);
  c.l2_bytes = walk_bytes(form.statistics, form, false, d, sizes, opt) + walk_bytes(form.map, form, true, d, sizes, opt);
  const double sms = hw.sm_count;
  c.resident_teams = resident_teams(form, form.blocks_per_sm, hw);
  reread_misses(c, form, d, sizes, hw, opt);
  const double walk_rounds = static_cast<double>(form.rounds_per_walk() + (form.reduction ? 0 : form.map_rounds()));
  const double team_rounds = static_cast<double>(form.rows_total) * walk_rounds;
  c.rounds = team_rounds / c.resident_teams;
  const double mem_util = std::min(1.0, static_cast<double>(form.blocks) / sms);
  const double sustained = hw.rows_hbm_fraction > 0 ? hw.rows_hbm_fraction : 1.0;
  c.t_hbm = c.hbm_bytes / (hw.hbm.bandwidth_bytes_per_s * sustained) / mem_util;
  c.t_l2 = c.l2_bytes / hw.l2.bandwidth_bytes_per_s / mem_util;
  c.t_fill = hw.loaded_latency_s();
  c.t_latency = rounds_under_load(c.rounds, c.t_hbm, hw);
  return c;
}

namespace {

/** The waves of a kernel whose blocks each walk `rounds_per_wave` rounds of loads, every thread
 *  `thread_bytes` in flight a round (cols, transpose): resident threads, rounds, and HBM, L2 and
 *  latency times into `c` (its hbm_bytes and l2_bytes set). A round lasts the latency L or the
 *  time HBM takes to deliver what every resident thread has in flight (Little's law), whichever is
 *  longer; over several waves every SM stays busy with loads, so L is the loaded latency (the rows
 *  kernels' fit, the hardware table's loaded_latency_s), a wave or less the pointer chase's. Bandwidth
 *  is shared by min(1, blocks / SMs) of the SMs. */
void waves_of_blocks(RowsCost& c, std::int64_t blocks, int blocks_per_sm, int threads, double rounds_per_wave, double thread_bytes, const Hardware& hw) {
  const double slots = static_cast<double>(hw.sm_count) * blocks_per_sm;
  const double waves = std::ceil(static_cast<double>(blocks) / slots);
  c.resident_teams = std::min(static_cast<double>(blocks), slots) * threads;
  c.rounds = waves * rounds_per_wave;
  const double in_flight = c.resident_teams * thread_bytes;
  const double latency = waves > 1 ? hw.loaded_latency_s() : hw.hbm_latency_s;
  const double mem_util = std::min(1.0, static_cast<double>(blocks) / hw.sm_count);
  c.t_hbm = c.hbm_bytes / hw.hbm.bandwidth_bytes_per_s / mem_util;
  c.t_l2 = c.l2_bytes / hw.l2.bandwidth_bytes_per_s / mem_util;
  c.t_latency = c.rounds * std::max(latency, in_flight / hw.hbm.bandwidth_bytes_per_s);
}

}  // namespace

RowsCost price_cols(const ColsForm& form, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt) {
  RowsCost c;
  double row_bytes = 0;  // bytes one thread loads per row: `vec` elements of each array along the axis
  for (const auto& a : form.arrays) {
    const double e = dtype_bits(storage_dtype(d, a, opt)) / 8.0;
    row_bytes += e * form.vec;
    c.hbm_bytes += stored_array_bytes(d, a, sizes, opt);
    c.l2_bytes += stored_array_bytes(d, a, sizes, opt) * std::max(1.0, 32.0 / (form.cols_per_block() * e));
  }
  for (const auto* list : {&form.col_arrays, &form.row_arrays})
    for (const auto& a : *list) c.hbm_bytes += stored_array_bytes(d, a, sizes, opt);
  c.hbm_bytes += stored_array_bytes(d, form.statement, sizes, opt);
  waves_of_blocks(c, form.blocks, form.blocks_per_sm, form.threads(), static_cast<double>(form.rounds()), form.unroll * row_bytes, hw);
  return c;
}

RowsCost price_transpose(const TransposeForm& form, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt) {
  RowsCost c;
  c.hbm_bytes = stored_array_bytes(d, form.source, sizes, opt) + stored_array_bytes(d, form.statement, sizes, opt);
  c.l2_bytes = c.hbm_bytes;
  const double e = dtype_bits(storage_dtype(d, form.source, opt)) / 8.0;
  waves_of_blocks(c, form.blocks, form.blocks_per_sm, form.threads(), 1.0, TransposeForm::per_thread() * e, hw);
  return c;
}

}  // namespace napkin
