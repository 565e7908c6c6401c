// Recompute or save (derive/checkpoint.hpp): the candidates are the arrays the backward recomputes,
// each priced with its bytes; the choice keeps within the budget and beats recomputing everything,
// or is empty; a budget under every candidate's bytes saves nothing.
#include <catch2/catch.hpp>

#include "derive/checkpoint.hpp"
#include "diagrams/verify.hpp"
#include "hardware/hardware.hpp"
#include "tests/support/run.hpp"

using namespace napkin;

TEST_CASE("recompute or save: attention's S and P, 2^31 bytes each in bf16, under a budget", "[derive][grad]") {
  DiagnosticEngine diags;
  auto p = load_program(std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/attention.napkin", diags, /*expand=*/false);
  const Diagram& d = p->select("");
  const SizeMap sizes = *resolve_sizes(d, {{"b", 4}, {"h", 16}, {"q", 4096}, {"x", 4096}}, diags);
  REQUIRE(verify_program(*p, diags, &d));
  const Hardware h100 = load_hardware("h100");

  CheckpointPlan tight = plan_checkpointing(*p, d, {}, sizes, h100, 1e9);
  REQUIRE(tight.candidates.size() == 2);
  for (const auto& c : tight.candidates) {
    CHECK(c.bytes == 4.0 * 16 * 4096 * 4096 * 2);  // [b,h,q,x] in bf16, the diagram's output dtype
    CHECK_FALSE(c.fits);
    CHECK_FALSE(c.chosen);
  }
  CHECK(tight.save.empty());
  CHECK(tight.seconds == tight.seconds_recompute);

  CheckpointPlan roomy = plan_checkpointing(*p, d, {}, sizes, h100, 8e9);
  CHECK(roomy.seconds_recompute == tight.seconds_recompute);
  CHECK(roomy.saved_bytes <= 8e9);
  CHECK(roomy.seconds <= roomy.seconds_recompute);
  for (const auto& c : roomy.candidates) {
    CHECK(c.fits);
    CHECK(c.seconds > 0);
  }
  if (!roomy.save.empty()) CHECK(roomy.seconds < roomy.seconds_recompute);
  std::size_t chosen = 0;
  for (const auto& c : roomy.candidates) chosen += c.chosen;
  CHECK(chosen == roomy.save.size());
}

TEST_CASE("recompute or save: the local search keeps an array that pays only beside the others (SwiGLU's G)", "[derive][grad]") {
  // Alone, saving G = silu(G_v) saves nothing (the backward still recomputes G_v); beside G_v, U
  // and H the dual GEMM's epilogue stores it and the backward stops recomputing it.
  DiagnosticEngine diags;
  auto p = load_program(std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/mlp_swiglu.napkin", diags, /*expand=*/false);
  const Diagram& d = p->select("");
  const SizeMap sizes = *resolve_sizes(d, {{"t", 2048}}, diags);
  REQUIRE(verify_program(*p, diags, &d));
  const Hardware h200 = load_hardware("h200");
  const CheckpointPlan plan = plan_checkpointing(*p, d, {}, sizes, h200, 4e9);
  const CheckpointCandidate* g = nullptr;
  for (const auto& c : plan.candidates)
    if (c.array == "G") g = &c;
  REQUIRE(g);
  CHECK(g->seconds >= plan.seconds_recompute);  // alone it does not pay
  CHECK(g->chosen);                              // beside the others it does
  CHECK(plan.refined >= 1);
  CHECK(plan.seconds < plan.seconds_recompute);
  CHECK(plan.saved_bytes <= 4e9);
  double bytes = 0;
  for (const auto& c : plan.candidates)
    if (c.chosen) bytes += c.bytes;
  CHECK(bytes == Approx(plan.saved_bytes));
}
