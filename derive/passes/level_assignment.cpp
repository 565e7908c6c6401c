// Pass derive-level-assignment. Contract: reports the memory level of every array occurrence of a
// kernel as the model assigns it (inputs HBM -> SMEM, accumulators and intermediates in registers,
// moved to SMEM when the register file is full, outputs registers -> HBM) and the resident bytes
// per thread block against the hardware's limits. Changes nothing.
#include <algorithm>

#include "derive/pass.hpp"

namespace napkin {

std::vector<Step> level_assignment_pass(const PassContext& c, std::size_t k) {
  const KernelCost& kc = c.chosen.kernels.at(k).cost;
  std::string levels;
  auto add = [&](const std::string& a, const std::string& path) { levels += (levels.empty() ? "" : "; ") + a + " " + path; };
  for (const auto& a : kc.inputs) add(a, "hbm -> smem");
  for (const auto& a : kc.internal) add(a, std::string(level_name(kc.level.at(a))));
  for (const auto& a : kc.outputs) add(a, "reg -> hbm");
  std::string detail = "resident per thread block: " + human_bytes(kc.smem_resident_bytes) + " SMEM (limit " +
                       human_bytes(c.hw.smem_max_per_block_bytes) + "), " + std::to_string(kc.registers_per_thread) +
                       " registers per thread (limit " + std::to_string(c.hw.max_registers_per_thread) + "); " +
                       std::to_string(kc.blocks_per_sm) + " blocks = " + std::to_string(kc.warps_per_sm) + " warps per SM";
  return {{"derive-level-assignment", kc.name, levels, "transfer cost and memory usage (paper §2.2)", detail}};
}

}  // namespace napkin
