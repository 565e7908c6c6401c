#include "derive/registry.hpp"

#include "derive/passes/atomic_accumulation.hpp"
#include "derive/passes/bind_reduction.hpp"
#include "derive/passes/contraction_order.hpp"
#include "derive/passes/operand_relayout.hpp"
#include "derive/passes/split_reduction.hpp"

namespace napkin {

const std::vector<PassInfo>& pass_registry() {
  static const std::vector<PassInfo> table{
      {"derive-contraction-order", "split contractions of 3+ operands into pairwise ones, in the order the model prices cheapest (before the search)", "einsum associativity: a sum over an axis moves inside the product of the operands that carry it", contraction_order_pass, false},
      {"derive-split-reduction", "split one reduced axis of a contraction off into fp32 partials and a sum over them, where the extra blocks pay (before the search)",
       "lemma associative-sum: a sum over two axes is a sum over one of sums over the other; a factor constant along the axis leaves the sum", split_reduction_pass, false},
      {"derive-atomic-accumulation", "give a contraction an fp32 accumulator that blocks grouping its reduced axis add into by atomic adds, where fusing it pays (before the search)",
       "lemma atomic-sum: the blocks' partial sums, added in any order, are the sum (paper §3.1; PTX ISA 9.7.13.6)", atomic_accumulation_pass, false},
      {"derive-operand-relayout", "give an 8-bit operand stored MN-major a K-major copy where the tensor-core atom reads K-major only and the copy pays (before the search)",
       "a relayout is exact; the [[mma]] table's mn_major (PTX ISA 9.7.15.5.1, 9.7.14.5.15)", operand_relayout_pass, false},
      {"derive-bind-reduction", "bind a reduction read inside a map over its own axis (a normaliser written out) to a statistic of its own, where it pays (before the search)",
       "a reduction's value is the same wherever it is read: naming it is exact (let-binding)", bind_reduction_pass, false},
      {"derive-weave-analysis", "which axes each operation is woven over, reduces or normalises",
       "NCD weaving (paper §2.1)", weave_analysis_pass, false},
      {"derive-fusion", "fuse statements into one kernel so intermediates never leave the SM",
       "Fusion Theorem (paper App. A.1)", fusion_pass, true},
      {"derive-group-partition", "tile woven axes over thread blocks (weave = group size 1)",
       "group partition (paper §2.3)", group_partition_pass, true},
      {"derive-stream-partition", "loop over a reduced or normalised axis in chunks with an accumulator",
       "lemma library (paper §3): associative-sum, max-monoid, online-softmax, normalised-contraction, welford",
       stream_partition_pass, true},
      {"derive-level-assignment", "assign every array occurrence to HBM, SMEM or registers; check the fit",
       "transfer cost and memory usage (paper §2.2)", level_assignment_pass, true},
      {"derive-divisibility", "tile sizes as multiples of the LCM of coalescing and MMA shapes",
       "paper §5.2; PTX ISA 9.7.14 (mma.sync shapes)", divisibility_pass, true},
      {"derive-warp-recursion", "split the thread block's tile over warps, one level down",
       "group partition at the next level (paper §2.3, recursion)", warp_recursion_pass, true},
      {"derive-cluster", "let adjacent thread blocks share the operand tiles that do not vary along the cluster's axis",
       "group partition over thread-block clusters (paper §2.3); TMA multicast (PTX ISA 9.7.9.25.5.1)", cluster_pass, true},
  };
  return table;
}

}  // namespace napkin
