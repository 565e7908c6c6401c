// The fp8 GEMM (issue 17): lowering picks the wgmma atom by operand dtype from the hardware's
// [[mma]] table (m64nNk32 for fp8e4m3 and fp8e5m2), stages 128 fp8 elements per 128-byte swizzle
// row, refuses the wgmma path with its reason where an operand is MN-major (fp8 wgmma reads both
// operands K-major), and the emitter refuses fp8 for hardware without fp8 tensor cores. Goldens of
// the emitted CUDA and pseudocode of tests/kernels/gemm_fp8.napkin.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "derive/derivation.hpp"
#include "emit/cuda_emitter.hpp"
#include "emit/pseudo_emitter.hpp"
#include "tests/support/run.hpp"

using namespace napkin;
using namespace napkin::test;

namespace {

/** The fp8 GEMM of tests/kernels/gemm_fp8.napkin with operands of `dtype`, B stored as `b_axes`. */
LoadedDiagram fp8_gemm(const std::string& dtype, const std::string& b_axes, const SizeMap& sizes = {}) {
  return load_text("diagram g\naxis i = 8192\naxis j = 8192\naxis k = 8192\nin A[i,k] : " + dtype + "\nin B[" + b_axes + "] : " + dtype +
                       "\nin sa[] : fp32\nin sb[] : fp32\nC[i,j] = contract(A, B; k) * sa * sb\nout C : bf16\n",
                   sizes);
}

const KernelChoice& only_kernel(const Derivation& dv) {
  REQUIRE(dv.chosen.kernels.size() == 1);
  return dv.chosen.kernels[0];
}

}  // namespace

TEST_CASE("lowering picks the fp8 wgmma atom from the hardware table by operand dtype", "[derive][lower][fp8]") {
  const Hardware h100 = load_hardware("h100");
  for (const auto& [dtype, t, ptx] : {std::tuple{"fp8e4m3", DType::fp8e4m3, ".m64n8k32.f32.e4m3.e4m3"},
                                      std::tuple{"fp8e5m2", DType::fp8e5m2, ".m64n8k32.f32.e5m2.e5m2"}}) {
    INFO(dtype);
    LoadedDiagram l = fp8_gemm(dtype, "j,k");
    const Derivation dv = derive(*l.program, *l.diagram, l.sizes, h100);
    const KernelSpec& s = *only_kernel(dv).cost.spec;
    REQUIRE(s.strategy == Strategy::gemm);
    // Hopper's 8-bit float mma.sync (m16n8k32, fp32 accumulate: the fallback where the wgmma path
    // cannot run) at its own share of the fp8 peak: conversions to f16 and two HMMAs.
    REQUIRE(s.mma_sync);
    CHECK(s.mma_sync->dtype == t);
    CHECK(s.mma_sync->k == 32);
    CHECK(s.mma_sync->ptx.find(std::string(".m16n8k32.row.col.f32") + std::string(ptx).substr(std::string(".m64n8k32.f32").size())) != std::string::npos);
    CHECK(s.mma_sync->fraction == Approx(0.325));
    REQUIRE(s.wgmma);
    CHECK(s.wgmma_mma->dtype == t);
    CHECK(s.wgmma_mma->k == 32);
    CHECK(s.wgmma_mma->ptx.find(ptx) != std::string::npos);
    CHECK(&*s.wgmma_mma != h100.warpgroup_mma(DType::bf16));
    const GemmForm& g = *s.gemm;
    CHECK(g.dtype == t);
    CHECK(g.TK % 128 == 0);  // whole 128-byte swizzle rows of 1-byte elements
    std::int64_t stage = 0;
    for (const auto& tile : g.tiles) {
      CHECK_FALSE(tile.k_rows);
      stage += tile.R * tile.C;  // 1 byte an element
    }
    CHECK(gemm_wgmma_stage_bytes(g) == stage);
    CHECK(s.wgmma_smem_bytes >= stage * s.wgmma_stages);
    CHECK(describe_spec(s).find("on mma.sync") != std::string::npos);
    // The model prices the wgmma path at the fp8 tensor-core rate.
    CHECK(only_kernel(dv).cost.warpgroup_mma);
  }
  // The bf16 GEMM keeps its k16 atom and both paths.
  LoadedDiagram b = fp8_gemm("bf16", "j,k", {{"i", 1024}, {"j", 1024}, {"k", 1024}});
  const Derivation bdv = derive(*b.program, *b.diagram, b.sizes, h100);
  const KernelSpec& bs = *only_kernel(bdv).cost.spec;
  CHECK(bs.mma_sync);
  REQUIRE(bs.wgmma);
  CHECK(bs.wgmma_mma->k == 16);
}

TEST_CASE("an fp8 GEMM whose K is not a multiple of 16 runs on tensor cores: wgmma on repacked copies, mma.sync as the fallback", "[derive][lower][fp8][repack]") {
  // session 40, H200: 1000 x 1000 x 4040 ran SIMT (9869 us); session 41: 28.1 us repacked
  const Hardware h200 = load_hardware("h200");
  LoadedDiagram l = fp8_gemm("fp8e4m3", "j,k", {{"i", 1000}, {"j", 1000}, {"k", 4040}});
  const Derivation dv = derive(*l.program, *l.diagram, l.sizes, h200);
  const KernelChoice& kc = only_kernel(dv);
  const KernelSpec& s = *kc.cost.spec;
  INFO(describe_spec(s));
  REQUIRE(s.strategy == Strategy::gemm);
  REQUIRE(s.wgmma);
  REQUIRE(s.repacks.size() == 2);
  for (const auto& r : s.repacks) CHECK(r.pitch == 4096);
  REQUIRE(s.mma_sync);  // the fallback reads the operands in place, 8 bytes a cp.async (4040 = 8 x 505)
  for (const auto& t : s.gemm->tiles) CHECK(t.copy_bytes == 8);
  CHECK(kc.cost.t_repack > 2 * h200.launch_overhead_s);
  const std::string cu = emit_cuda(*l.program, *l.diagram, dv, h200);
  CHECK(cu.find("napkin::pitch_copy(a.C__pad_A, a.A,") != std::string::npos);
  CHECK(cu.find("napkin::pitch_copy(a.C__pad_B, a.B,") != std::string::npos);
  CHECK(cu.find("__nv_fp8_e4m3* C__pad_A;") != std::string::npos);  // workspace
}

TEST_CASE("an MN-major fp8 operand: the wgmma path is refused with its reason and the kernel priced as emitted", "[derive][lower][fp8]") {
  // tests/kernels/gemm_fp8_mn_major.napkin (B[k,j]) under the schedule the K-major GEMM takes.
  const std::string file = std::string(NAPKIN_SOURCE_DIR) + "/tests/kernels/gemm_fp8_mn_major.napkin";
  const std::string schedule = std::filesystem::temp_directory_path().string() + "/napkin-fp8-mn-" + std::to_string(getpid()) + ".schedule";
  std::ofstream(schedule) << "schedule s for gemm_fp8_mn_major\n  kernel C\n    fuse C\n    group i by 128\n    group j by 128\n    stream k by 128\n    warps 8\n";
  const RunResult d = run_napkin("derive " + file + " --hw h100 --schedule " + schedule);
  INFO(d.output);
  CHECK(d.status == 0);
  CHECK(d.output.find("lowered to                     simt") != std::string::npos);  // priced as the SIMT kernel it lowers to
  CHECK(d.output.find("no wgmma: fp8e4m3 wgmma reads both operands K-major from SMEM; B is stored j-major (j innermost, not k)") != std::string::npos);
  // What is emitted is what was priced: no wgmma kernel in the CUDA, fp8 loads in the SIMT one.
  const RunResult e = run_napkin("emit " + file + " --hw h100 --target cuda --schedule " + schedule + " -o -");
  std::filesystem::remove(schedule);
  CHECK(e.status == 0);
  CHECK(e.output.find("wgmma variant") == std::string::npos);
  CHECK(e.output.find("// strategy simt") != std::string::npos);
  CHECK(e.output.find("B is stored j-major") != std::string::npos);  // the reason, beside the kernel
  CHECK(e.output.find("const __nv_fp8_e4m3* A;") != std::string::npos);
}

TEST_CASE("emit --target cuda refuses fp8 for hardware without fp8 tensor cores", "[emit][cuda][fp8]") {
  const Hardware a100 = load_hardware("a100");
  LoadedDiagram l = fp8_gemm("fp8e4m3", "j,k", {{"i", 256}, {"j", 256}, {"k", 256}});
  const Derivation dv = derive(*l.program, *l.diagram, l.sizes, a100);
  for (const auto& kc : dv.chosen.kernels) CHECK(kc.cost.spec->strategy != Strategy::gemm);
  CHECK_THROWS_WITH(emit_cuda(*l.program, *l.diagram, dv, a100), Catch::Contains("A100") && Catch::Contains("has no fp8e4m3 tensor cores"));
  // Reference mode stores fp32 everywhere: no fp8 to refuse.
  cuda::EmitOptions ref;
  ref.reference = true;
  CHECK_NOTHROW(emit_cuda(*l.program, *l.diagram, dv, a100, ref));
}

TEST_CASE("the fp8 GEMM's CUDA and pseudocode match their golden files", "[emit][cuda][fp8][golden]") {
  const Hardware h100 = load_hardware("h100");
  LoadedDiagram l = load_library(std::string(NAPKIN_SOURCE_DIR) + "/tests/kernels/gemm_fp8.napkin");
  const Derivation dv = derive(*l.program, *l.diagram, l.sizes, h100);
  const std::string cu = emit_cuda(*l.program, *l.diagram, dv, h100);
  CHECK(cu.find("wgmma_m64n") != std::string::npos);
  CHECK(cu.find("CU_TENSOR_MAP_DATA_TYPE_UINT8") != std::string::npos);
  CHECK(cu.find("mma_m16n8k32_fp8e4m3(") != std::string::npos);  // the mma.sync fallback, on sm_89 and later
  CHECK(cu.find("if (!napkin::fp8_mma_sync_device()) return napkin_fail(") != std::string::npos);  // ... else a stated failure
  check_golden("cuda/gemm_fp8.cu", cu);
  check_golden("pseudo/gemm_fp8.txt", emit_pseudo(*l.program, *l.diagram, dv, h100));
}

TEST_CASE("derive gives an fp8 B stored N-major a K-major copy and takes the wgmma GEMM", "[derive][relayout][fp8]") {
  const auto l = fp8_gemm("fp8e4m3", "k,j");
  const Hardware h100 = load_hardware("h100");
  const Derivation dv = derive(*l.program, *l.diagram, l.sizes, h100);
  REQUIRE(dv.rewritten);
  const Statement* copy = dv.rewritten->find_statement("B_k");
  REQUIRE(copy);
  CHECK(copy->axes == AxisList{"j", "k"});
  CHECK(copy->dtype == DType::fp8e4m3);
  bool gemm = false;
  for (const auto& kc : dv.chosen.kernels) gemm |= kc.cost.spec && kc.cost.spec->strategy == Strategy::gemm;
  CHECK(gemm);
  // K-major operands: no copy, the diagram unchanged.
  const auto k = fp8_gemm("fp8e4m3", "j,k");
  CHECK(!derive(*k.program, *k.diagram, k.sizes, h100).rewritten);
}
