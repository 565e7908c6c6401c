/** \file cols_form.hpp
 *  The columns form of a kernel and the launch shape lowering gives it: one statement
 *  `Y = red(arg; a)` (sum, max or mean over an axis `a`, or over several, walked as one flattened
 *  row index), or an element-wise map of one such
 *  reduction (lower/rows_form.hpp rows_core), whose arguments' arrays carrying `a` and Y's innermost
 *  axis keep that axis innermost (those without it are read once per warp row, a broadcast): a reduction down the columns (the weight gradient of a norm,
 *  dW[m] = sum(dY * X * rstd; t)). Each index of Y is a column; a thread block takes `col_lanes`
 *  consecutive columns, its threads split `a` (`row_lanes` threads per column, each summing every
 *  row_lanes-th row with `unroll` loads in flight), so a warp's loads of one row are coalesced
 *  and every thread walks `a` / row_lanes rows instead of all of them; the block's partials meet
 *  in SMEM, halving in a tree every thread adds to, and the first row of threads stores, in a fixed
 *  order (deterministic).
 *  A column's whole reduction is in one block: no workspace, no atomics; with few columns the
 *  blocks are few, which the model prices (perfmodel/cost.cpp cols(): rounds of loads per thread).
 *  Read by the model and rendered by emit/cuda/cols.cpp: what one prices, the other writes.
 */
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "diagrams/ir.hpp"
#include "hardware/hardware.hpp"
#include "lower/kernel_shape.hpp"
#include "lower/options.hpp"

namespace napkin {

struct ColsForm {
  std::string statement;             ///< the statement
  /** The reduced axes (the reduction's order): one, or several walked as one flattened row
   *  index (a norm's weight gradient over batch and tokens, dW[m] = sum(...; b, s)). */
  AxisList axes;
  AxisList cols;                     ///< the statement's axes (each index a column), the innermost last
  std::int64_t extent = 0;           ///< rows: the product of the reduced axes' sizes
  std::int64_t cols_total = 0;       ///< product of the column axes' sizes
  bool post = false;                 ///< the stored value is an element-wise map of the reduction
  std::vector<std::string> arrays;   ///< arrays read along `axis` (each keeps the columns' innermost axis innermost)
  std::vector<std::string> col_arrays;  ///< arrays read once per column (they lack `axis`)
  std::vector<std::string> row_arrays;  ///< arrays along `axis` without the columns' innermost axis: one address per warp row (rstd[t])
  int warps = 8;                     ///< per thread block (the schedule's)
  /** Consecutive columns of a block, one lane each: the schedule's group of the innermost column
   *  axis where it is 8, 16 or 32; else the most of 32, 16, 8 that still gives two blocks per SM,
   *  at least one 32-byte sector of the narrowest array per warp row. A short reduction widens it
   *  (up to one thread per column) while the threads still cover `extent` rows in one round and
   *  two blocks per SM remain. */
  int col_lanes = 32;
  /** Consecutive columns each lane takes (the vector path): 16 bytes of the widest array read
   *  along the axis (8 columns where they are all 16-bit, 4 where one is fp32), where the columns'
   *  innermost extent is a multiple of it and every such array is 16- or 32-bit; else 1. A lane
   *  then loads `vec` columns of a row per access (8 or 16 bytes for each array; the kernel checks
   *  the pointers' alignment and the innermost extent at run time, else takes its columns one at a
   *  time). Fewer blocks, each with more bytes in flight per load: the split reductions' partial
   *  sums moved 42 MB at about 1.5 TB/s one column per lane (docs/benchmarks.md, session 23). */
  int vec = 1;
  /** Loads in flight per thread per array: 16 for one or two arrays, else 8, halved while a
   *  thread's rows (extent / row_lanes) fit in half as many; on the vector path halved while
   *  they take more than 64 registers. */
  int unroll = 16;
  std::int64_t blocks = 0;           ///< ceil(cols_total / (col_lanes x vec))
  int blocks_per_sm = 1;             ///< resident blocks per SM: the launch bounds' minimum
  /** Per thread: 32 for indices, 2 x vec for the partials, and the loads in flight (4 bytes a register). */
  int registers = 40;
  std::int64_t smem_bytes = 0;       ///< the partials: threads x vec x 4 bytes, none where row_lanes() is 1

  int threads() const { return warps * 32; }
  int cols_per_block() const { return col_lanes * vec; }
  int row_lanes() const { return threads() / col_lanes; }
  /** Dependent rounds of loads one thread waits for: its rows, `unroll` at a time. */
  std::int64_t rounds() const { return (extent + std::int64_t{row_lanes()} * unroll - 1) / (std::int64_t{row_lanes()} * unroll); }
};

/** The columns form of `k` (one statement of `d`: a sum, max or mean over one or more axes, alone
 *  or in an element-wise map, every array read along them with the statement's innermost axis
 *  innermost) at `sizes` on `hw`, or nullopt with the reason in `why`. Raises nothing. */
std::optional<ColsForm> analyse_cols(const Diagram& d, const KernelShape& k, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt,
                                     std::string& why);

}  // namespace napkin
