// The fp8 attention forward (issue 17): the flash form of 8-bit float operands lowers to the wgmma
// path alone with the k32 atom from the hardware's [[mma]] table by dtype, 128 elements per swizzle
// row and 1-byte tiles; V's layout decides it by a rule (O += P V reads V K-major, so V's contracted
// axis x must be innermost: V[.., d, x]; otherwise the form is refused with the reason and the kernel
// priced as what it lowers to); the model prices the fp8 tensor rate; the emitter refuses fp8 on
// hardware without fp8 tensor cores. Goldens of tests/kernels/attention_fp8.napkin's CUDA and
// pseudocode; its CPU loop nest against the fp64 evaluator at a small size.
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

/** Attention of tests/kernels/attention_fp8.napkin with operands of `dtype` and V stored as `v_axes`
 *  (named V), at `sizes` over the diagram's. */
LoadedDiagram fp8_attention(const std::string& dtype, const std::string& v_axes, const SizeMap& sizes = {}) {
  return load_text("diagram a\naxis b = 4\naxis h = 16\naxis q = 4096\naxis x = 4096\naxis d = 128\nin Q[b,h,q,d] : " + dtype + "\nin K[b,h,x,d] : " + dtype +
                       "\nin V[" + v_axes + "] : " + dtype +
                       "\nin sq[] : fp32\nin sk[] : fp32\nin sv[] : fp32\nS[b,h,q,x] = contract(Q, K; d) * (sq * sk / sqrt(d))\nP[b,h,q,x] = softmax(S; x)\n"
                       "O[b,h,q,d] = contract(P, V; x) * sv\nout O : bf16\n",
                   sizes);
}

/** The derivation's kernel that stores O. */
const KernelChoice& o_kernel(const Derivation& dv) {
  for (const auto& kc : dv.chosen.kernels)
    for (const auto& o : kc.cost.outputs)
      if (o == "O") return kc;
  FAIL("no kernel stores O");
  return dv.chosen.kernels.front();
}

}  // namespace

TEST_CASE("fp8 attention with V's x innermost lowers to the flash form on the fp8 wgmma atom alone", "[derive][lower][fp8]") {
  const Hardware h100 = load_hardware("h100");
  for (const auto& [dtype, t, ptx] : {std::tuple{"fp8e4m3", DType::fp8e4m3, ".m64n8k32.f32.e4m3.e4m3"},
                                      std::tuple{"fp8e5m2", DType::fp8e5m2, ".m64n8k32.f32.e5m2.e5m2"}}) {
    INFO(dtype);
    LoadedDiagram l = fp8_attention(dtype, "b,h,d,x");
    const Derivation dv = derive(*l.program, *l.diagram, l.sizes, h100);
    REQUIRE(dv.chosen.kernels.size() == 1);
    const KernelChoice& kc = o_kernel(dv);
    const KernelSpec& s = *kc.cost.spec;
    INFO(describe_spec(s));
    REQUIRE(s.strategy == Strategy::flash);
    CHECK_FALSE(s.mma_sync);  // no m16n8k16 mma.sync for 8-bit floats: the wgmma path alone
    REQUIRE(s.wgmma);
    CHECK(s.wgmma_mma->dtype == t);
    CHECK(s.wgmma_mma->k == 32);
    CHECK(s.wgmma_mma->ptx.find(ptx) != std::string::npos);
    const FlashForm& f = *s.flash;
    CHECK(f.dtype == t);
    CHECK(f.v_x_inner);
    CHECK(f.dv == "d");
    CHECK(flash_swizzle_row_elems(f) == 128);
    CHECK(f.TX % 128 == 0);  // V's tile is K-major: whole 128-byte rows of keys
    // 1-byte tiles: Q, two stages of K and V, barriers and alignment.
    CHECK(s.wgmma_smem_bytes == f.TQ * f.DK + 2 * (f.TX * f.DK + f.TX * f.DV) + 1024 + 128);
    CHECK(describe_spec(s).find("no mma.sync path for " + std::string(dtype)) != std::string::npos);
    // The model prices the wgmma path at the fp8 tensor-core rate (twice bf16's on the H100; the
    // wave efficiency aside, within 5%).
    CHECK(kc.cost.warpgroup_mma);
    CHECK(kc.cost.t_tensor == Approx(kc.cost.flops_tensor / (*h100.tensor_rate(t) * kc.cost.tensor_fraction)).epsilon(0.05));
    CHECK(*h100.tensor_rate(t) == Approx(2 * *h100.tensor_rate(DType::bf16)).epsilon(1e-3));
  }
}

TEST_CASE("fp8 attention whose Vt rows TMA cannot read in place takes the flash form on a repacked copy of Vt", "[derive][lower][fp8][repack]") {
  // x = 4040: Vt[b,h,d,x] has rows of 4040 bytes, not a multiple of 16 (session 40, H200: unfused,
  // SIMT, 56094 us at b1 h4 q1000)
  const Hardware h200 = load_hardware("h200");
  LoadedDiagram l = fp8_attention("fp8e4m3", "b,h,d,x", {{"b", 1}, {"h", 4}, {"q", 1000}, {"x", 4040}});
  const Derivation dv = derive(*l.program, *l.diagram, l.sizes, h200);
  REQUIRE(dv.chosen.kernels.size() == 1);
  const KernelChoice& kc = o_kernel(dv);
  const KernelSpec& s = *kc.cost.spec;
  INFO(describe_spec(s));
  REQUIRE(s.strategy == Strategy::flash);
  REQUIRE(s.wgmma);
  REQUIRE(s.repacks.size() == 1);  // Q and K have rows of d = 128 bytes
  CHECK(s.repacks[0].array == "V");
  CHECK(s.repacks[0].pitch == 4096);
  CHECK(kc.cost.t_repack == Approx((4.0 * 128 * 4040 + 4.0 * 128 * 4096) / h200.hbm.bandwidth_bytes_per_s + h200.launch_overhead_s).epsilon(1e-9));
  const std::string cu = emit_cuda(*l.program, *l.diagram, dv, h200);
  CHECK(cu.find("napkin::pitch_copy(a." + kc.plan.name + "__pad_V, a.V,") != std::string::npos);
  CHECK(cu.find("make_tmap(&tm_V, a." + kc.plan.name + "__pad_V,") != std::string::npos);
}

TEST_CASE("fp8 attention with V's d innermost is refused the flash form with the reason and priced as emitted", "[derive][lower][fp8]") {
  // tests/kernels/attention_fp8_v_d_inner.napkin (V[b,h,x,d]) under the fused schedule the flash form takes.
  const std::string file = std::string(NAPKIN_SOURCE_DIR) + "/tests/kernels/attention_fp8_v_d_inner.napkin";
  const std::string schedule = std::filesystem::temp_directory_path().string() + "/napkin-fp8-attn-" + std::to_string(getpid()) + ".schedule";
  std::ofstream(schedule) << "schedule s for attention_fp8_v_d_inner\n  kernel S_to_O\n    fuse S, P, O\n    weave h\n    weave b\n    group q by 128\n"
                             "    stream x by 128\n    warps 8\n";
  const RunResult d = run_napkin("derive " + file + " --hw h100 --schedule " + schedule);
  INFO(d.output);
  CHECK(d.status == 0);
  CHECK(d.output.find("lowered to                     simt") != std::string::npos);  // priced as the SIMT kernel it lowers to
  CHECK(d.output.find("flash: fp8e4m3 V is stored with d innermost: O += P V contracts x, and 8-bit wgmma reads its B operand K-major only") !=
        std::string::npos);
  CHECK(d.output.find("store it as V[.., d, x] (x innermost)") != std::string::npos);
  // What is emitted is what was priced: no wgmma kernel in the CUDA, the reason beside the SIMT kernel.
  const RunResult e = run_napkin("emit " + file + " --hw h100 --target cuda --schedule " + schedule + " -o -");
  std::filesystem::remove(schedule);
  CHECK(e.status == 0);
  CHECK(e.output.find("wgmma variant") == std::string::npos);
  CHECK(e.output.find("// strategy simt") != std::string::npos);
  CHECK(e.output.find("8-bit wgmma reads its B operand K-major only") != std::string::npos);
}

TEST_CASE("16-bit attention keeps its layout rule: V with x innermost is not the 16-bit flash form", "[derive][lower][fp8]") {
  const Hardware h100 = load_hardware("h100");
  LoadedDiagram l = fp8_attention("bf16", "b,h,d,x", {{"b", 1}, {"h", 2}, {"q", 256}, {"x", 256}});
  const Derivation dv = derive(*l.program, *l.diagram, l.sizes, h100);
  for (const auto& kc : dv.chosen.kernels) CHECK(kc.cost.spec->strategy != Strategy::flash);
  LoadedDiagram b = fp8_attention("bf16", "b,h,x,d");
  const Derivation bdv = derive(*b.program, *b.diagram, b.sizes, h100);
  const KernelSpec& bs = *o_kernel(bdv).cost.spec;
  REQUIRE(bs.strategy == Strategy::flash);
  CHECK(bs.mma_sync);
  REQUIRE(bs.wgmma);
  CHECK(bs.wgmma_mma->k == 16);
  CHECK_FALSE(bs.flash->v_x_inner);
}

TEST_CASE("emit --target cuda refuses fp8 attention for hardware without fp8 tensor cores", "[emit][cuda][fp8]") {
  const Hardware a100 = load_hardware("a100");
  LoadedDiagram l = fp8_attention("fp8e4m3", "b,h,d,x", {{"b", 1}, {"h", 2}, {"q", 256}, {"x", 256}});
  const Derivation dv = derive(*l.program, *l.diagram, l.sizes, a100);
  for (const auto& kc : dv.chosen.kernels) CHECK(kc.cost.spec->strategy != Strategy::flash);
  CHECK_THROWS_WITH(emit_cuda(*l.program, *l.diagram, dv, a100), Catch::Contains("A100") && Catch::Contains("has no fp8e4m3 tensor cores"));
}

TEST_CASE("the fp8 attention's CUDA and pseudocode match their golden files", "[emit][cuda][fp8][golden]") {
  const Hardware h100 = load_hardware("h100");
  LoadedDiagram l = load_library(std::string(NAPKIN_SOURCE_DIR) + "/tests/kernels/attention_fp8.napkin");
  const Derivation dv = derive(*l.program, *l.diagram, l.sizes, h100);
  const std::string cu = emit_cuda(*l.program, *l.diagram, dv, h100);
  CHECK(cu.find("wgmma_m64n") != std::string::npos);
  CHECK(cu.find("k32_fp8e4m3_rs") != std::string::npos);      // O += P V from registers
  CHECK(cu.find("napkin::acc_to_a_fp8<T>") != std::string::npos);  // P's quad exchange into the k32 A fragment
  CHECK(cu.find("CU_TENSOR_MAP_DATA_TYPE_UINT8") != std::string::npos);
  CHECK(cu.find("napkin_fail(\"k_") != std::string::npos);  // no mma.sync fallback: a stated failure
  check_golden("cuda/attention_fp8.cu", cu);
  check_golden("pseudo/attention_fp8.txt", emit_pseudo(*l.program, *l.diagram, dv, h100));
}

TEST_CASE("the model prices fp8 attention at fp8's peak whatever input the diagram declares first", "[derive][perfmodel][fp8]") {
  const Hardware h100 = load_hardware("h100");
  // The scales first: the compute dtype is the flash form's operand dtype, not the first input's (fp32).
  LoadedDiagram l = load_text(
      "diagram a\naxis b = 4\naxis h = 16\naxis q = 4096\naxis x = 4096\naxis d = 128\nin sq[] : fp32\nin sk[] : fp32\nin sv[] : fp32\n"
      "in Q[b,h,q,d] : fp8e4m3\nin K[b,h,x,d] : fp8e4m3\nin V[b,h,d,x] : fp8e4m3\nS[b,h,q,x] = contract(Q, K; d) * (sq * sk / sqrt(d))\n"
      "P[b,h,q,x] = softmax(S; x)\nO[b,h,q,d] = contract(P, V; x) * sv\nout O : bf16\n");
  const Derivation dv = derive(*l.program, *l.diagram, l.sizes, h100);
  const KernelChoice& kc = o_kernel(dv);
  REQUIRE(kc.cost.spec->strategy == Strategy::flash);
  CHECK(kc.cost.flops_tensor > 0);
  CHECK(kc.cost.t_tensor == Approx(kc.cost.flops_tensor / (*h100.tensor_rate(DType::fp8e4m3) * kc.cost.tensor_fraction)).epsilon(0.05));
}

TEST_CASE("derive gives an fp8 V stored d-innermost a K-major copy and takes the fp8 flash form", "[derive][relayout][fp8]") {
  // diagrams/library/attention.napkin's layout (V[b,h,x,d]) in fp8e4m3, as compare --dtype fp8e4m3 derives it.
  const auto l = fp8_attention("fp8e4m3", "b,h,x,d");
  const Hardware h100 = load_hardware("h100");
  const Derivation dv = derive(*l.program, *l.diagram, l.sizes, h100);
  REQUIRE(dv.rewritten);
  const Statement* copy = dv.rewritten->find_statement("V_k");
  REQUIRE(copy);
  CHECK(copy->axes == AxisList{"b", "h", "d", "x"});
  CHECK(copy->dtype == DType::fp8e4m3);  // stored as the input it copies
  const KernelChoice& o = o_kernel(dv);
  REQUIRE(o.cost.spec);
  CHECK(o.cost.spec->strategy == Strategy::flash);
  bool step = false;
  for (const auto& s : dv.steps)
    step |= s.pass == "derive-operand-relayout" && s.move.find("V is stored d-innermost; fp8e4m3 wgmma reads K-major operands only") != std::string::npos &&
            s.move.find("transposed copy V_k[b,h,d,x] = V") != std::string::npos;
  CHECK(step);
  // The same under compare's override of a bf16 diagram (inputs fp8, O bf16).
  const auto bf = fp8_attention("bf16", "b,h,x,d");
  ModelOptions opt;
  opt.dtype = DType::fp8e4m3;
  const Derivation q = derive(*bf.program, *bf.diagram, bf.sizes, h100, opt);
  REQUIRE(q.rewritten);
  CHECK(q.rewritten->find_statement("V_k"));
  CHECK(o_kernel(q).cost.spec->strategy == Strategy::flash);
}

TEST_CASE("derive keeps the relayout decision's search: it is the search of the rewritten diagram and points into it", "[derive][relayout][fp8]") {
  const auto l = fp8_attention("fp8e4m3", "b,h,x,d");
  const Hardware h100 = load_hardware("h100");
  const Derivation dv = derive(*l.program, *l.diagram, l.sizes, h100);
  REQUIRE(dv.rewritten);
  // The flash form names the statements of the diagram it was lowered from: the one derive holds.
  const KernelChoice& o = o_kernel(dv);
  REQUIRE(o.cost.spec);
  REQUIRE(o.cost.spec->flash);
  CHECK(o.cost.spec->flash->O == dv.rewritten->find_statement("O"));
  CHECK(o.cost.spec->flash->S == dv.rewritten->find_statement("S"));
  // The same schedules and prices as a search of the rewritten diagram from scratch.
  const auto [chosen, unfused] = search_with_unfused(*l.program, *dv.rewritten, l.sizes, h100, {}, {});
  CHECK(dv.chosen.schedule == chosen.schedule);
  CHECK(dv.chosen.cost.t_total == chosen.cost.t_total);
  CHECK(dv.chosen.candidates_scored == chosen.candidates_scored);
  CHECK(dv.unfused.schedule == unfused.schedule);
  CHECK(dv.unfused.cost.t_total == unfused.cost.t_total);
}

TEST_CASE("no relayout where none is needed: 16-bit V, fp8 V with x innermost", "[derive][relayout][fp8]") {
  const Hardware h100 = load_hardware("h100");
  for (const auto& [dtype, v] : std::vector<std::pair<std::string, std::string>>{{"bf16", "b,h,x,d"}, {"fp8e4m3", "b,h,d,x"}}) {
    INFO(dtype << " V[" << v << "]");
    const auto l = fp8_attention(dtype, v);
    const Derivation dv = derive(*l.program, *l.diagram, l.sizes, h100);
    CHECK(!dv.rewritten);
    for (const auto& s : dv.steps) CHECK(s.pass != "derive-operand-relayout");
  }
}
