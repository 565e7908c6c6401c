// CI compile checks of the CUDA emitter (no GPU needed): every bundled diagram's emitted .cu
// matches its golden file (tests/golden/cuda/), compiles with nvcc for sm_80 and sm_90a, and its
// PTX holds the instructions the chosen strategy promises (mma.sync m16n8k16, ldmatrix, cp.async
// for tensor-core kernels). The GPU runs are `napkin bench` on the device (docs/benchmarks.md).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <unistd.h>

#include "derive/check_schedule.hpp"
#include "derive/derivation.hpp"
#include "derive/search.hpp"
#include "emit/cuda_emitter.hpp"
#include "tests/support/run.hpp"

using namespace napkin;
using namespace napkin::test;

namespace {

/** nvcc -ptx for `arch`; REQUIREs success and returns the PTX. */
std::string ptx_of(const std::string& cu, const std::string& arch, const std::string& dir) {
  const std::string ptx = dir + "/" + arch + ".ptx";
  const std::string num = arch.substr(3);
  const std::string cmd = std::string(NAPKIN_NVCC) + " -std=c++17 -O3 -ptx -arch=compute_" + num + " -o " + ptx + " " + cu + " > " + dir + "/nvcc.log 2>&1";
  INFO(cmd << "\n" << slurp(dir + "/nvcc.log"));
  REQUIRE(std::system(cmd.c_str()) == 0);
  CHECK(slurp(dir + "/nvcc.log").find("warning") == std::string::npos);
  return slurp(ptx);
}

}  // namespace

TEST_CASE("every bundled diagram's CUDA matches its golden file", "[emit][cuda]") {
  Hardware hw = load_hardware("h100");
  for (const auto& path : library_files()) {
    INFO(path);
    LoadedDiagram l = load_library(path);
    Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
    check_golden("cuda/" + std::filesystem::path(path).stem().string() + ".cu", emit_cuda(*l.program, *l.diagram, dv, hw));
  }
}

// Needs nvcc of CUDA 12.0 or later (tests/CMakeLists.txt); reported as skipped without it.
TEST_CASE("every bundled diagram's CUDA compiles for sm_80 and sm_90a (needs nvcc 12.0+)", "[emit][cuda][nvcc]") {
  if (std::string(NAPKIN_NVCC).empty()) {
    skip_test(NAPKIN_NVCC_MISSING);
    return;
  }
  Hardware hw = load_hardware("h100");
  const std::string dir = std::filesystem::temp_directory_path().string() + "/napkin-cuda-test-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  int tensor_core_kernels = 0, compiled = 0, hopper_variants = 0;
  for (const auto& path : library_files()) {
    const std::string stem = std::filesystem::path(path).stem().string();
    INFO(path);
    LoadedDiagram l = load_library(path);
    Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
    const std::string text = emit_cuda(*l.program, *l.diagram, dv, hw);
    const std::string cu = dir + "/" + stem + ".cu";
    std::ofstream(cu) << text;
    const int mma_kernels = static_cast<int>(count(text, "// strategy gemm") + count(text, "// strategy flash"));
    const int wgmma_variants = static_cast<int>(count(text, "// wgmma variant (sm_90a)"));
    tensor_core_kernels += mma_kernels;
    hopper_variants += wgmma_variants;
    for (const std::string arch : {"sm_80", "sm_90a"}) {
      const std::string ptx = ptx_of(cu, arch, dir);
      ++compiled;
      CHECK(count(ptx, ".entry") >= dv.chosen.kernels.size());
      if (mma_kernels > 0) {
        CHECK(count(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") > 0);
        CHECK(count(ptx, "ldmatrix.sync.aligned.m8n8.x4") > 0);
        CHECK(count(ptx, "cp.async.cg.shared.global") > 0);
      } else {
        CHECK(count(ptx, "mma.sync") == 0);
      }
      // The sm_90a variants: wgmma on SMEM descriptors fed by TMA, registers moved by setmaxnreg;
      // none of it in the sm_80 PTX (the launcher falls back to mma.sync there).
      if (arch == "sm_90a" && wgmma_variants > 0) {
        CHECK(count(ptx, "wgmma.mma_async.sync.aligned.m64n") >= static_cast<std::size_t>(wgmma_variants));
        CHECK(count(ptx, "cp.async.bulk.tensor") > 0);
        CHECK(count(ptx, "mbarrier.try_wait.parity") > 0);
        CHECK(count(ptx, "setmaxnreg.inc") > 0);
        // GEMM kernels in clusters of two (the H100 has clusters): multicast loads, remote arrivals.
        const std::size_t clustered = count(text, "NAPKIN_CLUSTER_DIMS(CLUSTER)");
        CHECK((clustered > 0) == (count(ptx, ".multicast::cluster") > 0));
        CHECK((clustered > 0) == (count(ptx, "mapa.shared::cluster") > 0));
      } else {
        CHECK(count(ptx, "wgmma.mma_async") == 0);
      }
    }
  }
  // The tensor-core strategies cover the matmul family and the three attention diagrams.
  CHECK(tensor_core_kernels >= 8);
  // Every gemm kernel of the matmul family has its wgmma variant on the H100 description.
  CHECK(hopper_variants >= 5);
  CHECK(compiled == 2 * static_cast<int>(library_files().size()));
  std::filesystem::remove_all(dir);
}

// Reference mode (fp32, SIMT and rows kernels: the GPU check `napkin bench` builds beside the
// derived kernels) through ptxas: session 10's rows kernels called pack2<float> there, which the
// PTX-only checks above let through and only ptxas reports (an unresolved extern).
TEST_CASE("every bundled diagram's reference-mode CUDA builds to an sm_90a cubin (needs nvcc 12.0+)", "[emit][cuda][nvcc]") {
  if (std::string(NAPKIN_NVCC).empty()) {
    skip_test(NAPKIN_NVCC_MISSING);
    return;
  }
  Hardware hw = load_hardware("h100");
  const std::string dir = std::filesystem::temp_directory_path().string() + "/napkin-cuda-ref-test-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  int built = 0;
  for (const auto& path : library_files()) {
    INFO(path);
    LoadedDiagram l = load_library(path);
    Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
    Derivation unf = dv;
    unf.chosen = dv.unfused;
    cuda::EmitOptions o;
    o.prefix = "ref_";
    o.reference = true;
    const std::string cu = dir + "/" + std::filesystem::path(path).stem().string() + "_ref.cu";
    std::ofstream(cu) << emit_cuda(*l.program, *l.diagram, unf, hw, o);
    const std::string cmd = std::string(NAPKIN_NVCC) + " -std=c++17 -O1 -cubin -arch=sm_90a -o " + dir + "/ref.cubin " + cu + " > " + dir + "/nvcc.log 2>&1";
    INFO(cmd << "\n" << slurp(dir + "/nvcc.log"));
    CHECK(std::system(cmd.c_str()) == 0);
    ++built;
  }
  CHECK(built == static_cast<int>(library_files().size()));
  std::filesystem::remove_all(dir);
}

// The language's additions (windowed causal and band masks, pos, abs, pow, element-wise min and
// max: tests/language) in every strategy their diagrams derive to, through nvcc.
TEST_CASE("the language's test diagrams' CUDA compiles for sm_80 and sm_90a (needs nvcc 12.0+)", "[emit][cuda][nvcc]") {
  if (std::string(NAPKIN_NVCC).empty()) {
    skip_test(NAPKIN_NVCC_MISSING);
    return;
  }
  Hardware hw = load_hardware("h100");
  const std::string dir = std::filesystem::temp_directory_path().string() + "/napkin-cuda-language-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  int files = 0;
  for (const auto& path : napkin_files("tests/language")) {
    INFO(path);
    const std::filesystem::path e(path);
    LoadedDiagram l = load_library(path);
    Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
    const std::string text = emit_cuda(*l.program, dv.diagram(*l.diagram), dv, hw);  // as derive rewrote it
    const std::string cu = dir + "/" + e.stem().string() + ".cu";
    std::ofstream(cu) << text;
    for (const std::string arch : {"sm_80", "sm_90a"}) CHECK(count(ptx_of(cu, arch, dir), ".entry") >= dv.chosen.kernels.size());
    ++files;
  }
  CHECK(files >= 2);
  // The GPU sweep's banded GEMM (tests/gpu/banded_matmul.napkin, run on the device): the gemm walks
  // each tile's chunks inside its operand's zero band, and the element-wise statement Ab runs in
  // vectors of 8 (16-byte loads and stores).
  LoadedDiagram l = load_library(std::string(NAPKIN_SOURCE_DIR) + "/tests/gpu/banded_matmul.napkin");
  Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
  const std::string text = emit_cuda(*l.program, dv.diagram(*l.diagram), dv, hw);
  CHECK(text.find("napkin::copy_run8(run_A, a.A + ") != std::string::npos);
  CHECK(text.find("napkin::copy_run8(a.Ab + run * V, run_Ab);") != std::string::npos);
  CHECK(text.find("zero band (GemmForm::k_band)") != std::string::npos);
  std::ofstream(dir + "/banded.cu") << text;
  for (const std::string arch : {"sm_80", "sm_90a"}) CHECK(count(ptx_of(dir + "/banded.cu", arch, dir), ".entry") >= dv.chosen.kernels.size());
  std::filesystem::remove_all(dir);
}

TEST_CASE("napkin emit --target cuda: strategies per bundled diagram, calls nest the callee's kernels", "[emit][cuda]") {
  auto strategy = [](const std::string& file) {
    RunResult r = run_napkin("emit " + std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/" + file + " --target cuda");
    REQUIRE(r.status == 0);
    std::string s;
    const std::regex re("// strategy (\\w+)");
    for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), re); it != std::sregex_iterator(); ++it)
      s += (s.empty() ? "" : ",") + (*it)[1].str();
    return s;
  };
  CHECK(strategy("attention.napkin") == "flash");
  CHECK(strategy("causal_attention.napkin") == "flash");
  CHECK(strategy("gqa_attention.napkin") == "flash");
  CHECK(strategy("matmul.napkin") == "gemm");
  CHECK(strategy("mlp_swiglu.napkin") == "gemm,gemm");
  CHECK(strategy("layernorm.napkin") == "rows");
  CHECK(strategy("softmax.napkin") == "rows");
  // The transformer block: four calls (two RMSNorms, GQA attention, the SwiGLU MLP), each nesting
  // the callee's own strategies, and the projections between them.
  const std::string tb = strategy("transformer_block.napkin");
  INFO(tb);
  CHECK(count(tb, "call") == 4);
  CHECK(count(tb, "flash") == 1);
  CHECK(count(tb, "gemm") >= 2);
  CHECK(count(tb, "rows") == 2);
}

TEST_CASE("an input that is also an output is copied into its own output buffer", "[emit][cuda]") {
  // Args held the input and the output under one name (nvcc: "X has already been declared"): the
  // device sample of the soundness fuzzer found it (random diagrams output the inputs they do not read).
  LoadedDiagram l = load_library(std::string(NAPKIN_SOURCE_DIR) + "/tests/language/input_as_output.napkin");
  Hardware hw = load_hardware("h100");
  const std::string text = emit_cuda(*l.program, *l.diagram, derive(*l.program, *l.diagram, l.sizes, hw), hw);
  CHECK(count(text, "const __nv_bfloat16* X;") == 1);
  CHECK(count(text, "__nv_bfloat16* napkin_copy_of_X;") == 1);
  CHECK(count(text, "cudaMemcpyAsync(a.napkin_copy_of_X, a.X, sizeof(__nv_bfloat16) * static_cast<size_t>(a.N_t) * static_cast<size_t>(a.N_m)") == 1);
}

TEST_CASE("napkin emit --target cuda: a call argument the callee cannot read in place is copied before the call", "[emit][cuda]") {
  const std::string dir = std::filesystem::temp_directory_path().string() + "/napkin-call-test-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/c.napkin") << "import \"" << NAPKIN_SOURCE_DIR << "/diagrams/library/rmsnorm.napkin\"\n"
                                   << "diagram c\naxis t = 64\naxis m = 128\nin X[t,m] : bf16\nin W[m] : bf16\n"
                                   << "Y[t,m] = rmsnorm_layer(X * 2, W)\nout Y : bf16\n";
  RunResult r = run_napkin("emit " + dir + "/c.napkin --target cuda");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("c.X = a.Y__arg1;  // copied: an expression") != std::string::npos);
  CHECK(r.output.find("a.Y__arg1[idx] = napkin::from_f<__nv_bfloat16>(") != std::string::npos);
  RunResult d = run_napkin("derive " + dir + "/c.napkin --hw h100");
  INFO(d.output);
  CHECK(d.output.find("after 1 SIMT copy of its arguments (argument 1, an expression)") != std::string::npos);
  std::filesystem::remove_all(dir);
}

namespace {

/** `dv`'s schedule with its gemm kernels ping-ponged (`warps 8 pingpong`, M grouped by `tm`, N by
 *  `tn` where N is grouped), checked and derived again on `hw`. */
Derivation pingponged(const LoadedDiagram& l, const Derivation& dv, const Hardware& hw, std::int64_t tm, std::int64_t tn, bool cluster) {
  Schedule s = dv.chosen.schedule;
  for (std::size_t k = 0; k < s.kernels.size(); ++k) {
    const KernelSpec& spec = *dv.chosen.kernels.at(k).cost.spec;
    if (!spec.gemm) continue;
    std::vector<Directive>& dirs = s.kernels[k].directives;
    std::erase_if(dirs, [](const Directive& d) { return d.kind == Directive::Kind::warps || d.kind == Directive::Kind::cluster; });
    for (auto& d : dirs)
      if (d.kind == Directive::Kind::group) d.size = d.names.at(0) == spec.gemm->M ? tm : d.names.at(0) == spec.gemm->N ? tn : d.size;
    Directive w;
    w.kind = Directive::Kind::warps, w.size = 8, w.pingpong = true;
    dirs.push_back(w);
    if (cluster) {
      Directive c;
      c.kind = Directive::Kind::cluster, c.names = {spec.gemm->M}, c.name_locs = {SourceLoc{}}, c.size = 2;
      dirs.push_back(c);
    }
  }
  SourceManager sm;
  DiagnosticEngine diags;
  auto parsed = parse_schedule(*sm.add("pingpong.schedule", print_schedule(s)), diags);
  REQUIRE(parsed);
  CHECK(print_schedule(*parsed) == print_schedule(s));  // `warps 8 pingpong` round-trips
  auto checked = check_schedule(*l.program, *l.diagram, *parsed, l.sizes, hw, {}, diags);
  INFO(diags.render());
  REQUIRE(checked);
  return derive_given(*l.program, *l.diagram, l.sizes, hw, result_of(*parsed, *checked));
}

}  // namespace

TEST_CASE("pingpong gemms: each consumer warpgroup takes whole tiles in turn, as the spec says, and compiles for sm_90a", "[emit][cuda][pingpong]") {
  const Hardware hw = load_hardware("h100");
  const std::string dir = std::filesystem::temp_directory_path().string() + "/napkin-pingpong-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  struct Case {
    std::string file;
    std::int64_t tm, tn;
    bool cluster;
    SizeMap sizes;
  };
  // GELU epilogue through TMA stores (m64 tiles, and 128-row tiles of two m64 subtiles), in a
  // cluster; a banded gemm (tiles of unequal chunks in snake order; rows and columns that divide
  // no tile, rows of Ab 1024 bytes for TMA); a residual read along both output axes in the epilogue
  // (each element's row in its tile, not in the staging buffer).
  const std::vector<Case> cases{{"diagrams/library/matmul_bias_gelu.napkin", 64, 256, false, {}},
                                {"diagrams/library/matmul_bias_gelu.napkin", 128, 128, true, {}},
                                {"tests/gpu/banded_matmul.napkin", 64, 64, false, {{"k", 512}}},
                                {"tests/gpu/matmul_residual.napkin", 64, 256, false, {}}};
  int n = 0;
  for (const Case& c : cases) {
    INFO(c.file << " T_M " << c.tm << " T_N " << c.tn << (c.cluster ? " cluster" : ""));
    LoadedDiagram l = load_library(std::string(NAPKIN_SOURCE_DIR) + "/" + c.file);
    for (const auto& [axis, size] : c.sizes) l.sizes[axis] = size;
    const Derivation dv = pingponged(l, derive(*l.program, *l.diagram, l.sizes, hw), hw, c.tm, c.tn, c.cluster);
    const std::string text = emit_cuda(*l.program, *l.diagram, dv, hw);
    for (const auto& kc : dv.chosen.kernels) {
      const KernelSpec& spec = *kc.cost.spec;
      if (!spec.gemm) continue;
      INFO(describe_spec(spec));
      REQUIRE(spec.wgmma);
      CHECK(spec.gemm->pingpong);
      CHECK(spec.gemm->tile_consumers() == 1);
      CHECK(describe_spec(spec).find("(pingpong)") != std::string::npos);
      CHECK(kc.cost.warps == 8);
      // each consumer holds a whole tile's accumulators; the mma.sync path runs 4 warps on one tile
      CHECK(kc.cost.registers_per_thread >= static_cast<int>(spec.gemm->TM * spec.gemm->TN / 128));
      CHECK(text.find("constexpr int WARPS = 4,") != std::string::npos);
      CHECK(text.find("constexpr int WM = T_M, MS = WM / 64;") != std::string::npos);
      CHECK(text.find("napkin::mbar_init(&empty[s], CLUSTER * 4);") != std::string::npos);
      CHECK(text.find("if (turn % CONSUMERS != cw)") != std::string::npos);
      CHECK(count(text, "napkin::named_sync(3 + cw, 256);") == 2);  // each tile's turn, and the turn no tile took
      CHECK(text.find("napkin::named_arrive(4 - cw, 256);") != std::string::npos);
      if (spec.tma_store) {
        CHECK(text.find("constexpr int OUT_BYTES = CONSUMERS * T_M * 128,") != std::string::npos);
        CHECK(text.find("const int row0 = r0 + ms * 64 + warp * 16;") != std::string::npos);
        CHECK(text.find("const int srow = cw * WM - r0 + row0 +") != std::string::npos);
      }
      ++n;
    }
    if (std::string(NAPKIN_NVCC).empty()) continue;
    const std::string cu = dir + "/pingpong" + std::to_string(n) + ".cu";
    std::ofstream(cu) << text;
    const std::string ptx = ptx_of(cu, "sm_90a", dir);
    CHECK(count(ptx, "wgmma.mma_async") > 0);
    CHECK(count(ptx, "bar.arrive") > 0);
  }
  CHECK(n == 4);
  std::filesystem::remove_all(dir);
}

TEST_CASE("gelu and gelu_tanh: the kernels write the MUFU forms, the fp32 GPU reference CUDA's erff and tanhf", "[emit][cuda]") {
  const Hardware hw = load_hardware("h100");
  for (const std::string op : {"gelu", "gelu_tanh"}) {
    INFO(op);
    LoadedDiagram l = load_text("diagram g\naxis t = 300\naxis f = 520\nin X[t,f] : bf16\nin B[f] : bf16\nY[t,f] = " + op + "(X + B) * 2\nout Y : bf16\n");
    const Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
    const std::string text = emit_cuda(*l.program, *l.diagram, dv, hw);
    CHECK(text.find("napkin::" + op + "(") != std::string::npos);
    CHECK(text.find("napkin::" + op + "_precise(") == std::string::npos);
    Derivation unf = dv;
    unf.chosen = dv.unfused;
    cuda::EmitOptions o;
    o.prefix = "ref_";
    o.reference = true;
    const std::string ref = emit_cuda(*l.program, *l.diagram, unf, hw, o);
    CHECK(ref.find("napkin::" + op + "_precise(") != std::string::npos);
    CHECK(ref.find("napkin::" + op + "(") == std::string::npos);
  }
}
