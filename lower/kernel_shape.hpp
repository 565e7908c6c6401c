/** \file kernel_shape.hpp
 *  The shape of one kernel of a schedule, before any strategy: which statements it runs (in
 *  dataflow order), which arrays it reads from and writes to global memory and which stay inside,
 *  how each axis it touches is partitioned (whole, grouped, streamed), the grid, and the causal
 *  tiles it may skip. Lowering (lower.hpp) reads a kernel's strategy from it; the performance
 *  model prices it; the emitters render it.
 */
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "diagrams/schedule.hpp"
#include "diagrams/sizes.hpp"
#include "diagrams/weave.hpp"

namespace napkin {

/** How one axis is partitioned in a kernel. */
struct AxisPlan {
  enum class Kind { whole, group, stream } kind = Kind::whole;
  std::int64_t extent = 1;  ///< N_a, elements
  std::int64_t tile = 1;    ///< g_a, s_a, or N_a when whole
  std::int64_t count = 1;   ///< groups ceil(N/g), or stream steps ceil(N/s); 1 when whole
};

struct KernelShape {
  KernelPlan plan;                              ///< the schedule's kernel (directives)
  std::vector<std::string> statements;          ///< the fused statements, dataflow order
  std::vector<std::string> inputs;              ///< arrays read from global memory, first use order
  std::vector<std::string> outputs;             ///< statements stored (diagram outputs, or read by other kernels)
  std::vector<std::string> internal;            ///< statements that never leave the kernel
  /** Outputs that reduce a grouped axis (lemma atomic-sum, derive/lemmas.hpp): fp32 arrays each
   *  block adds its partial sums into by atomic adds, zeroed before the launch. Only the
   *  flash_bwd form renders them (lower/flash_bwd_form.hpp); the model refuses any other. */
  std::vector<std::string> atomic;
  std::map<std::string, AxisPlan> axes;         ///< every axis a statement touches
  std::vector<std::string> axis_order;          ///< those axes in declaration order
  std::int64_t blocks = 1;                      ///< thread blocks: product of the group counts
  int warps = 4;                                ///< warps per thread block (the schedule's)
  std::string warp_axis;                        ///< first grouped axis with a tile over 1 (the warps split it), or empty
  /** Causal tile skipping (paper §4's masked FlashAttention): the axes (q, x) of a causal mask
   *  whose tiles past the diagonal change nothing written (`skip_is_sound` in kernel_shape.cpp),
   *  and the share of (q tile, x chunk) pairs not skipped. Empty axes and 1: no skipping. */
  std::string causal_q, causal_x;
  double causal_active_fraction = 1;
  /** The offsets index(causal_x) - index(causal_q) whose elements are kept (computed): lo <= d <=
   *  hi, an absent bound none; causal(q, x): hi = 0. A gemm's zero band (GemmForm::k_band) and a
   *  flash_bwd kernel's skip set their own. */
  std::optional<std::int64_t> causal_lo, causal_hi = 0;
  bool has_call = false;                        ///< a statement calls another diagram

  bool grouped(const std::string& axis) const;
};

/** The shape of kernel `plan` of a checked schedule of `d` at `sizes` (every axis of `d` sized);
 *  `weave` is weave_analysis(p, d). Raises nothing on a checked schedule. */
KernelShape shape_kernel(const Diagram& d, const std::vector<StatementWeave>& weave, const KernelPlan& plan, const SizeMap& sizes);

/** The weave entries of `shape`'s statements, in its order (pointers into `weave`). */
std::vector<const StatementWeave*> shape_weaves(const KernelShape& shape, const std::vector<StatementWeave>& weave);

}  // namespace napkin
