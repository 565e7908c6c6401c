/** \file transpose_form.hpp
 *  The transpose form of a kernel: one statement `Y = X` that copies an array into another order
 *  of the same axes whose innermost axis differs from X's (a K-major copy of an 8-bit operand,
 *  derive-operand-relayout's V_k; a call argument laid out as the callee reads it). Per element
 *  (the SIMT form) one side of such a copy is strided: every load (or store) a sector of its own.
 *  Here a thread block takes a tile of T x T elements over the two innermost axes, loads it along
 *  X's innermost axis (coalesced) into SMEM, and stores it along Y's innermost axis (coalesced);
 *  the other axes are the grid's batch. Read by the model (perfmodel/rows_cost.hpp
 *  price_transpose) and rendered by emit/cuda/transpose.cpp: what one prices, the other writes.
 */
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "diagrams/ir.hpp"
#include "hardware/hardware.hpp"
#include "lower/kernel_shape.hpp"
#include "lower/options.hpp"

namespace napkin {

struct TransposeForm {
  std::string statement, source;  ///< Y and X
  std::string in_inner;           ///< X's innermost axis (Y's rows of the tile: loads run along it)
  std::string out_inner;          ///< Y's innermost axis (stores run along it)
  AxisList batch;                 ///< the other axes, Y's order (one grid slice each)
  /** Tile edge (elements): T x T per block; a lane takes T / 32 columns of a row, 32 apart, so a
   *  warp's access to one row is 32 consecutive elements (whole 32-byte sectors even for 1 byte). */
  static constexpr int T = 64;
  static constexpr int warps = 8;  ///< per block: each warp moves T / warps rows of the tile
  std::int64_t tiles_in = 0, tiles_out = 0;  ///< tiles along in_inner and out_inner
  std::int64_t blocks = 0;        ///< tiles_in x tiles_out x the batch's extents
  int blocks_per_sm = 6;          ///< resident blocks per SM: the launch bounds' minimum (42 registers a thread)
  int registers = 42;             ///< per thread at most: 64-bit indices and the T / warps elements in flight
  std::int64_t smem_bytes = 0;    ///< the tile, T x (T + 1) fp32 (padded: no bank conflicts either way)

  int threads() const { return warps * 32; }
  /** Elements of a tile each thread loads at once (then stores): T x T / threads. */
  static constexpr int per_thread() { return T * T / (warps * 32); }
};

/** The transpose form of `k` (one statement of `d`: `Y = X`, X an array with Y's axes in another
 *  order and another innermost axis) at `sizes`, or nullopt with the reason in `why`. Raises
 *  nothing. */
std::optional<TransposeForm> analyse_transpose(const Diagram& d, const KernelShape& k, const SizeMap& sizes, std::string& why);

}  // namespace napkin
