// The columns form and its launch shape (contract in cols_form.hpp).
#include "lower/cols_form.hpp"

#include <algorithm>
#include <set>

#include "diagrams/graph_view.hpp"
#include "lower/rows_form.hpp"

namespace napkin {

std::optional<ColsForm> analyse_cols(const Diagram& d, const KernelShape& k, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt,
                                     std::string& why) {
  if (k.statements.size() != 1) return why = "more than one statement", std::nullopt;
  const Statement& st = *d.find_statement(k.statements[0]);
  const Expr* core = rows_core(d, st);
  const bool reduction = core && core->kind == Expr::Kind::apply && (core->op == Op::sum || core->op == Op::max || core->op == Op::mean);
  if (!reduction || core->axes.empty() || st.axes.empty()) return why = "not a reduction into a statement with axes", std::nullopt;
  if (!elementwise_tree(*core->args[0])) return why = "the reduction's argument is not element-wise", std::nullopt;
  ColsForm f;
  f.statement = st.name;
  f.axes = core->axes;
  f.cols = st.axes;
  f.extent = 1;
  for (const auto& a : f.axes) f.extent *= sizes.at(a);
  std::string along_name;  // "b, s": the reduced axes, for the reasons below
  for (const auto& a : f.axes) along_name += (along_name.empty() ? "" : ", ") + a;
  f.cols_total = 1;
  for (const auto& a : st.axes) f.cols_total *= sizes.at(a);
  f.post = core != &*st.expr;
  const std::string& inner = st.axes.back();
  std::set<std::string> along, per_col;
  int narrowest = 4;  // bytes
  walk(*st.expr, [&](const Expr& n) {
    if (n.kind != Expr::Kind::ref || !d.array_axes(n.name)) return;
    const AxisList& ax = *d.array_axes(n.name);
    const bool reduced = std::any_of(ax.begin(), ax.end(), [&](const std::string& x) { return std::find(f.axes.begin(), f.axes.end(), x) != f.axes.end(); });
    (reduced ? along : per_col).insert(n.name);
  });
  if (along.empty()) return why = "no array is read along " + along_name, std::nullopt;
  std::set<std::string> broadcast;  // along the axis but not the columns' innermost axis: one address per warp row
  for (const auto& a : along) {
    const AxisList& ax = *d.array_axes(a);
    if (std::find(ax.begin(), ax.end(), inner) == ax.end()) {
      broadcast.insert(a);
      continue;
    }
    if (ax.back() != inner)
      return why = "'" + a + "' does not keep " + inner + " (the columns) innermost: its loads along " + along_name + " would not be coalesced", std::nullopt;
    narrowest = std::min(narrowest, dtype_bits(storage_dtype(d, a, opt)) / 8);
  }
  for (const auto& a : broadcast) along.erase(a), f.row_arrays.push_back(a);
  if (along.empty()) return why = "no array along " + along_name + " carries the columns' innermost axis " + inner, std::nullopt;
  f.arrays.assign(along.begin(), along.end());
  f.col_arrays.assign(per_col.begin(), per_col.end());
  f.warps = k.plan.warps();
  // The vector path: 16 bytes of the widest array per access, its columns within one row of the
  // innermost axis (lower/cols_form.hpp `vec`).
  int widest = 1;
  bool vectorisable = true;
  for (const auto& a : f.arrays) {
    const int bytes = dtype_bits(storage_dtype(d, a, opt)) / 8;
    widest = std::max(widest, bytes);
    vectorisable = vectorisable && (bytes == 2 || bytes == 4);
  }
  if (vectorisable && sizes.at(inner) % (16 / widest) == 0) f.vec = 16 / widest;
  int words = 0;  // registers one row's loads take, every array
  for (const auto& a : f.arrays) words += std::max(1, f.vec * dtype_bits(storage_dtype(d, a, opt)) / 8 / 4);
  const int min_lanes = std::max(1, std::max(8, 32 / std::max(1, narrowest)) / f.vec);  // a 32-byte sector per warp row
  const std::int64_t group = k.plan.group(inner).value_or(0);
  auto blocks_at = [&](std::int64_t lanes) { return (f.cols_total + lanes * f.vec - 1) / (lanes * f.vec); };
  if (f.vec == 1 && (group == 8 || group == 16 || group == 32)) {
    f.col_lanes = static_cast<int>(group);
  } else {
    f.col_lanes = 32;
    while (f.col_lanes > min_lanes && blocks_at(f.col_lanes) < 2 * std::int64_t{hw.sm_count}) f.col_lanes /= 2;
  }
  if (f.threads() % f.col_lanes != 0) return why = "the block's threads are not a multiple of its columns", std::nullopt;
  // ptxas on sm_90a: one fp32 array at U = 16 spilled at 56 registers (col_max), two bf16 arrays used 96.
  const int arrays = static_cast<int>(f.arrays.size());
  f.unroll = arrays <= 2 ? 16 : 8;
  while (f.vec > 1 && f.unroll > 1 && f.unroll * words > 64) f.unroll /= 2;
  // A short reduction (a few rows: a split reduction's partials, sum(Y_r; r)) leaves most of a
  // block's row threads without a row: the block widens to more columns (down to one thread per
  // column) while its threads still cover the rows in one round and two blocks per SM remain.
  while (f.col_lanes < f.threads() && std::int64_t{f.row_lanes() / 2} * f.unroll >= f.extent && blocks_at(2 * f.col_lanes) >= 2 * std::int64_t{hw.sm_count})
    f.col_lanes *= 2;
  // and loads no more rows in flight than a thread has
  while (f.unroll > 1 && std::int64_t{f.row_lanes()} * (f.unroll / 2) >= f.extent) f.unroll /= 2;
  f.blocks = blocks_at(f.col_lanes);
  f.registers = f.vec == 1 ? 32 + 4 * f.unroll * arrays : 32 + 2 * f.vec + f.unroll * words;
  f.smem_bytes = f.row_lanes() > 1 ? std::int64_t{f.threads()} * f.vec * 4 : 0;  // one thread per column: no meeting
  f.blocks_per_sm = resident_blocks_per_sm(hw, f.warps, f.registers, f.smem_bytes);
  return f;
}

}  // namespace napkin
