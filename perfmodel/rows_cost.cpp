// The rows kernel's memory side (contract in rows_cost.hpp).
#include "perfmodel/rows_cost.hpp"

#include <algorithm>
#include <set>

namespace napkin {

namespace {

double array_bytes(const Diagram& d, const std::string& array, const SizeMap& sizes, const ModelOptions& opt) {
  double n = dtype_bits(storage_dtype(d, array, opt)) / 8.0;
  for (const auto& a : *d.array_axes(array)) n *= static_cast<double>(sizes.at(a));
  return n;
}

double walk_bytes(const RowsWalk& w, const Diagram& d, const SizeMap& sizes, const ModelOptions& opt) {
  double b = 0;
  for (const auto* list : {&w.vector_arrays, &w.scalar_arrays})
    for (const auto& a : *list) b += array_bytes(d, a, sizes, opt);
  return b;
}

}  // namespace

RowsCost price_rows(const RowsForm& form, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt) {
  RowsCost c;
  std::set<std::string> read;
  for (const auto* w : {&form.statistics, &form.map})
    for (const auto* list : {&w->vector_arrays, &w->scalar_arrays}) read.insert(list->begin(), list->end());
  for (const auto& a : read) c.hbm_bytes += array_bytes(d, a, sizes, opt);
  c.hbm_bytes += array_bytes(d, form.statement, sizes, opt);
  c.l2_bytes = walk_bytes(form.statistics, d, sizes, opt) + walk_bytes(form.map, d, sizes, opt);
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

}  // namespace napkin
