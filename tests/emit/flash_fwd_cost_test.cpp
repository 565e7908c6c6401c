// The flash forward's price on wgmma (perfmodel/cost.cpp flash_fwd_compute): two consumer
// warpgroups hide Hardware::flash_softmax_hidden of the shorter of tensor and softmax time when the
// two are equal (more as they part) and pay one chunk of both a block (the pipeline's ends), a lone
// one hides none; each chunk in series adds Hardware::flash_chunk_latency_s on the softmax's side,
// so halving the chunk doubles it; each block's start costs a loaded HBM round trip. Unfitted
// (both constants 0) the terms add up as before. O's rescale is lazy on wgmma (priced once per
// row), exact on mma.sync (every chunk). The producer issues K a chunk ahead of V.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "derive/check_schedule.hpp"
#include "derive/derivation.hpp"
#include "emit/cuda_emitter.hpp"
#include "diagrams/schedule.hpp"
#include "tests/support/run.hpp"

using namespace napkin;
using namespace napkin::test;

namespace {

/** `diagram` (a library file's name) at B2 H16 N4096 d64 under `schedule_text` on `hw`: its one kernel's cost. */
KernelCost price(const std::string& schedule_text, const Hardware& hw, const std::string& diagram = "causal_attention", const SizeMap& extra = {}) {
  LoadedDiagram l = load_library(std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/" + diagram + ".napkin");
  SizeMap sizes = l.sizes;
  for (const auto& [k, v] : SizeMap{{"b", 2}, {"h", 16}, {"q", 4096}, {"x", 4096}, {"d", 64}}) sizes[k] = v;
  for (const auto& [k, v] : extra) sizes[k] = v;
  DiagnosticEngine diags;
  SourceManager sm;
  auto s = parse_schedule(*sm.add("t.schedule", schedule_text), diags);
  REQUIRE(s);
  auto checked = check_schedule(*l.program, *l.diagram, *s, sizes, hw, {}, diags);
  INFO(diags.render());
  REQUIRE(checked);
  REQUIRE(checked->cost.kernels.size() == 1);
  return checked->cost.kernels[0];
}

std::string schedule(int q_tile, int x_chunk, int warps, const std::string& diagram = "causal_attention") {
  return "schedule derived for " + diagram + "\nkernel S_to_O\n  fuse S, P, O\n  weave b\n  weave h\n  group q by " + std::to_string(q_tile) +
         "\n  stream x by " + std::to_string(x_chunk) + "\n  warps " + std::to_string(warps) + "\n";
}

}  // namespace

TEST_CASE("flash forward on wgmma: consumers hide the fitted share, chunks carry the fitted latency, blocks wait a round trip", "[emit]") {
  const Hardware hw = load_hardware("h200");
  REQUIRE(hw.flash_softmax_hidden > 0);
  REQUIRE(hw.flash_chunk_latency_s > 0);
  const KernelCost two = price(schedule(128, 128, 8), hw);
  REQUIRE(two.warpgroup_mma);
  REQUIRE(two.warps / 4 == 2);
  // the blocks in series on the busiest slot: whole waves (2048 blocks on 132 SMs: 16, not 15.5),
  // or the causal tiles' makespan in grid order where longer
  const double slots = static_cast<double>(hw.sm_count) * std::max(1, two.blocks_per_sm);
  const double per_slot = static_cast<double>(two.blocks) / slots;
  CHECK(two.t_fill == Approx(std::max(std::ceil(per_slot), per_slot * two.imbalance) * hw.hbm_loaded_latency_s));
  CHECK(two.t_chunk_latency > 0);
  const double softmax = two.t_fp32 + two.t_sfu + two.t_chunk_latency;
  // the exposed share of the shorter: (1 - h) at balance, shrinking with shorter / longer
  const double lo = std::min(two.t_tensor, softmax), hi = std::max(two.t_tensor, softmax);
  // each block's first MMAs and last softmax: one chunk of both, of 4096 / 128 = 32 chunks a
  // block, the share the causal skip leaves
  REQUIRE(two.causal_active_fraction < 1);
  CHECK(two.t_pipeline_ends == Approx((two.t_tensor + softmax) / (32 * two.causal_active_fraction)));
  const double compute = hi + (1 - hw.flash_softmax_hidden) * lo * lo / hi + two.t_pipeline_ends;
  CHECK(compute < hi + (1 - hw.flash_softmax_hidden) * lo + two.t_pipeline_ends);  // less exposed than at balance
  CHECK(two.t_total >= compute + two.t_fill);
  CHECK(two.t_total == Approx(compute + two.t_fill + two.t_launch).epsilon(1e-6));  // compute-bound at this shape
  CHECK(two.bound.find("2 consumer warpgroup(s)") != std::string::npos);

  // one wave of 64 blocks on 132 SMs: each block's 8 chunks and its start still in series (not 64/132 of them)
  const KernelCost wave = price(schedule(64, 128, 4, "attention"), hw, "attention", {{"b", 1}, {"h", 4}, {"q", 1000}, {"x", 1008}, {"d", 128}});
  REQUIRE(wave.blocks == 64);
  CHECK(wave.t_chunk_latency == Approx(8 * hw.flash_chunk_latency_s));
  CHECK(wave.t_fill == Approx(hw.hbm_loaded_latency_s));

  // half the chunk: twice the chunks in series, twice their latency; the same block count
  const KernelCost halves = price(schedule(128, 64, 8), hw);
  CHECK(halves.blocks == two.blocks);
  CHECK(halves.t_chunk_latency == Approx(2 * two.t_chunk_latency).epsilon(0.02));
  CHECK(halves.t_total > two.t_total);

  // a lone consumer hides nothing: its compute is tensor + softmax
  const KernelCost lone = price(schedule(64, 64, 4), hw);
  REQUIRE(lone.warpgroup_mma);
  REQUIRE(lone.warps / 4 == 1);
  const double lone_sum = lone.t_tensor + lone.t_fp32 + lone.t_sfu + lone.t_chunk_latency;
  CHECK(lone.t_total >= lone_sum + lone.t_fill);
  CHECK(lone.t_pipeline_ends == 0);  // in series already: no ends term
  CHECK(lone.bound.find("0% of the shorter") != std::string::npos);

  // unfitted: no chunk latency, nothing hidden: the summed terms, plus the blocks' start
  Hardware unfitted = hw;
  unfitted.flash_softmax_hidden = 0;
  unfitted.flash_chunk_latency_s = 0;
  const KernelCost plain = price(schedule(128, 128, 8), unfitted);
  CHECK(plain.t_chunk_latency == 0);
  CHECK(plain.t_total == Approx(plain.t_tensor + plain.t_fp32 + plain.t_sfu + plain.t_fill + plain.t_launch).epsilon(1e-6));
  CHECK(two.t_total < plain.t_total + two.t_chunk_latency);
}

TEST_CASE("flash forward on wgmma: O's rescale is lazy, priced once per row whatever the chunk, and every chunk on mma.sync", "[emit]") {
  // attention (no causal skip): every other FP32 term is per score element, the same at any chunk
  const std::string a = "attention";
  const KernelCost h128 = price(schedule(128, 128, 8, a), load_hardware("h200"), a), h64 = price(schedule(128, 64, 8, a), load_hardware("h200"), a);
  REQUIRE(h128.warpgroup_mma);
  CHECK(h64.flops_fp32 == Approx(h128.flops_fp32).epsilon(1e-12));
  // O's elements: 2 x 16 x 4096 x 64; on the A100 (mma.sync, the max exact) halving the chunk adds one rescale of O per extra chunk
  const double o = 2.0 * 16 * 4096 * 64;
  const KernelCost a128 = price(schedule(128, 128, 8, a), load_hardware("a100"), a), a64 = price(schedule(128, 64, 8, a), load_hardware("a100"), a);
  REQUIRE_FALSE(a128.warpgroup_mma);
  CHECK(a64.flops_fp32 - a128.flops_fp32 == Approx(o * (4096 / 64 - 4096 / 128)).epsilon(1e-9));
  // what the wgmma kernel writes: the reference max moves past 2^8 only, O's rescale under a warp vote
  LoadedDiagram l = load_library(std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/attention.napkin");
  const Hardware hw = load_hardware("h200");
  Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
  const std::string cu = emit_cuda(*l.program, *l.diagram, dv, hw);
  CHECK(cu.find("const bool moves = (mx[h] - m_reg[h]) * score_log2 > 8.0f;") != std::string::npos);
  CHECK(cu.find("if (__any_sync(0xffffffffu, corr[0] != 1.0f || corr[1] != 1.0f)) {") != std::string::npos);
}

TEST_CASE("flash forward on wgmma: the producer loads K_kc before it waits for V_{kc-1}'s stage", "[emit]") {
  // K's stage is released after S = Q K^T, V's only after O += P V: K_kc issued first is not held behind V's release
  // (H200, B4 H16 N4096 d128 bf16: 905.0 -> 859.7 us, session 39)
  LoadedDiagram l = load_library(std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/attention.napkin");
  const Hardware hw = load_hardware("h200");
  Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
  const std::string cu = emit_cuda(*l.program, *l.diagram, dv, hw);
  const size_t k_wait = cu.find("if (kc >= 2) napkin::mbar_wait(&k_empty[s]"), k_load = cu.find("&k_full[s], j * 64", k_wait);
  const size_t v_chunk = cu.find("const int64_t vc = kc - 1;", k_load), v_wait = cu.find("napkin::mbar_wait(&v_empty[sv]", v_chunk);
  REQUIRE(k_wait != std::string::npos);
  CHECK(k_load != std::string::npos);
  CHECK(v_chunk != std::string::npos);
  CHECK(v_wait != std::string::npos);
  // the last chunk's V after the loop
  CHECK(cu.find("const int64_t vc = chunks - 1;", v_wait) != std::string::npos);
}
