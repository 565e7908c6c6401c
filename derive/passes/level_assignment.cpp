// Pass derive-level-assignment. Parameters: the model's levels of the priced candidate (a kernel
// not yet priced is left unchanged: the search prices the labels the other passes write, and the
// levels are the model's answer). Contract: reports the memory level of every array occurrence of a
// kernel as the model assigns it (inputs HBM -> SMEM, accumulators and intermediates in registers,
// moved to SMEM when the register file is full, outputs registers -> HBM) and the resident bytes
// per thread block against the hardware's limits. Writes those levels on the kernel's diagram:
// `@hbm` on its inputs and outputs, `@smem` (or the model's level) on every read of an input,
// each statement's level (`@reg`, or `@smem` when moved) on the statement.
#include <algorithm>

#include "derive/pass.hpp"

namespace napkin {

namespace {

/** `e` with every reference to an array in `levels` labelled with its level. */
ExprPtr label_reads(const ExprPtr& e, const std::map<std::string, MemLevel>& levels) {
  auto copy = std::make_shared<Expr>(*e);
  if (copy->kind == Expr::Kind::ref) {
    if (auto it = levels.find(copy->name); it != levels.end()) copy->level = it->second;
  }
  for (auto& a : copy->args) a = label_reads(a, levels);
  return {std::move(copy)};
}

/** The levels of kernel diagram `ir` as the model assigned them (`level`: inside the kernel). */
void write_levels(Diagram& ir, const std::map<std::string, MemLevel>& level) {
  std::map<std::string, MemLevel> reads;
  for (const auto* in : ir.inputs()) reads[in->name] = level.count(in->name) ? level.at(in->name) : MemLevel::smem;
  for (const auto* s : ir.statements()) reads[s->name] = level.count(s->name) ? level.at(s->name) : MemLevel::reg;
  for (auto& it : ir.items) {
    if (auto* in = std::get_if<InputDecl>(&it)) in->level = MemLevel::hbm;
    if (auto* o = std::get_if<OutputDecl>(&it)) o->level = MemLevel::hbm;
    if (auto* s = std::get_if<Statement>(&it)) {
      s->level = reads.at(s->name);
      s->expr = label_reads(s->expr, reads);
    }
  }
}

}  // namespace

std::vector<Step> level_assignment_pass(const PassContext& c, KernelCandidate& k, Diagram& ir) {
  if (!k.priced) return {};
  const KernelCost& kc = k.priced->cost;
  write_levels(ir, kc.level);
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
