// Emitting CUDA for nested calls is linear in the call depth: each callee's unit is spliced into
// the file once, not copied again by every caller above it (issue 15: 1000 levels took over 20 s).
// The chains here nest past kMaxCallDepth, which verify enforces for the CLI; the emitter itself
// must not depend on it for its cost.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <unistd.h>

#include "derive/derivation.hpp"
#include "diagrams/sizes.hpp"
#include "emit/cuda_emitter.hpp"
#include "tests/support/run.hpp"

using namespace napkin;
using namespace napkin::test;

namespace {

/** Seconds to emit the CUDA of a chain of `depth` nested calls (tools/scale_diagrams.sh calls),
 *  the least of three runs. */
double emit_seconds(int depth, const Hardware& hw) {
  auto dir = std::filesystem::temp_directory_path() / ("napkin-call-depth-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto r = run_shell(std::string(NAPKIN_SOURCE_DIR) + "/tools/scale_diagrams.sh calls " + std::to_string(depth) + " " + dir.string());
  REQUIRE(r.status == 0);
  DiagnosticEngine diags;
  auto p = load_program_text("calls.napkin", slurp((dir / "calls.napkin").string()), diags);
  std::filesystem::remove_all(dir);
  REQUIRE_FALSE(diags.has_errors());
  const Diagram& d = p->select("");
  SizeMap sizes = *resolve_sizes(d, {}, diags);
  Derivation dv = derive(*p, d, sizes, hw);
  double best = 1e9;
  for (int run = 0; run < 3; ++run) {
    auto t0 = std::chrono::steady_clock::now();
    std::string cu = emit_cuda(*p, d, dv, hw);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    CHECK(cu.find("namespace call_Y") != std::string::npos);
    CHECK(cu.find('\x01') == std::string::npos);  // every nested unit spliced in
  }
  return best;
}

}  // namespace

TEST_CASE("emitting CUDA is linear in the call depth", "[emit][cuda][scale]") {
  Hardware hw = load_hardware("h100");
  double shallow = emit_seconds(250, hw), deep = emit_seconds(1000, hw);
  INFO("250 levels: " << shallow << " s, 1000 levels: " << deep << " s");
  CHECK(deep < 8 * shallow + 0.05);  // linear: 4x; quadratic: 16x
}

TEST_CASE("a call woven over b runs its callee lifted over b once: no host loop over b", "[emit][cuda][call]") {
  // The GPU sweep's call-block case (tests/gpu/sweep.sh): rmsnorm_layer and mlp_swiglu are woven over b = 2.
  Hardware hw = load_hardware("h100");
  const LoadedDiagram l = load_library(std::string(NAPKIN_SOURCE_DIR) + "/tests/gpu/call_block.napkin");
  DiagnosticEngine diags;
  SizeMap sizes = *resolve_sizes(*l.diagram, {{"b", 2}, {"s", 96}, {"m", 256}, {"g", 2}, {"r", 2}, {"d", 64}, {"f", 384}}, diags);
  Derivation dv = derive(*l.program, *l.diagram, sizes, hw);
  REQUIRE(dv.callees.size() == 4);
  for (const auto& [stmt, sub] : dv.callees) {
    REQUIRE(sub->lifted);
    // Each kernel of a callee woven over b has b in its grid (a batch axis of extent 2).
    if (stmt == "A") continue;  // gqa_attention binds b: nothing woven
    CHECK(sub->lifted->woven == AxisList{"b"});
    for (const auto& k : sub->chosen.kernels) CHECK(k.cost.axes.at("b").extent == 2);
  }
  const std::string cu = emit_cuda(*l.program, *l.diagram, dv, hw);
  CHECK(cu.find("for (int64_t w_") == std::string::npos);
  for (const char* call : {"call_H1", "call_A", "call_H2", "call_Y"}) {
    const std::string run = std::string(call) + "::run_all(" + call + "_args(a), stream)";
    INFO(run);
    const std::size_t at = cu.find(run);
    CHECK(at != std::string::npos);
    CHECK(cu.find(run, at + 1) == std::string::npos);  // launched once
  }
  CHECK(cu.find("c.N_b = a.N_b;") != std::string::npos);  // the lifted callees' b is the caller's
}
