// The invariant of lowering (lower/lower.hpp): what the model prices is what the CUDA emitter
// writes. For every bundled diagram on every bundled GPU with tensor cores, and for random
// diagrams, each kernel's emitted section declares the spec's strategy, its mma.sync pipeline
// (stages, SMEM bytes) and its wgmma variant exactly when the spec has one; the model gives
// tensor-core FLOPs only to kernels lowered to a tensor-core strategy and prices wgmma only where
// the wgmma variant is emitted. (The PTX side, mma and wgmma instructions in the compiled code
// of such kernels, is checked by cuda_compile_test.cpp.)
#include <catch2/catch.hpp>

#include <regex>

#include "derive/derivation.hpp"
#include "emit/cuda_emitter.hpp"
#include "tests/support/random_diagram.hpp"
#include "tests/support/run.hpp"

using namespace napkin;
using namespace napkin::test;

namespace {

/** The emitted text of kernel `name`: from its plan comment to the next kernel's. */
std::string section_of(const std::string& text, const std::string& name) {
  const std::string head = "// kernel " + name + ": ";
  std::size_t at = text.find(head);
  // The schedule summary at the top repeats the plan lines; the section is the second occurrence.
  if (at != std::string::npos) at = text.find(head, at + 1);
  if (at == std::string::npos) return {};
  std::size_t end = text.find("\n// kernel ", at + head.size());
  return text.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

std::int64_t constant(const std::string& text, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("\\b" + name + " = (\\d+)"))) return -1;
  return std::stoll(m[1]);
}

/** Checks one derivation's kernels (of diagram `d`) against the text emitted from it; returns the tensor-core kernels seen. */
int check_invariant(const Derivation& dv, const Diagram& d, const std::string& text) {
  int tensor = 0;
  for (const auto& kc : dv.chosen.kernels) {
    const KernelSpec& spec = *kc.cost.spec;
    INFO("kernel " << kc.plan.name << ": " << describe_spec(spec));
    if (spec.strategy == Strategy::call) continue;
    const std::string sec = section_of(text, kc.plan.name);
    REQUIRE(!sec.empty());
    CHECK(sec.find("// strategy " + std::string(strategy_name(spec.strategy))) != std::string::npos);
    // The model: tensor-core FLOPs only for tensor-core strategies, wgmma only where emitted.
    if (!spec.tensor_cores()) CHECK(kc.cost.flops_tensor == 0);
    CHECK((kc.cost.warpgroup_mma && !spec.wgmma) == false);
    if (spec.strategy == Strategy::rows) {  // the launch shape the model prices (lower/rows_form.hpp)
      const RowsForm& f = *spec.rows;
      CHECK(constant(sec, "ROWS") == f.rows_per_block);
      CHECK(constant(sec, "TEAM_WARPS") == f.team_warps);
      CHECK(constant(sec, "U") == f.unroll);
      CHECK(sec.find("__launch_bounds__(THREADS, " + std::to_string(f.blocks_per_sm) + ")") != std::string::npos);
      CHECK(kc.cost.blocks_per_sm == f.blocks_per_sm);
      CHECK(kc.cost.registers_per_thread == f.registers);
      // the staged prefix (RowsForm::staged) and its dynamic SMEM, as priced
      CHECK(constant(sec, "STAGED") == (f.staged > 0 ? f.staged : -1));
      CHECK(f.smem_bytes == std::int64_t{f.warps} * 3 * 4 + f.teams_per_block() * f.staged_bytes_per_team());
      if (f.staged > 0)
        CHECK(sec.find("SMEM_BYTES = size_t{TEAMS} * " + std::to_string(f.staged_arrays.size()) + " * STAGED * 2;") != std::string::npos);
      // the re-read the model counts in L2 is what the vector path loads evict_last (perfmodel/rows_cost.hpp)
      if (f.vector && sec.find("const bool vec") != std::string::npos) {
        bool vector_reread = false;
        for (const auto& a : reread_arrays(f, d)) {
          if (!std::count(f.statistics.vector_arrays.begin(), f.statistics.vector_arrays.end(), a)) continue;
          vector_reread = true;
          CHECK(sec.find("ld16_policy(a." + a + " + ") != std::string::npos);
        }
        CHECK((sec.find("keep_l2)") != std::string::npos) == vector_reread);
      }
    }
    if (!spec.tensor_cores()) {
      CHECK(sec.find("napkin::mma_") == std::string::npos);
      CHECK(sec.find("wgmma_m64n") == std::string::npos);
      continue;
    }
    ++tensor;
    // The model holds the SMEM of the variant it prices (wgmma where emitted, else mma.sync).
    CHECK(kc.cost.smem_resident_bytes == static_cast<double>(spec.wgmma ? spec.wgmma_smem_bytes : spec.smem_bytes));
    const std::string sm80 = sec.substr(0, sec.find("namespace wg"));
    CHECK(sm80.find(spec.mma_sync->ptx) != std::string::npos);
    CHECK(sm80.find("napkin::mma_") != std::string::npos);
    // Each path's atom and mover (KernelSpec::path, what the renderers read) are what its kernel issues.
    const KernelPath p80 = spec.path(false);
    CHECK((!p80.wgmma() && p80.mover == Mover::cp_async && p80.stages == spec.stages && p80.smem_bytes == spec.smem_bytes));
    CHECK(sm80.find("napkin::load_tile<") != std::string::npos);
    CHECK(sm80.find("napkin::tma_load") == std::string::npos);
    if (spec.strategy == Strategy::gemm) {
      CHECK(constant(sm80, "STAGES") == spec.stages);
      CHECK(constant(sm80, "STAGE_ELEMS") * dtype_bits(spec.gemm->dtype) / 8 * spec.stages == spec.smem_bytes);
    } else {
      const std::int64_t tq = constant(sm80, "T_Q"), tx = constant(sm80, "T_X"), dk = constant(sm80, "D_K"), dvv = constant(sm80, "D_V");
      CHECK(2 * (tq * (dk + 8) + 2 * tx * (dk + 8) + 2 * tx * (dvv + 8)) == spec.smem_bytes);
    }
    const bool has_wg = sec.find("namespace wg") != std::string::npos;
    CHECK(has_wg == spec.wgmma);
    if (spec.wgmma) {
      const std::string wg = sec.substr(sec.find("namespace wg"));
      CHECK(wg.find("wgmma_m64n") != std::string::npos);
      const KernelPath p90 = spec.path(true);
      CHECK((p90.wgmma() && p90.mover == Mover::tma && p90.stages == spec.wgmma_stages && p90.smem_bytes == spec.wgmma_smem_bytes));
      CHECK(wg.find("napkin::tma_load") != std::string::npos);
      CHECK(wg.find("napkin::load_tile<") == std::string::npos);
      if (spec.strategy == Strategy::gemm) {
        CHECK(constant(wg, "STAGES") == spec.wgmma_stages);
        // The TMA store epilogue exactly where the spec has it, its staging in the spec's SMEM.
        CHECK((wg.find("napkin::tma_store(") != std::string::npos) == spec.tma_store);
        CHECK(constant(wg, "STAGE_BYTES") * spec.wgmma_stages + (spec.tma_store ? gemm_tma_store_bytes(*spec.gemm, spec.tma_store_buffers) : 0) == spec.wgmma_smem_bytes);
      }
      CHECK((spec.cluster > 1) == (wg.find("NAPKIN_CLUSTER_DIMS(CLUSTER)") != std::string::npos));
    } else {
      CHECK(sec.find("// no wgmma variant: " + spec.why_no_wgmma) != std::string::npos);
    }
  }
  return tensor;
}

}  // namespace

TEST_CASE("lowering invariant: every bundled diagram's emitted kernels are their specs", "[emit][cuda][lower]") {
  int tensor = 0;
  for (const std::string gpu : {"h100", "a100"}) {
    Hardware hw = load_hardware(gpu);
    for (const auto& path : library_files()) {
      INFO(gpu << " " << path);
      LoadedDiagram l = load_library(path);
      Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
      tensor += check_invariant(dv, *l.diagram, emit_cuda(*l.program, *l.diagram, dv, hw));
    }
  }
  CHECK(tensor >= 16);  // the matmul family and the attention diagrams, on both GPUs
}

TEST_CASE("lowering invariant: random diagrams at sizes tensor cores take", "[emit][cuda][lower]") {
  Hardware hw = load_hardware("h100");
  int tensor = 0, kernels = 0, emitted = 0;
  for (std::uint64_t seed = 0; seed < 80; ++seed) {
    const std::string text = random_diagram(seed, "random", false, 256);
    INFO("seed " << seed << "\n" << text);
    LoadedDiagram l = load_text(text);
    Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
    std::string cuda;
    try {
      cuda = emit_cuda(*l.program, *l.diagram, dv, hw);
    } catch (const UserError& e) {  // dtypes the CUDA target does not store (fp8, int8): said, not emitted
      CHECK(std::string(e.what()).find("not") != std::string::npos);
      continue;
    }
    ++emitted;
    tensor += check_invariant(dv, *l.diagram, cuda);
    kernels += static_cast<int>(dv.chosen.kernels.size());
  }
  INFO(emitted << " diagrams emitted, " << kernels << " kernels, " << tensor << " on tensor cores");
  CHECK(emitted >= 20);
  CHECK(kernels > emitted);
}

namespace {

/** The gemm spec of the only non-call kernel of `file` (tests/gpu or diagrams/library) at `sizes`
 *  on `gpu`, after checking the emitted CUDA declares it. */
KernelSpec gemm_spec_of(const std::string& file, const SizeMap& sizes, const std::string& gpu = "h100") {
  INFO(file);
  LoadedDiagram l = load_text(slurp(std::string(NAPKIN_SOURCE_DIR) + "/" + file), sizes);
  Hardware hw = load_hardware(gpu);
  Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
  CHECK(check_invariant(dv, *l.diagram, emit_cuda(*l.program, *l.diagram, dv, hw)) == 1);
  REQUIRE(dv.chosen.kernels.size() == 1);
  return *dv.chosen.kernels[0].cost.spec;
}

}  // namespace

TEST_CASE("lowering: gemm-shaped contractions take tensor cores, whatever the number of contracted axes or the thinness of M and N",
          "[emit][cuda][lower]") {
  SECTION("several contracted axes: the outer ones walked one index at a time, the innermost in chunks") {
    for (const SizeMap& sizes : {SizeMap{{"s", 777}, {"m", 333}, {"g", 3}, {"r", 2}, {"d", 100}}, SizeMap{{"s", 2048}, {"m", 4096}, {"g", 8}, {"r", 4}, {"d", 128}}}) {
      KernelSpec s = gemm_spec_of("tests/gpu/gemm_multi_k.napkin", sizes);
      INFO(describe_spec(s));
      REQUIRE(s.strategy == Strategy::gemm);
      CHECK(s.gemm->K == "d");  // A stores d innermost
      CHECK(s.gemm->k_outer == AxisList{"g", "r"});
      CHECK(describe_spec(s).find("over g, r, then d in chunks of") != std::string::npos);
    }
  }
  SECTION("per-group weights: the group axis is a batch axis of both operands") {
    KernelSpec s = gemm_spec_of("tests/gpu/grouped_linear_small.napkin", {{"t", 4096}, {"g", 8}, {"i", 1024}, {"o", 1024}});
    REQUIRE(s.strategy == Strategy::gemm);
    CHECK(s.gemm->batch == AxisList{"g"});
    CHECK(s.wgmma);
  }
  SECTION("a thin side kept whole is N; a thin M the warps cannot split trades places with N") {
    KernelSpec n16 = gemm_spec_of("tests/gpu/matmul_thin.napkin", {{"a", 8192}, {"b", 4096}, {"c", 16}});
    REQUIRE(n16.strategy == Strategy::gemm);
    CHECK(n16.gemm->N == "c");
    CHECK(n16.gemm->TN == 16);
    KernelSpec m16 = gemm_spec_of("tests/gpu/matmul_thin.napkin", {{"a", 16}, {"b", 4096}, {"c", 8192}});
    REQUIRE(m16.strategy == Strategy::gemm);
    CHECK(m16.gemm->M == "c");
    CHECK(m16.gemm->N == "a");
    CHECK(m16.shape.warp_axis == "c");
    KernelSpec m24 = gemm_spec_of("tests/gpu/matmul_thin.napkin", {{"a", 24}, {"b", 333}, {"c", 1001}});
    REQUIRE(m24.strategy == Strategy::gemm);
    CHECK(m24.gemm->TN == 32);  // a whole side rounded up to whole MMA tiles, edges predicated
  }
  SECTION("an output stored with M innermost: M and N trade places, so that the epilogue stores along it") {
    KernelSpec s = gemm_spec_of("tests/gpu/matmul_out_transposed.napkin", {{"a", 4096}, {"b", 1024}, {"c", 2048}});
    INFO(describe_spec(s));
    REQUIRE(s.strategy == Strategy::gemm);
    CHECK(s.gemm->M == "c");
    CHECK(s.gemm->N == "a");  // C[c,a]: a innermost
    CHECK(s.shape.warp_axis == "c");
    CHECK(s.tma_store);
    CHECK(s.why_no_tma_store.empty());
    KernelSpec odd = gemm_spec_of("tests/gpu/matmul_out_transposed.napkin", {{"a", 1000}, {"b", 333}, {"c", 520}});
    REQUIRE(odd.strategy == Strategy::gemm);
    CHECK(odd.gemm->N == "a");
  }
  SECTION("a dual GEMM stores both outputs by TMA, in turn through one ring of staging buffers") {
    // tests/gpu/dual_gemm.napkin: G = X W1, V = X W3 fused (SwiGLU's projections, the MLP
    // backward's dW1 and dW3); before session 23 two outputs took the direct-store epilogue,
    // priced after the main loop (dW1_to_dW3 at t = 2048: 852.4 -> 724.2 us on the H200).
    LoadedDiagram l = load_text(slurp(std::string(NAPKIN_SOURCE_DIR) + "/tests/gpu/dual_gemm.napkin"), {});
    Hardware hw = load_hardware("h100");
    Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
    REQUIRE(dv.chosen.kernels.size() == 1);
    const KernelChoice& kc = dv.chosen.kernels[0];
    const KernelSpec& s = *kc.cost.spec;
    INFO(describe_spec(s));
    REQUIRE(s.strategy == Strategy::gemm);
    CHECK(kc.cost.outputs.size() == 2);
    CHECK(s.tma_store);
    CHECK(s.why_no_tma_store.empty());
    CHECK(kc.cost.t_epilogue == 0);  // no epilogue input, stores overlapped
    const std::string text = emit_cuda(*l.program, *l.diagram, dv, hw);
    CHECK(check_invariant(dv, *l.diagram, text) == 1);
    CHECK(count(text, "napkin::tma_store(&tm_G,") == 1);
    CHECK(count(text, "napkin::tma_store(&tm_V,") == 1);
    CHECK(count(text, "const __grid_constant__ CUtensorMap tm_V, const __grid_constant__ CUtensorMap tm_G, const bool tma_store") == 1);
  }
  SECTION("the transformer block's output projection (contracted over heads and head width) is a gemm") {
    LoadedDiagram l = load_library("transformer_block.napkin");
    Hardware hw = load_hardware("h100");
    Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
    for (const auto& kc : dv.chosen.kernels)
      if (kc.cost.spec->strategy != Strategy::call) CHECK(kc.cost.spec->strategy == Strategy::gemm);
  }
}

TEST_CASE("lowering: the wgmma GEMM's edge tiles go through the TMA store unless the epilogue reads an array along M or N",
          "[emit][cuda][lower]") {
  // KernelSpec::tma_store_edges (lower/lower.hpp): TMA writes only what lies inside the array, so a
  // ragged tile can be staged whole; a bias read along M or N past the array would need bounds.
  Hardware hw = load_hardware("h200");
  struct Case {
    std::string name, text;
    bool edges;
  };
  const std::string head = "axis a = 1000\naxis b = 1000\naxis c = 1000\nin A[a,b] : bf16\nin B[b,c] : bf16\n";
  const std::vector<Case> cases = {
      {"plain", head + "C[a,c] = contract(A, B; b)\nout C : bf16\n", true},
      {"scalar scale", head + "in s[] : fp32\nC[a,c] = contract(A, B; b) * s\nout C : bf16\n", true},
      {"bias along N", head + "in bias[c] : bf16\nC[a,c] = contract(A, B; b) + bias\nout C : bf16\n", false},
      {"bias along M", head + "in r[a] : bf16\nC[a,c] = contract(A, B; b) * r\nout C : bf16\n", false},
  };
  for (const auto& t : cases) {
    INFO(t.name);
    LoadedDiagram l = load_text("diagram g\n" + t.text, {});
    Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
    REQUIRE(dv.chosen.kernels.size() == 1);
    const KernelSpec& s = *dv.chosen.kernels[0].cost.spec;
    REQUIRE(s.strategy == Strategy::gemm);
    REQUIRE(s.tma_store);
    CHECK(s.tma_store_edges == t.edges);
    const std::string text = emit_cuda(*l.program, *l.diagram, dv, hw);
    CHECK(count(text, "if (tma_store && n_M > 0 && n_N > 0)") == (t.edges ? 1u : 0u));
    CHECK(count(text, "if (tma_store && n_M == T_M && n_N == T_N)") == (t.edges ? 0u : 1u));
  }
}
