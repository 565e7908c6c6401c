// napkin derive: the relabelling steps, the chosen schedule, the cost table per kernel and level,
// and the comparison with the unfused schedule and the I/O lower bound. --schedule scores a
// hand-written schedule instead of searching; --format json gives the same as JSON.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "derive/derivation.hpp"
#include "derive/labelled.hpp"
#include "derive/registry.hpp"

namespace napkin::cli {

namespace {

std::string us(double s) { return fmt::format("{:.1f} us", s * 1e6); }

void print_cost_table(const SearchResult& r, const Hardware& hw) {
  fmt::print("  {:<12} {:<22} {:>12} {:>11}   {}\n", "kernel", "level / unit", "amount", "time", "symbolic (elements) / note");
  for (const auto& k : r.kernels) {
    const KernelCost& c = k.cost;
    auto row = [&](const std::string& what, const std::string& amount, double t, const std::string& note) {
      fmt::print("  {:<12} {:<22} {:>12} {:>11}   {}\n", c.name.size() > 12 ? c.name.substr(0, 11) + "~" : c.name, what, amount,
                 us(t), note);
    };
    if (c.bound.rfind("as derived", 0) == 0) {
      row("(call)", human_bytes(c.hbm_bytes), c.t_total, c.bound);
      continue;
    }
    const bool simt = c.spec && c.spec->strategy == Strategy::simt;
    if (c.spec)
      fmt::print("  {:<12} {:<22} {:>12} {:>11}   {}\n", c.name.size() > 12 ? c.name.substr(0, 11) + "~" : c.name, "lowered to",
                 strategy_name(c.spec->strategy), "", describe_spec(*c.spec));
    if (simt) {
      row("HBM", human_bytes(c.hbm_bytes), c.t_hbm, "each array once, each statement stored (one launch per statement)");
      row("L2 -> SM loads", human_bytes(c.l2_to_smem_bytes), c.t_l2, "operands re-read by every element's loops; no SMEM tiles");
      row("FP32 + SFU", fmt::format("{:.3g} FLOP", c.flops_fp32), c.t_fp32, fmt::format("{:.3g} special-function ops; no tensor cores", c.sfu_ops));
      if (c.t_latency > 0)
        row("HBM latency", fmt::format("{:.2g} us/round", hw.hbm_latency_s * 1e6), c.t_latency, "each thread's loops wait for their loads, one iteration after another (perfmodel/simt_cost.hpp)");
      row("predicted", fmt::format("{} blocks", c.blocks), c.t_total, "bound: " + c.bound);
      continue;
    }
    row("HBM", human_bytes(c.hbm_bytes), c.t_hbm, "each input and output once, plus L2 misses");
    row("L2 -> SMEM", human_bytes(c.l2_to_smem_bytes), c.t_l2,
        c.smem_symbolic + (c.l2_offline_bytes > 0 ? "; + " + human_bytes(c.l2_offline_bytes) + " of 128-byte lines fetched for tile rows off a line boundary" : std::string()));
    row("SMEM -> registers", human_bytes(c.smem_read_bytes), c.t_smem,
        (c.warpgroup_mma ? "MMA operands read by " + std::to_string(c.warps / 4) + " warpgroup(s)" : "MMA operands read by " + std::to_string(c.warps) + " warps") +
            (c.smem_fill_bytes > 0 ? ", with TMA's " + human_bytes(c.smem_fill_bytes) + " of fills written" : std::string()));
    row("tensor cores", fmt::format("{:.3g} FLOP", c.flops_tensor), c.t_tensor,
        fmt::format("{:.0f}% of peak usable with {}", c.tensor_fraction * 100, c.warpgroup_mma ? "wgmma" : "mma.sync"));
    row("FP32", fmt::format("{:.3g} FLOP", c.flops_fp32), c.t_fp32, "");
    row("SFU (exp)", fmt::format("{:.3g} op", c.sfu_ops), c.t_sfu, "");
    if (c.t_skipped_zeros > 0 || (c.spec->flash_bwd && !c.spec->flash_bwd->skip.empty())) {
      std::string only;  // the stored tiles whose readers read some of the zeros only (lower_kernel_of)
      for (const auto& t : c.spec->flash_bwd->tiles)
        if (t.stored && !t.zero_readers.empty()) only += fmt::format("{}{} {:.0f}%", only.empty() ? "" : ", ", t.s->name, 100 * t.zero_share);
      row("skipped tiles' zeros", human_bytes(c.t_skipped_zeros * hw.hbm.bandwidth_bytes_per_s), c.t_skipped_zeros,
          "stored tiles over the causal skip's chunks, written before the stream loop, not overlapped" +
              (only.empty() ? std::string() : "; only where the banded gemms after it read them: " + only));
    }
    if (c.atomic_bytes > 0) {
      row("L2 atomic adds", human_bytes(c.atomic_bytes), c.t_atomic, "fp32 partial sums every block adds into global memory (lemma atomic-sum), overlapped");
      row("zeroing", human_bytes((c.t_zero - hw.launch_overhead_s) * hw.hbm.bandwidth_bytes_per_s), c.t_zero,
          "the atomic outputs zeroed before the launch (a memset), not overlapped");
    }
    if (c.t_smem_exposed > 0)
      row("SMEM exposed", fmt::format("{:.2f} x SMEM", hw.flash_bwd_smem_exposed), c.t_smem_exposed,
          "SMEM reads the two consumer warpgroups' MMAs do not hide (hardware flash_bwd_smem_exposed, a fit), not overlapped");
    if (c.t_chunk_latency > 0)
      row("chunk latency", fmt::format("{:.2g} us/chunk", hw.flash_chunk_latency_s * 1e6), c.t_chunk_latency,
          "each chunk's barriers, MMA waits and row reductions (hardware flash_chunk_latency_s, a fit), with the softmax");
    if (c.t_mma_sync_chain != 0)
      row("mma.sync chain", fmt::format("{:.2g} x compute", 1 + c.t_mma_sync_chain / std::max(1e-30, c.t_tensor + c.t_fp32 + c.t_sfu + c.t_chunk_latency)), c.t_mma_sync_chain,
          "a warp's chunk on mma.sync is one dependent chain of MMAs, packing, softmax and rescale (hardware flash_mma_sync_factor, and flash_mma_sync_alone where each block has an SM alone: fits), with the compute");
    if (c.t_pipeline_ends > 0)
      row("pipeline ends", "1 chunk/block", c.t_pipeline_ends,
          "each block's first chunk's MMAs and last chunk's softmax, with nothing of the other kind to overlap, with the compute");
    if (c.t_ring > 0) {
      row("TMA ring", fmt::format("{:.2g} us/stage", c.ring_latency_s * 1e6), c.t_ring,
          fmt::format("{} stages, each refilled one load round trip after its MMAs{}; the first tile's stages also land ({:.2g} us each at one SM's share of the L2 rate); overlapped",
                      c.spec->wgmma_stages, c.cluster > 1 ? " and the cluster's lockstep" : "", c.ring_landing_s * 1e6));
      row("ring fill", "", c.t_fill, "the first stage's load round trip and its bytes landing at one SM's share of the L2 rate, not overlapped");
    } else if (c.t_fill > 0 && c.spec && c.spec->rows)
      row("loads' start", fmt::format("{:.2g} us", hw.loaded_latency_s() * 1e6), c.t_fill,
          "the first round of loads lands one loaded HBM round trip after the start: added to the bandwidth terms");
    else if (c.t_fill > 0)
      row("blocks' start", fmt::format("{:.2g} us/block", hw.loaded_latency_s() * 1e6), c.t_fill,
          "each block waits a loaded HBM round trip for Q and its first K chunk, not overlapped");
    if (c.imbalance > 1)
      row("blocks' makespan", fmt::format("{:.2f} x the mean", c.imbalance), 0,
          "compute terms stretched: blocks of unequal length (causal skip) handed to the SMs in grid order");
    if (c.t_epilogue > 0)
      row("epilogue I/O", "", c.t_epilogue, "outputs written (unless by TMA) and epilogue inputs read and waited for after the main loop, not overlapped");
    if (c.t_tile_turnover > 0)
      row("tile turnover", fmt::format("{:.2g} us/tile", c.t_tile_turnover / std::max(1.0, static_cast<double>(c.blocks) / hw.sm_count) * 1e6), c.t_tile_turnover,
          "between a tile's MMAs and the next's: wgmma drain, epilogue, and each 64-column block of each m64 subtile staged for the TMA store (hardware gemm_tile_turnover_s, staged_store_block_s: fits), in series with the MMAs");
    if (c.t_last_stores > 0)
      row("last tile's stores", "", c.t_last_stores,
          "each SM's last tile stored by TMA with no next tile to overlap: its 64-column blocks in series (hardware gemm_last_store_block_s: a fit)");
    if (c.t_repack > 0)
      row("operand repack", "", c.t_repack,
          "operands whose strides TMA cannot take, copied first into rows padded to 128-byte lines: read, written, one launch each, in series");
    if (c.t_scalar_staging > 0)
      row("element-wise staging", fmt::format("{:.2g} us/round", (hw.l2_loaded_latency_s > 0 ? hw.l2_loaded_latency_s : hw.loaded_latency_s()) * 1e6),
          c.t_scalar_staging,
          "operands whose strides no 4-byte cp.async divides, copied to SMEM element by element: a loaded L2 round trip per 16 bytes a thread, per K chunk, in series");
    if (c.t_epilogue_maps > 0)
      row("epilogue maps", "", c.t_epilogue_maps, "FP32 + SFU above, run by the consumer warpgroups between a tile's MMAs and the next's, not overlapped");
    if (c.t_latency > 0 && c.spec->strategy == Strategy::cols)
      row("HBM latency", fmt::format("{} rounds", c.spec->cols->rounds()), c.t_latency,
          "dependent rounds of loads per thread, each the latency or the in-flight bytes' HBM time (perfmodel/rows_cost.hpp price_cols)");
    else if (c.t_latency > 0)
      row("HBM latency", fmt::format("{:.2g} us/round", hw.loaded_latency_s() * 1e6), c.t_latency,
          "dependent rounds of loads per resident team, every walk over each row (perfmodel/rows_cost.hpp)");
    row("predicted", fmt::format("{} blocks", c.blocks), c.t_total,
        fmt::format("bound: {}; {} warps/SM; wave efficiency {:.0f}%{}", c.bound, c.warps_per_sm, c.wave_efficiency * 100,
                    c.causal_active_fraction < 1 ? fmt::format("; causal: {:.1f}% of tiles computed", c.causal_active_fraction * 100) : ""));
  }
}

/** The spec's decisions (lower/lower.hpp) as JSON. */
nlohmann::json kernel_spec_json(const KernelSpec& s) {
  nlohmann::json j{{"strategy", strategy_name(s.strategy)}, {"description", describe_spec(s)}};
  if (s.tensor_cores()) {
    if (s.mma_sync) j["mma_sync"] = {{"ptx", s.mma_sync->ptx}, {"stages", s.stages}, {"smem_bytes", s.smem_bytes}};
    if (s.wgmma) j["wgmma"] = {{"ptx", s.wgmma_mma->ptx}, {"stages", s.wgmma_stages}, {"smem_bytes", s.wgmma_smem_bytes}, {"cluster", s.cluster}};
    else j["no_wgmma"] = s.why_no_wgmma;
  }
  if (!s.declined.empty()) j["declined"] = s.declined;
  return j;
}

nlohmann::json kernel_json(const KernelChoice& k) {
  const KernelCost& c = k.cost;
  nlohmann::json j{{"name", c.name},
                   {"statements", c.statements},
                   {"inputs", c.inputs},
                   {"outputs", c.outputs},
                   {"internal", c.internal},
                   {"blocks", c.blocks},
                   {"warps_per_block", c.warps},
                   {"warps_per_sm", c.warps_per_sm},
                   {"smem_resident_bytes", c.smem_resident_bytes},
                   {"registers_per_thread", c.registers_per_thread},
                   {"bytes", {{"hbm", c.hbm_bytes}, {"l2_to_smem", c.l2_to_smem_bytes}, {"smem_to_registers", c.smem_read_bytes}}},
                   {"smem_symbolic_elements", c.smem_symbolic},
                   {"flops", {{"tensor", c.flops_tensor}, {"fp32", c.flops_fp32}, {"sfu", c.sfu_ops}}},
                   {"seconds",
                    {{"hbm", c.t_hbm}, {"l2", c.t_l2}, {"smem", c.t_smem}, {"tensor", c.t_tensor}, {"fp32", c.t_fp32},
                     {"sfu", c.t_sfu}, {"epilogue", c.t_epilogue}, {"epilogue_maps", c.t_epilogue_maps}, {"tile_turnover", c.t_tile_turnover}, {"last_stores", c.t_last_stores}, {"scalar_staging", c.t_scalar_staging}, {"repack", c.t_repack}, {"skipped_zeros", c.t_skipped_zeros}, {"smem_exposed", c.t_smem_exposed}, {"fill", c.t_fill}, {"ring", c.t_ring}, {"chunk_latency", c.t_chunk_latency}, {"pipeline_ends", c.t_pipeline_ends}, {"mma_sync_chain", c.t_mma_sync_chain}, {"atomic", c.t_atomic}, {"zero", c.t_zero}, {"launch", c.t_launch}, {"total", c.t_total}}},
                   {"bound", c.bound},
                   {"causal_active_fraction", c.causal_active_fraction}};
  if (c.spec) j["lowered"] = kernel_spec_json(*c.spec);
  for (const auto& u : k.lemmas) j["lemmas"].push_back({{"statement", u.statement}, {"lemma", u.lemma}});
  return j;
}

nlohmann::json derivation_json(const Derivation& dv, const Diagram& d, const Hardware& hw) {
  nlohmann::json j{{"diagram", d.name}, {"hardware", hw.name}, {"schedule", print_schedule(dv.chosen.schedule)}};
  for (const auto& s : dv.steps)
    j["steps"].push_back({{"pass", s.pass}, {"kernel", s.kernel}, {"move", s.move}, {"license", s.license}, {"detail", s.detail}});
  for (const auto& k : dv.chosen.kernels) j["kernels"].push_back(kernel_json(k));
  j["predicted_seconds"] = dv.chosen.cost.t_total;
  j["unfused"] = {{"kernels", dv.unfused.kernels.size()}, {"predicted_seconds", dv.unfused.cost.t_total},
                  {"hbm_bytes", dv.unfused.cost.hbm_bytes}};
  j["lower_bound"] = {{"hbm_bytes", dv.bound.hbm_bytes}, {"smem_bytes", dv.bound.smem_bytes}, {"formula", dv.bound.formula}};
  for (const auto& [stmt, sub] : dv.callees) j["calls"][stmt] = derivation_json(*sub, d, hw);
  return j;
}

void print_derivation(const Derivation& dv, const Diagram& d, const Hardware& hw, const std::string& indent);

void print_steps(const Derivation& dv) {
  int i = 0;
  for (const auto& s : dv.steps) {
    fmt::print("  {:>2}. [{}]{} {}\n", ++i, s.pass, s.kernel.empty() ? "" : " " + s.kernel + ":", s.move);
    fmt::print("      licence: {}\n", s.license);
    fmt::print("      {}\n", s.detail);
  }
}

void print_derivation(const Derivation& dv, const Diagram& d, const Hardware& hw, const std::string& indent) {
  fmt::print("{}Relabelling steps (diagram {})\n", indent, d.name);
  print_steps(dv);
  fmt::print("\nSchedule (save it and check or edit it: napkin derive FILE --schedule S.schedule)\n");
  std::string text = print_schedule(dv.chosen.schedule);
  for (std::size_t p = 0, q; p < text.size(); p = q + 1) {
    q = text.find('\n', p);
    fmt::print("  {}\n", text.substr(p, q - p));
  }
  fmt::print("\nCost per kernel and level on {}\n", hw.name);
  print_cost_table(dv.chosen, hw);
  for (const auto& [stmt, sub] : dv.callees) {
    fmt::print("\n--- {}: call of {} ---\n", stmt, sub->chosen.schedule.diagram);
    fmt::print("  schedule: {} kernel(s), predicted {} for the call\n", sub->chosen.kernels.size(), us(sub->chosen.cost.t_total));
    for (const auto& k : sub->chosen.kernels) {
      fmt::print("    {:<14} fuses {:<18} {}\n", k.plan.name, [&] {
        std::string s;
        for (const auto& f : k.plan.fused()) s += (s.empty() ? "" : ",") + f;
        return s;
      }(), us(k.cost.t_total) + ", bound: " + k.cost.bound);
      if (k.cost.spec) fmt::print("      lowered to {}: {}\n", strategy_name(k.cost.spec->strategy), describe_spec(*k.cost.spec));
    }
  }
}

/** Returns when `name` is a pass of the registry; raises UserError listing the valid names otherwise. */
void check_pass_name(const std::string& name) {
  std::string names;
  for (const auto& p : pass_registry()) {
    if (name == p.name) return;
    names += (names.empty() ? "" : ", ") + std::string(p.name);
  }
  throw UserError("--dump-after: unknown pass '" + name + "'; the passes are " + names);
}

/** `napkin derive --dump-after PASS`: the labelled diagrams after PASS (one per kernel after
 *  derive-fusion), as the printer writes them (they parse back to the same labels), each axis
 *  given by `--set` (`overrides`) written as that literal size: the sizes its labels were chosen for. */
void dump_after(const Derivation& dv, const Diagram& d, const std::string& pass, const SizeMap& overrides) {
  for (const auto& [name, diagrams] : dv.after) {
    if (name != pass) continue;
    std::vector<Diagram> sized = diagrams;
    for (auto& k : sized)
      for (auto& item : k.items)
        if (auto* a = std::get_if<AxisDecl>(&item); a && overrides.count(a->name)) a->size = {SizeFactor{"", overrides.at(a->name), a->loc}};
    fmt::print("# {} after {}: {} labelled diagram(s) (derive/labelled.hpp)\n{}", d.name, pass, sized.size(), print_labelled(sized));
  }
}

}  // namespace

Runner setup_derive(CLI::App& sub) {
  auto args = std::make_shared<DiagramArgs>();
  auto hw = std::make_shared<std::string>("h100");
  auto format = std::make_shared<std::string>("text");
  auto schedule = std::make_shared<std::string>();
  auto dtype = std::make_shared<std::string>();
  auto dump = std::make_shared<std::string>();
  args->add_to(sub);
  sub.add_option("--hw", *hw, "Hardware name (a100, h100, h200, b200, rtx4090) or a .toml file")->capture_default_str();
  sub.add_option("--format", *format, "text or json")->check(CLI::IsMember({"text", "json"}));
  sub.add_option("--schedule", *schedule, "Check and score this schedule file instead of searching");
  sub.add_option("--dtype", *dtype, "Store every array in this dtype (quantization)");
  sub.add_option("--dump-after", *dump, "Print the labelled diagram after this pass (napkin passes lists them) and nothing else");
  return [=] {
    if (!dump->empty()) check_pass_name(*dump);
    auto l = load_checked(*args);
    if (!l) return 1;
    Hardware h = load_hardware(*hw);
    ModelOptions opt;
    if (!dtype->empty()) {
      opt.dtype = parse_dtype(*dtype);
      if (!opt.dtype) throw UserError("unknown dtype '" + *dtype + "'; expected one of " + dtype_list());
    }
    const Diagram& d = *l->diagram;
    if (!schedule->empty()) {
      auto checked = load_schedule(*schedule, *l, h, opt);
      if (!checked) return 1;
      if (!dump->empty()) {
        dump_after(derive_given(*l->program, d, l->sizes, h, *checked, opt), d, *dump, parse_sets(args->sets));
        return 0;
      }
      if (*format == "json") {
        fmt::print("{}\n", derivation_json(derive_given(*l->program, d, l->sizes, h, *checked, opt), d, h).dump(2));
        return 0;
      }
      // Priced as derive prices its own schedule (derive_given: each call kernel at its callee's
      // derivation), as --format json and napkin bench do; check_schedule's own prices leave a call
      // kernel at its unlifted SIMT price (transformer_block: 32.1 ms against 5.9 ms).
      const Derivation dv = derive_given(*l->program, d, l->sizes, h, *checked, opt);
      fmt::print("schedule '{}' for diagram '{}' is legal on {}\n\n", dv.chosen.schedule.name, d.name, h.name);
      print_cost_table(dv.chosen, h);
      fmt::print("\n  predicted total: {}\n", us(dv.chosen.cost.t_total));
      return 0;
    }
    Derivation dv = derive(*l->program, d, l->sizes, h, opt);
    if (!dump->empty()) {
      dump_after(dv, d, *dump, parse_sets(args->sets));
      return 0;
    }
    if (*format == "json") {
      fmt::print("{}\n", derivation_json(dv, d, h).dump(2));
      return 0;
    }
    std::string sizes;
    for (const auto& [a, s] : l->sizes) sizes += (sizes.empty() ? "" : " ") + a + "=" + std::to_string(s);
    fmt::print("napkin derive: diagram '{}' on {} ({}), {}\n\n", d.name, h.name,
               opt.dtype ? std::string(dtype_name(*opt.dtype)) : "dtypes as declared", sizes);
    print_derivation(dv, d, h, "");
    fmt::print("\nComparison\n");
    fmt::print("  derived:  {} kernel(s), HBM {}, predicted {}\n", dv.chosen.kernels.size(), human_bytes(dv.chosen.cost.hbm_bytes),
               us(dv.chosen.cost.t_total));
    fmt::print("  unfused:  {} kernel(s), HBM {}, predicted {}{}\n", dv.unfused.kernels.size(), human_bytes(dv.unfused.cost.hbm_bytes),
               us(dv.unfused.cost.t_total),
               dv.chosen.cost.t_total > 0 ? fmt::format("  (derived is {:.2f}x faster)", dv.unfused.cost.t_total / dv.chosen.cost.t_total)
                                          : std::string("  (nothing to compute)"));
    fmt::print("  I/O lower bound: HBM {} (compulsory), into SMEM {} ({}); derived moves {} into SMEM\n",
               human_bytes(dv.bound.hbm_bytes), human_bytes(dv.bound.smem_bytes), dv.bound.formula,
               human_bytes(dv.chosen.cost.l2_to_smem_bytes));
    fmt::print("  search: {} candidate kernel partitions scored\n", dv.chosen.candidates_scored + dv.unfused.candidates_scored);
    return 0;
  };
}

Runner setup_passes(CLI::App& sub) {
  auto markdown = std::make_shared<bool>(false);
  sub.add_flag("--markdown", *markdown, "Print as a Markdown table");
  return [markdown] {
    if (*markdown) fmt::print("| pass | what it does | licence |\n|---|---|---|\n");
    for (const auto& p : pass_registry()) {
      if (*markdown) fmt::print("| `{}` | {} | {} |\n", p.name, p.summary, p.license);
      else fmt::print("{:<26} {}\n{:<26} licence: {}\n", p.name, p.summary, "", p.license);
    }
    if (!*markdown) {
      fmt::print("\nlemmas:\n");
      for (const auto& l : lemma_library()) fmt::print("  {:<24} {} [{}]\n", l.id, l.statement, l.source);
    }
    return 0;
  };
}

}  // namespace napkin::cli
