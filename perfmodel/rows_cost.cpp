// The rows kernel's memory side (contract in rows_cost.hpp).
#include "perfmodel/rows_cost.hpp"

#include <algorithm>
#include <cmath>
#include <set>

namespace napkin {

namespace {

double array_bytes(const Diagram& d, const std::string& array, const SizeMap& sizes, const ModelOptions& opt) {
  double n = dtype_bits(storage_dtype(d, array, opt)) / 8.0;
  for (const auto& a : *d.array_axes(array)) n *= static_cast<double>(sizes.at(a));
  return n;
}

/** Bytes a walk along `axis` loads from L2: a scalar array whose innermost axis is another one
 *  is strided along the walk, each element a 32-byte sector of its own (CUDA C++ Best Practices
 *  Guide, coalesced access to global memory). */
double walk_bytes(const RowsWalk& w, const std::string& axis, const Diagram& d, const SizeMap& sizes, const ModelOptions& opt) {
  double b = 0;
  for (const auto& a : w.vector_arrays) b += array_bytes(d, a, sizes, opt);
  for (const auto& a : w.scalar_arrays) {
    const double e = dtype_bits(storage_dtype(d, a, opt)) / 8.0;
    b += array_bytes(d, a, sizes, opt) * (d.array_axes(a)->back() == axis ? 1.0 : 32.0 / e);
  }
  return b;
}

}  // namespace

RowsCost price_rows(const RowsForm& form, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt) {
  RowsCost c;
  std::set<std::string> read;
  for (const auto* w : {&form.statistics, &form.map})
    for (const auto* list : {&w->vector_arrays, &w->scalar_arrays}) read.insert(list->begin(), list->end());
  read.insert(form.row_arrays.begin(), form.row_arrays.end());
  for (const auto& a : read) c.hbm_bytes += array_bytes(d, a, sizes, opt);
  for (const auto& p : form.parts)
    if (p.stored) c.hbm_bytes += array_bytes(d, p.statement, sizes, opt);
  c.l2_bytes = walk_bytes(form.statistics, form.axis, d, sizes, opt) + walk_bytes(form.map, form.axis, d, sizes, opt);
  const double sms = hw.sm_count;
  const double blocks_per_sm = std::min<double>(form.blocks_per_sm, static_cast<double>(form.blocks) / sms);
  const double teams_per_block = std::min<double>(form.teams_per_block(), static_cast<double>(form.rows_per_block));
  c.resident_teams = std::max(1.0, sms * blocks_per_sm * teams_per_block);
  const double team_rounds = static_cast<double>(form.rows_total) * form.walks() * static_cast<double>(form.rounds_per_walk());
  c.rounds = team_rounds / c.resident_teams;
  const double mem_util = std::min(1.0, static_cast<double>(form.blocks) / sms);
  c.t_hbm = c.hbm_bytes / hw.hbm.bandwidth_bytes_per_s / mem_util;
  c.t_l2 = c.l2_bytes / hw.l2.bandwidth_bytes_per_s / mem_util;
  const double latency = hw.hbm_loaded_latency_s > 0 ? hw.hbm_loaded_latency_s : hw.hbm_latency_s;
  c.t_latency = c.rounds * latency;
  return c;
}

RowsCost price_cols(const ColsForm& form, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt) {
  RowsCost c;
  double row_bytes = 0;  // bytes one thread loads per row: `vec` elements of each array along the axis
  for (const auto& a : form.arrays) {
    const double e = dtype_bits(storage_dtype(d, a, opt)) / 8.0;
    row_bytes += e * form.vec;
    c.hbm_bytes += array_bytes(d, a, sizes, opt);
    c.l2_bytes += array_bytes(d, a, sizes, opt) * std::max(1.0, 32.0 / (form.cols_per_block() * e));
  }
  for (const auto* list : {&form.col_arrays, &form.row_arrays})
    for (const auto& a : *list) c.hbm_bytes += array_bytes(d, a, sizes, opt);
  c.hbm_bytes += array_bytes(d, form.statement, sizes, opt);
  const double slots = static_cast<double>(hw.sm_count) * form.blocks_per_sm;
  const double waves = std::ceil(static_cast<double>(form.blocks) / slots);
  c.resident_teams = std::min(static_cast<double>(form.blocks), slots) * form.threads();
  c.rounds = waves * static_cast<double>(form.rounds());
  const double in_flight = c.resident_teams * form.unroll * row_bytes;
  // Over several waves every SM stays busy with loads: the loaded latency (the rows kernels' fit,
  // hardware/*.toml loaded_latency_s); a wave or less, the pointer chase's.
  const double latency = waves > 1 && hw.hbm_loaded_latency_s > 0 ? hw.hbm_loaded_latency_s : hw.hbm_latency_s;
  const double round = std::max(latency, in_flight / hw.hbm.bandwidth_bytes_per_s);
  const double mem_util = std::min(1.0, static_cast<double>(form.blocks) / hw.sm_count);
  c.t_hbm = c.hbm_bytes / hw.hbm.bandwidth_bytes_per_s / mem_util;
  c.t_l2 = c.l2_bytes / hw.l2.bandwidth_bytes_per_s / mem_util;
  c.t_latency = c.rounds * round;
  return c;
}

RowsCost price_transpose(const TransposeForm& form, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt) {
  RowsCost c;
  c.hbm_bytes = array_bytes(d, form.source, sizes, opt) + array_bytes(d, form.statement, sizes, opt);
  c.l2_bytes = c.hbm_bytes;
  const double e = dtype_bits(storage_dtype(d, form.source, opt)) / 8.0;
  const double slots = static_cast<double>(hw.sm_count) * form.blocks_per_sm;
  const double waves = std::ceil(static_cast<double>(form.blocks) / slots);
  c.resident_teams = std::min(static_cast<double>(form.blocks), slots) * form.threads();
  c.rounds = waves;
  const double in_flight = c.resident_teams * TransposeForm::per_thread() * e;
  const double latency = waves > 1 && hw.hbm_loaded_latency_s > 0 ? hw.hbm_loaded_latency_s : hw.hbm_latency_s;
  const double mem_util = std::min(1.0, static_cast<double>(form.blocks) / hw.sm_count);
  c.t_hbm = c.hbm_bytes / hw.hbm.bandwidth_bytes_per_s / mem_util;
  c.t_l2 = c.l2_bytes / hw.l2.bandwidth_bytes_per_s / mem_util;
  c.t_latency = c.rounds * std::max(latency, in_flight / hw.hbm.bandwidth_bytes_per_s);
  return c;
}

}  // namespace napkin
