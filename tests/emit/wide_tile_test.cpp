// Output tiles wider than one wgmma N (lower/gemm_form.hpp gemm_wgmma_atoms): the atoms the spec
// splits T_N into, the TMA boxes of the wide operand tile, and the CUDA that issues them (one
// wrapper per distinct N, each on its slice of the accumulator row and its B rows or 64-column
// blocks), compiled for sm_90a where nvcc is found. The GPU sweep runs both schedules below on
// the device (tests/gpu/sweep.sh: mm-nt-wide-*, grouped-wide-*).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "derive/check_schedule.hpp"
#include "derive/derivation.hpp"
#include "derive/search.hpp"
#include "emit/cuda_emitter.hpp"
#include "tests/support/run.hpp"

using namespace napkin;
using namespace napkin::test;

namespace {

/** `file`'s diagram derived under the schedule in `schedule_file` (both under the source tree) on `hw`. */
Derivation under_schedule(const LoadedDiagram& l, const std::string& schedule_file, const Hardware& hw) {
  SourceManager sm;
  DiagnosticEngine diags;
  auto s = parse_schedule(*sm.add(schedule_file, slurp(std::string(NAPKIN_SOURCE_DIR) + "/" + schedule_file)), diags);
  REQUIRE(s);
  auto checked = check_schedule(*l.program, *l.diagram, *s, l.sizes, hw, {}, diags);
  INFO(diags.render());
  REQUIRE(checked);
  return derive_given(*l.program, *l.diagram, l.sizes, hw, result_of(*s, *checked));
}

}  // namespace

TEST_CASE("TMA boxes of an operand tile: the largest multiple of 8 rows up to 256, whole boxes per cluster rank", "[emit][cuda][lower]") {
  CHECK(gemm_tma_box_rows(256, 1) == 256);
  CHECK(gemm_tma_box_rows(256, 2) == 128);
  CHECK(gemm_tma_box_rows(320, 1) == 160);
  CHECK(gemm_tma_box_rows(320, 2) == 160);
  CHECK(gemm_tma_box_rows(512, 1) == 256);
  CHECK(gemm_tma_box_rows(192, 2) == 96);
  CHECK(gemm_tma_box_rows(64, 2) == 32);
  CHECK(gemm_tma_box_rows(12, 1) == 0);  // no multiple of 8 divides it
}

TEST_CASE("a 128 x 320 tile is two wgmma atoms: 160 + 160 over a K-major B, 192 + 128 over an N-major one", "[emit][cuda][lower]") {
  const Hardware hw = load_hardware("h200");
  struct Case {
    std::string diagram, schedule;
    std::vector<std::int64_t> atoms;
    std::vector<std::string> calls;  // the issue lines' atom slices
  };
  const std::vector<Case> cases{
      {"tests/gpu/matmul_nt.napkin", "tests/gpu/wide_nt.schedule", {160, 160},
       {"wgmma_m64n160k16_bf16<0, 0>(napkin::atom_slice<80>(acc0[ms], 0), da, napkin::desc_advance(db_B, 0));",
        "wgmma_m64n160k16_bf16<0, 0>(napkin::atom_slice<80>(acc0[ms], 80), da, napkin::desc_advance(db_B, 20480));"}},
      {"tests/gpu/grouped_linear_small.napkin", "tests/gpu/wide_grouped.schedule", {192, 128},
       {"wgmma_m64n192k16_bf16<0, 1>(napkin::atom_slice<96>(acc0[ms], 0), da, napkin::desc_advance(db_W, 0 * T_K * 128));",
        "wgmma_m64n128k16_bf16<0, 1>(napkin::atom_slice<64>(acc0[ms], 96), da, napkin::desc_advance(db_W, 3 * T_K * 128));"}}};
  const std::string dir = std::filesystem::temp_directory_path().string() + "/napkin-wide-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  for (const Case& c : cases) {
    INFO(c.diagram);
    LoadedDiagram l = load_library(std::string(NAPKIN_SOURCE_DIR) + "/" + c.diagram);
    const Derivation dv = under_schedule(l, c.schedule, hw);
    const KernelSpec& spec = *dv.chosen.kernels.at(0).cost.spec;
    INFO(describe_spec(spec));
    REQUIRE(spec.gemm);
    REQUIRE(spec.wgmma);
    CHECK(spec.gemm->TN == 320);
    CHECK(gemm_wgmma_atoms(*spec.gemm) == c.atoms);
    CHECK(dv.chosen.kernels.at(0).cost.flops_tensor > 0);
    const std::string text = emit_cuda(*l.program, *l.diagram, dv, hw);
    for (const auto& call : c.calls) CHECK(count(text, call) == 1);
    // one wrapper per distinct N; the accumulator row stays T_N / 2 registers (the epilogue's)
    for (std::int64_t n : c.atoms) CHECK(count(text, "void wgmma_m64n" + std::to_string(n) + "k16_bf16(float (&d)[" + std::to_string(n / 2) + "]") == 1);
    CHECK(text.find("acc0[MS][T_N / 2]") != std::string::npos);
    if (std::string(NAPKIN_NVCC).empty()) continue;
    const std::string cu = dir + "/wide.cu", ptx = dir + "/wide.ptx";
    std::ofstream(cu) << text;
    const std::string cmd = std::string(NAPKIN_NVCC) + " -std=c++17 -O3 -ptx -arch=compute_90a -o " + ptx + " " + cu + " > " + dir + "/nvcc.log 2>&1";
    INFO(cmd << "\n" << slurp(dir + "/nvcc.log"));
    REQUIRE(std::system(cmd.c_str()) == 0);
    for (std::int64_t n : c.atoms) CHECK(count(slurp(ptx), "wgmma.mma_async.sync.aligned.m64n" + std::to_string(n) + "k16.f32.bf16.bf16") > 0);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("wgmma atoms: T_N itself up to 256, else the fewest atoms a B tile's layout allows, or none", "[emit][cuda][lower]") {
  const Hardware hw = load_hardware("h200");
  LoadedDiagram nt = load_library(std::string(NAPKIN_SOURCE_DIR) + "/tests/gpu/matmul_nt.napkin");
  LoadedDiagram nn = load_library(std::string(NAPKIN_SOURCE_DIR) + "/tests/gpu/grouped_linear_small.napkin");
  GemmForm k_major = *under_schedule(nt, "tests/gpu/wide_nt.schedule", hw).chosen.kernels.at(0).cost.spec->gemm;
  GemmForm n_major = *under_schedule(nn, "tests/gpu/wide_grouped.schedule", hw).chosen.kernels.at(0).cost.spec->gemm;
  REQUIRE(k_major.gemms.at(0).b.k_inner);
  REQUIRE_FALSE(n_major.gemms.at(0).b.k_inner);
  auto atoms = [](GemmForm g, std::int64_t tn) { return g.TN = tn, gemm_wgmma_atoms(g); };
  using V = std::vector<std::int64_t>;
  CHECK(atoms(k_major, 256) == V{256});
  CHECK(atoms(n_major, 64) == V{64});
  CHECK(atoms(k_major, 264) == V{136, 128});  // 33 units of 8
  CHECK(atoms(n_major, 512) == V{256, 256});
  CHECK(atoms(n_major, 576) == V{192, 192, 192});
  CHECK(atoms(k_major, 260).empty());  // not a multiple of 8
}
