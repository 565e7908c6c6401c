// Pass derive-cluster. Parameters: the candidate's `cluster` directive, checked by the checker's
// rule (cluster_illegal: hardware clusters, 2 blocks, a grouped axis). Contract: for a kernel
// whose schedule has `cluster A by N`, once priced, reports which
// operand tiles the N thread blocks of a cluster (adjacent tiles along A) share by TMA multicast,
// and the L2 -> SMEM bytes that saves, as the model counts them (perfmodel/cost.cpp). Writes
// `cluster N` on axis A; a kernel without a cluster is left unchanged and gives no step.
#include "derive/check_schedule.hpp"
#include "derive/labelled.hpp"
#include "derive/pass.hpp"

namespace napkin {

std::vector<Step> cluster_pass(const PassContext& c, KernelCandidate& k, Diagram& ir) {
  for (const auto& dir : k.params.directives)
    if (dir.kind == Directive::Kind::cluster)
      if (k.refused = cluster_illegal(k.params, dir, c.hw); !k.refused.empty()) return {};
  write_labels(ir, k.params, Directive::Kind::cluster);
  if (!k.priced) return {};
  const KernelChoice& kc = *k.priced;
  const auto cl = kc.plan.cluster();
  if (!cl || kc.cost.cluster < 2) return {};
  std::string shared;
  for (const auto& a : kc.cost.cluster_shared) shared += (shared.empty() ? "" : ", ") + a;
  const double before = kc.cost.l2_to_smem_bytes + kc.cost.cluster_saved_bytes;
  return {{"derive-cluster", kc.plan.name, "cluster " + cl->first + " by " + std::to_string(cl->second),
           "a group partition over thread-block clusters (paper §2.3, one level up); TMA multicast (PTX ISA 9.7.9.25.5.1)",
           "the tiles of " + shared + " do not vary along " + cl->first + ": each of the " + std::to_string(cl->second) +
               " blocks loads 1/" + std::to_string(cl->second) + " of them into all; L2 -> SMEM " + human_bytes(before) + " -> " +
               human_bytes(kc.cost.l2_to_smem_bytes)}};
}

}  // namespace napkin
