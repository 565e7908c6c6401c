// The int8 GEMM (issue 17): lowering picks the mma.sync atom by operand dtype and K x bits from the
// hardware's [[mma]] table (m16n8k32 .s32.s8.s8.s32 on the A100 and H100: 32 bytes of K per row,
// int32 accumulators) and on the H100 also the wgmma atom (m64nNk32 .s32.s8.s8), refuses them with
// the reason where an operand is MN-major (ldmatrix .trans transposes 16-bit elements only; 8-bit
// wgmma reads K-major operands) or the table has no such row, the model prices the kernel at the
// int8 tensor-core rate, and the emitter stores int8 (refusing hardware without int8 tensor cores).
// Goldens of the emitted CUDA and pseudocode of tests/kernels/gemm_int8.napkin.
#include <catch2/catch.hpp>
#include <algorithm>
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

/** The int8 GEMM of tests/kernels/gemm_int8.napkin, B stored as `b_axes`. */
LoadedDiagram int8_gemm(const std::string& b_axes, const SizeMap& sizes = {}) {
  return load_text("diagram g\naxis i = 8192\naxis j = 8192\naxis k = 8192\nin A[i,k] : int8\nin B[" + b_axes +
                       "] : int8\nin sa[] : fp32\nin sb[] : fp32\nC[i,j] = contract(A, B; k) * sa * sb\nout C : bf16\n",
                   sizes);
}

const KernelChoice& only_kernel(const Derivation& dv) {
  REQUIRE(dv.chosen.kernels.size() == 1);
  return dv.chosen.kernels[0];
}

}  // namespace

TEST_CASE("lowering picks the int8 mma.sync atom from the hardware table and the model prices it at the int8 rate", "[derive][lower][int8]") {
  for (const std::string gpu : {"a100", "h100"}) {
    INFO(gpu);
    const Hardware hw = load_hardware(gpu);
    LoadedDiagram l = int8_gemm("j,k");
    const Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
    const KernelChoice& kc = only_kernel(dv);
    const KernelSpec& s = *kc.cost.spec;
    REQUIRE(s.strategy == Strategy::gemm);
    REQUIRE(s.mma_sync);
    CHECK(s.mma_sync->dtype == DType::int8);
    CHECK(s.mma_sync->k == 32);  // 32 bytes of K per row, as m16n8k16 of 16-bit types
    CHECK(s.mma_sync->ptx == "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32");
    CHECK(&*s.mma_sync != hw.warp_mma(DType::bf16));
    // The H100 adds the wgmma path (m64nNk32 .s32.s8.s8 from its table, both operands K-major by
    // TMA) and the model prices it; the A100 has none, and says why.
    if (gpu == "h100") {
      REQUIRE(s.wgmma);
      CHECK(s.wgmma_mma->dtype == DType::int8);
      CHECK(s.wgmma_mma->ptx == "wgmma.mma_async.sync.aligned.m64n8k32.s32.s8.s8");
      CHECK(kc.cost.warpgroup_mma);
      CHECK(s.gemm->TK % 128 == 0);  // whole 128-byte swizzle rows of 1-byte elements
      CHECK(gemm_wgmma_stage_bytes(*s.gemm) * s.wgmma_stages + (s.tma_store ? gemm_tma_store_bytes(*s.gemm, s.tma_store_buffers) : 0) ==
            s.wgmma_smem_bytes);
    } else {
      CHECK_FALSE(s.wgmma);
      CHECK(s.why_no_wgmma == "A100-SXM4-80GB has no wgmma and TMA");
      CHECK_FALSE(kc.cost.warpgroup_mma);
    }
    const GemmForm& g = *s.gemm;
    CHECK(g.dtype == DType::int8);
    CHECK(g.TK % 32 == 0);
    std::int64_t stage = 0;
    for (const auto& t : g.tiles) {
      CHECK_FALSE(t.k_rows);
      stage += t.R * (t.C + 16);  // rows padded by 16 bytes, 1 byte an element
    }
    CHECK(s.smem_bytes == stage * s.stages);
    CHECK(kc.cost.smem_resident_bytes == static_cast<double>(s.wgmma ? s.wgmma_smem_bytes : s.smem_bytes));  // the variant priced
    // What is emitted is the spec: the mma.sync kernel's stage of 1-byte elements and its stages.
    const std::string cu = emit_cuda(*l.program, *l.diagram, dv, hw);
    CHECK(cu.find("constexpr int STAGE_ELEMS = " + std::to_string(stage) + ";") != std::string::npos);
    CHECK(cu.find("STAGES = " + std::to_string(s.stages) + ";") != std::string::npos);
    CHECK(cu.find("napkin::mma_m16n8k32_int8(acc0[mt][nt]") != std::string::npos);
    CHECK((cu.find("wgmma_m64n" + std::to_string(g.TN) + "k32_int8<0, 0>(acc0[ms]") != std::string::npos) == s.wgmma);
    // The model: the GEMM's 2 M N K FLOPs on tensor cores, at the int8 rate of the hardware table.
    CHECK(kc.cost.flops_tensor == Approx(2.0 * 8192 * 8192 * 8192));
    CHECK(kc.cost.t_tensor == Approx(kc.cost.flops_tensor / (*hw.tensor_rate(DType::int8) * kc.cost.tensor_fraction) / kc.cost.wave_efficiency));
  }
}

TEST_CASE("the int8 atom comes from the hardware table: without its row, no tensor-core GEMM, and the reason", "[derive][lower][int8]") {
  const Hardware a100 = load_hardware("a100");
  Hardware hw = a100;
  hw.mma.erase(std::remove_if(hw.mma.begin(), hw.mma.end(), [](const MmaShape& m) { return m.dtype == DType::int8; }), hw.mma.end());
  LoadedDiagram l = int8_gemm("j,k", {{"i", 512}, {"j", 512}, {"k", 512}});
  // The gemm form the A100 lowers, checked against the table without the row: refused, and why.
  const Derivation full = derive(*l.program, *l.diagram, l.sizes, a100);
  const KernelSpec& fs = *only_kernel(full).cost.spec;
  REQUIRE(fs.gemm);
  std::string why;
  CHECK(gemm_mma_sync_stages(*fs.gemm, a100, why) == fs.stages);
  CHECK(gemm_mma_sync_stages(*fs.gemm, hw, why) == 0);
  CHECK(why == "no m16n8 mma.sync with 32 bytes of K per row and s32 accumulate for int8 in the hardware's [[mma]] table");
  // Derived on that table: no kernel on tensor cores, none priced on them.
  const Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
  for (const auto& kc : dv.chosen.kernels) {
    INFO(describe_spec(*kc.cost.spec));
    CHECK_FALSE(kc.cost.spec->tensor_cores());
    CHECK(kc.cost.flops_tensor == 0);
  }
}

TEST_CASE("without the table's int8 wgmma row the H100 keeps the int8 mma.sync path alone, and says why", "[derive][lower][int8]") {
  Hardware hw = load_hardware("h100");
  hw.mma.erase(std::remove_if(hw.mma.begin(), hw.mma.end(), [](const MmaShape& m) { return m.dtype == DType::int8 && m.scope == "warpgroup"; }),
               hw.mma.end());
  LoadedDiagram l = int8_gemm("j,k", {{"i", 1024}, {"j", 1024}, {"k", 1024}});
  const Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
  const KernelSpec& s = *only_kernel(dv).cost.spec;
  REQUIRE(s.strategy == Strategy::gemm);
  CHECK(s.mma_sync);
  CHECK_FALSE(s.wgmma);
  CHECK(s.why_no_wgmma == "no warpgroup MMA for int8 in the hardware description");
  CHECK_FALSE(only_kernel(dv).cost.warpgroup_mma);  // priced as the mma.sync kernel emitted
}

TEST_CASE("an MN-major int8 operand: the mma.sync atom is refused with its reason and the kernel priced as emitted", "[derive][lower][int8]") {
  const std::string file = std::string(NAPKIN_SOURCE_DIR) + "/tests/kernels/gemm_int8_mn_major.napkin";
  const std::string schedule = std::filesystem::temp_directory_path().string() + "/napkin-int8-mn-" + std::to_string(getpid()) + ".schedule";
  std::ofstream(schedule) << "schedule s for gemm_int8_mn_major\n  kernel C\n    fuse C\n    group i by 128\n    group j by 128\n    stream k by 128\n    warps 8\n";
  const RunResult d = run_napkin("derive " + file + " --hw a100 --schedule " + schedule);
  INFO(d.output);
  CHECK(d.status == 0);
  CHECK(d.output.find("lowered to                     simt") != std::string::npos);  // priced as the SIMT kernel it lowers to
  const std::string why = "int8 mma.sync fragments are loaded by ldmatrix without .trans (it transposes 16-bit elements only): both operands K-major; "
                          "B is stored j-major (j innermost, not k)";
  CHECK(d.output.find(why) != std::string::npos);
  // What is emitted is what was priced: no MMA in the CUDA, int8 loads in the SIMT kernel.
  const RunResult e = run_napkin("emit " + file + " --hw a100 --target cuda --schedule " + schedule + " -o -");
  std::filesystem::remove(schedule);
  CHECK(e.status == 0);
  CHECK(e.output.find("napkin::mma_m16n8k32_int8(") == std::string::npos);
  CHECK(e.output.find("// strategy simt") != std::string::npos);
  CHECK(e.output.find("B is stored j-major") != std::string::npos);  // the reason, beside the kernel
  CHECK(e.output.find("const int8_t* A;") != std::string::npos);
}

TEST_CASE("emit --target cuda stores int8 where the hardware has int8 tensor cores, and refuses it elsewhere", "[emit][cuda][int8]") {
  Hardware hw = load_hardware("a100");
  LoadedDiagram l = int8_gemm("j,k", {{"i", 256}, {"j", 256}, {"k", 256}});
  const Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
  const std::string cu = emit_cuda(*l.program, *l.diagram, dv, hw);
  CHECK(cu.find("__device__ __forceinline__ float to_f(int8_t x)") != std::string::npos);  // int8.cuh, in int8 files only
  hw.tensor_flops_per_s.erase(DType::int8);
  CHECK_THROWS_WITH(emit_cuda(*l.program, *l.diagram, dv, hw), Catch::Contains("A100") && Catch::Contains("has no int8 tensor cores"));
  cuda::EmitOptions ref;  // reference mode stores fp32 everywhere: no int8 to refuse
  ref.reference = true;
  CHECK_NOTHROW(emit_cuda(*l.program, *l.diagram, dv, hw, ref));
  // A file without int8 keeps its text: no int8 conversions, no int8 atom.
  LoadedDiagram b = load_text("diagram g\naxis i = 256\naxis j = 256\naxis k = 256\nin A[i,k] : bf16\nin B[j,k] : bf16\nC[i,j] = contract(A, B; k)\nout C : bf16\n");
  const Hardware a100 = load_hardware("a100");
  const std::string bcu = emit_cuda(*b.program, *b.diagram, derive(*b.program, *b.diagram, b.sizes, a100), a100);
  CHECK(bcu.find("int8_t") == std::string::npos);
  CHECK(bcu.find("mma_m16n8k32_int8") == std::string::npos);
}

TEST_CASE("the int8 GEMM's CUDA and pseudocode match their golden files", "[emit][cuda][int8][golden]") {
  const Hardware a100 = load_hardware("a100");
  LoadedDiagram l = load_library(std::string(NAPKIN_SOURCE_DIR) + "/tests/kernels/gemm_int8.napkin");
  const Derivation dv = derive(*l.program, *l.diagram, l.sizes, a100);
  const std::string cu = emit_cuda(*l.program, *l.diagram, dv, a100);
  CHECK(cu.find("napkin::mma_m16n8k32_int8(acc0[mt][nt]") != std::string::npos);
  CHECK(cu.find("int32_t acc0[MT][NT][4] = {};") != std::string::npos);
  CHECK(cu.find("napkin::frag_a8(") != std::string::npos);
  CHECK(cu.find("static_cast<float>(acc0[mt][nt][h * 2 + q])") != std::string::npos);
  check_golden("cuda/gemm_int8.cu", cu);
  check_golden("pseudo/gemm_int8.txt", emit_pseudo(*l.program, *l.diagram, dv, a100));
}
