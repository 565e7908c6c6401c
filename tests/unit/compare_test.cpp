// napkin compare --measure without a GPU: option parsing, the no-GPU error before any output, the
// rule for which rows are measured (kernels/gpu_probe.hpp), the "not measured" reasons
// (cli/compare_measure.hpp), the diagram retyped to a row's dtype, the tolerance per dtype, the
// harness's fp8 arrays, and the table, CSV and SVG with measured columns from given numbers.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>

#include "cli/compare_measure.hpp"
#include "cli/compare_report.hpp"
#include "derive/derivation.hpp"
#include "diagrams/files.hpp"
#include "lower/options.hpp"
#include "tests/support/run.hpp"

using namespace napkin;
using namespace napkin::test;
using napkin::cli::CompareRow;
using napkin::cli::Measured;
namespace fs = std::filesystem;

namespace {
std::string lib(const std::string& f) { return std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/" + f; }
std::string scratch(const std::string& name) {
  auto p = fs::temp_directory_path() / ("napkin-compare-" + name + "-" + std::to_string(getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}
bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
// Devices as their drivers report them (cuDeviceGetName, compute capability, SMs, cuDeviceTotalMem).
const GpuInfo kH100{"NVIDIA H100 80GB HBM3", 9, 0, 132, 85520809984ull};
const GpuInfo kH100Pcie{"NVIDIA H100 PCIe", 9, 0, 114, 85520809984ull};
const GpuInfo kH200{"NVIDIA H200", 9, 0, 132, 150754820096ull};
const GpuInfo kA100{"NVIDIA A100-SXM4-80GB", 8, 0, 108, 85198045184ull};
const GpuInfo kA100Mig{"NVIDIA A100-SXM4-80GB MIG 3g.40gb", 8, 0, 42, 42314694656ull};

CompareRow predicted_row(const Hardware& h, const std::string& dtype) {
  CompareRow r;
  r.hw = h.name, r.dtype = dtype, r.ok = true, r.kernels = 1, r.seconds = 1e-4, r.flops = 1e11, r.bound = "tensor";
  return r;
}
}  // namespace

TEST_CASE("compare's measuring options need --measure and --runs keeps napkin bench's range", "[compare][cli]") {
  const std::string dir = scratch("options");
  for (const char* opt : {"--runs 30", "--workdir x", "--nvcc nvcc"}) {
    auto r = run_napkin("compare " + lib("matmul.napkin") + " --hw h100 --dtype bf16 " + opt + " -o " + dir + "/c");
    INFO(opt << ": " << r.output);
    CHECK(r.status == 1);
    CHECK(has(r.output, "requires --measure"));
  }
  auto few = run_napkin("compare " + lib("matmul.napkin") + " --hw h100 --dtype bf16 --measure --runs 5 -o " + dir + "/c");
  CHECK(few.status == 1);
  CHECK(has(few.output, "--runs"));
  CHECK_FALSE(fs::exists(dir + "/c.csv"));
}

TEST_CASE("compare --measure without a GPU fails with a clear error before writing anything", "[compare][cli]") {
  const std::string dir = scratch("nogpu");
  // CUDA_VISIBLE_DEVICES= hides every GPU where there is one, so that this holds on any machine.
  auto r = run_shell("cd " + dir + " && CUDA_VISIBLE_DEVICES= " + NAPKIN_BIN + " compare " + lib("attention.napkin") +
                     " --hw h100 --dtype bf16,fp8e4m3 --measure -o " + dir + "/cmp");
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(has(r.output, "napkin: error: no GPU found: "));
  CHECK_FALSE(has(r.output, "hardware"));  // no table either
  CHECK_FALSE(fs::exists(dir + "/cmp.csv"));
  CHECK_FALSE(fs::exists(dir + "/cmp.svg"));
  CHECK(fs::is_empty(dir));  // no work folder
}

TEST_CASE("compare --measure on a (stand-in) H100: rows of other hardware and dtypes say why, a failed build is a failed row", "[compare][cli]") {
  const std::string dir = scratch("fake");
  write_file_atomic(dir + "/nvcc", "#!/bin/sh\n[ \"$1\" = --version ] && exit 0\necho 'fake nvcc: no compiler here' >&2\nexit 1\n");
  fs::permissions(dir + "/nvcc", fs::perms::owner_all);
  const std::string env = "cd " + dir + " && LD_LIBRARY_PATH=" + NAPKIN_FAKE_LIBCUDA_DIR + " ";
  const std::string cmd = std::string(NAPKIN_BIN) + " compare " + lib("matmul.napkin") + " --set a=64 --set b=64 --set c=64 --hw h100,h200 --dtype bf16,int4 --measure";
  auto r = run_shell(env + cmd + " --nvcc " + dir + "/nvcc --workdir " + dir + "/work -o " + dir + "/cmp");
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(has(r.output, "napkin compare --measure: GPU NVIDIA H100 80GB HBM3 (cc 9.0, 132 SMs, 79.6 GiB)"));
  CHECK(has(r.output, "fake nvcc: no compiler here"));  // the failed step's whole message, on stderr
  CHECK(has(r.output, "; failed: nvcc failed (exit status 1): "));
  CHECK(has(r.output, "; not measured: H200 has 131.3 GiB of HBM, the GPU here is NVIDIA H100 80GB HBM3"));
  CHECK(has(r.output, "  H100-SXM5        int4      not measured: "));
  CHECK(has(r.output, "a measured row was WRONG or failed: exit status 1"));
  const std::string csv = slurp(dir + "/cmp.csv");
  CHECK(has(csv, ",failed,,\n"));
  CHECK(has(csv, "H200,bf16,"));
  CHECK(has(slurp(dir + "/cmp.svg"), "failed: nvcc failed"));
  CHECK_FALSE(fs::exists(dir + "/work/h100-bf16"));  // the failed row's work folder is removed, as bench's is

  auto none = run_shell(env + "FAKE_LIBCUDA_NO_DEVICE=1 " + cmd + " -o " + dir + "/none");
  CHECK(none.status == 1);
  CHECK(has(none.output, "napkin: error: no GPU found: cuInit failed: no CUDA-capable device is detected (CUresult 100)"));
  auto no_nvcc = run_shell(env + cmd + " --nvcc " + dir + "/absent/nvcc -o " + dir + "/none");
  CHECK(no_nvcc.status == 1);
  CHECK(has(no_nvcc.output, "--measure builds the kernels with nvcc, but '" + dir + "/absent/nvcc --version' failed"));
  CHECK_FALSE(fs::exists(dir + "/none.csv"));
  CHECK_FALSE(fs::exists(dir + "/none.svg"));
}

TEST_CASE("a hardware description is of the GPU present when its arch, SM count and memory match", "[compare]") {
  const Hardware h100 = load_hardware("h100"), h200 = load_hardware("h200"), a100 = load_hardware("a100");
  CHECK_FALSE(gpu_mismatch(h100, kH100));
  CHECK_FALSE(gpu_mismatch(h200, kH200));
  CHECK_FALSE(gpu_mismatch(a100, kA100));
  const auto mem = gpu_mismatch(h200, kH100);  // same arch and SMs: the memory tells them apart
  REQUIRE(mem);
  CHECK(has(*mem, "H200 has 131.3 GiB of HBM, the GPU here is NVIDIA H100 80GB HBM3 (cc 9.0, 132 SMs, 79.6 GiB)"));
  CHECK(gpu_mismatch(h100, kH200));
  const auto sms = gpu_mismatch(h100, kH100Pcie);
  REQUIRE(sms);
  CHECK(has(*sms, "H100-SXM5 has 132 SMs, the GPU here is NVIDIA H100 PCIe (cc 9.0, 114 SMs"));
  const auto arch = gpu_mismatch(a100, kH100);
  REQUIRE(arch);
  CHECK(has(*arch, "is sm_80, the GPU here is NVIDIA H100"));
  CHECK(gpu_mismatch(a100, kA100Mig));  // a MIG slice is not the whole GPU the description prices
  CHECK(arch_compute_capability("sm_90a") == 90);
  CHECK(arch_compute_capability("sm_80") == 80);
  CHECK(arch_compute_capability("sm_100a") == 100);
  CHECK_FALSE(arch_compute_capability("sm_"));
  CHECK_FALSE(arch_compute_capability("gfx90a"));
  CHECK_FALSE(arch_compute_capability("sm_90ab"));
  CHECK(cli::gencode_for("sm_90a") == "-gencode=arch=compute_90a,code=sm_90a");
  CHECK(cli::gencode_for("sm_80") == "-gencode=arch=compute_80,code=sm_80");
}

TEST_CASE("rows that are not measured say why: another GPU, no prediction, a dtype the emitter cannot store", "[compare]") {
  const auto l = load_library("matmul.napkin");
  SizeMap sizes = l.sizes;
  sizes["a"] = 256, sizes["b"] = 256, sizes["c"] = 256;
  const Hardware h100 = load_hardware("h100"), a100 = load_hardware("a100"), h200 = load_hardware("h200");
  auto why = [&](const CompareRow& r, const Hardware& h, DType dt, const GpuInfo& gpu) {
    return cli::why_not_measured(r, *l.program, *l.diagram, sizes, h, dt, gpu);
  };
  CHECK_FALSE(why(predicted_row(h100, "bf16"), h100, DType::bf16, kH100));  // measured
  CHECK_FALSE(why(predicted_row(h100, "fp8e4m3"), h100, DType::fp8e4m3, kH100));
  CHECK_FALSE(why(predicted_row(h100, "fp32"), h100, DType::fp32, kH100));
  const auto other = why(predicted_row(h200, "bf16"), h200, DType::bf16, kH100);
  REQUIRE(other);
  CHECK(has(*other, "H200 has 131.3 GiB of HBM"));
  CompareRow int4 = predicted_row(h100, "int4");
  int4.ok = false, int4.note = "no int4 tensor cores on H100-SXM5";
  CHECK(why(int4, h100, DType::int4, kH100) == int4.note);
  // A prediction the emitter cannot follow (forced here: int4 is not stored by the CUDA emitter).
  const auto emitter = why(predicted_row(h100, "int4"), h100, DType::int4, kH100);
  REQUIRE(emitter);
  CHECK(has(*emitter, "int4"));
  CHECK(has(*emitter, "not supported"));
  // fp8 on an sm_80 GPU: the A100's description has no fp8 tensor cores, and the emitter says so.
  const auto fp8 = why(predicted_row(a100, "fp8e4m3"), a100, DType::fp8e4m3, kA100);
  REQUIRE(fp8);
  CHECK(has(*fp8, "A100-SXM4-80GB has no fp8e4m3 tensor cores"));
}

TEST_CASE("the diagram retyped to a row's dtype is priced as compare prices the row", "[compare]") {
  for (const char* file : {"matmul.napkin", "attention.napkin"}) {
    const auto l = load_library(file);
    SizeMap sizes = l.sizes;
    for (auto& [axis, n] : sizes) n = std::min<std::int64_t>(n, 256);
    const Hardware h = load_hardware("h100");
    for (DType dt : {DType::bf16, DType::fp8e4m3, DType::fp32}) {
      INFO(file << " " << dtype_name(dt));
      ModelOptions opt;
      opt.dtype = dt;
      const Diagram typed = stored_as(*l.diagram, opt);
      for (const auto* in : typed.inputs()) CHECK(in->dtype == dt);
      // 8 bits or fewer: outputs in bf16 (the quantized storage rule); else every array in dt.
      for (const auto* o : typed.outputs()) CHECK(o->dtype == (dtype_bits(dt) <= 8 ? DType::bf16 : dt));
      const Derivation want = derive(*l.program, *l.diagram, sizes, h, opt);
      const Derivation got = derive(*l.program, typed, sizes, h);
      CHECK(got.chosen.cost.t_total == want.chosen.cost.t_total);
      CHECK(got.chosen.cost.hbm_bytes == want.chosen.cost.hbm_bytes);
      CHECK(got.chosen.kernels.size() == want.chosen.kernels.size());
    }
    CHECK(stored_as(*l.diagram, ModelOptions{}) == *l.diagram);
  }
}

TEST_CASE("a quantized override stores inputs in the low type, outputs and intermediates in bf16", "[compare][storage]") {
  const auto l = load_text(
      "diagram d\naxis a = 64\naxis b = 32\naxis c = 48\nin A[a,b] : bf16\nin B[b,c] : bf16\nin I[a] : int32\n"
      "Bt[c,b] = B\nT[a,c] = contract(A, Bt; b)\nC[a,c] : fp32 = T * 2\nout C : fp32\n");
  const Diagram& d = *l.diagram;
  for (DType q : {DType::fp8e4m3, DType::fp8e5m2, DType::int8, DType::int4}) {
    INFO(dtype_name(q));
    ModelOptions opt;
    opt.dtype = q;
    CHECK(quantized_override(opt));
    CHECK(storage_dtype(d, "A", opt) == q);
    CHECK(storage_dtype(d, "B", opt) == q);
    CHECK(storage_dtype(d, "Bt", opt) == q);  // a copy of an input (a relayout) is stored as the input
    CHECK(storage_dtype(d, "I", opt) == DType::int32);
    CHECK(storage_dtype(d, "T", opt) == DType::bf16);
    CHECK(storage_dtype(d, "C", opt) == DType::bf16);  // labelled fp32 and the output: bf16
    const Diagram typed = stored_as(d, opt);
    CHECK(typed.find_input("A")->dtype == q);
    CHECK(typed.outputs().front()->dtype == DType::bf16);
    CHECK(*typed.find_statement("C")->dtype == DType::bf16);
  }
  for (DType wide : {DType::bf16, DType::fp16, DType::fp32}) {
    INFO(dtype_name(wide));
    ModelOptions opt;
    opt.dtype = wide;
    CHECK(!quantized_override(opt));
    for (const char* a : {"A", "Bt", "T", "C"}) CHECK(storage_dtype(d, a, opt) == wide);
    CHECK(storage_dtype(d, "I", opt) == DType::int32);
  }
  CHECK(!quantized_override(ModelOptions{}));
  CHECK(storage_dtype(d, "C", ModelOptions{}) == DType::fp32);
  CHECK(storage_dtype(d, "T", ModelOptions{}) == DType::fp32);  // unlabelled: the first output's
}

TEST_CASE("the check's tolerance follows the dtype and the harness stores fp8 arrays", "[compare][bench]") {
  CHECK(check_tolerance(DType::fp32) == 2e-2);
  CHECK(check_tolerance(DType::bf16) == 2e-2);
  CHECK(check_tolerance(DType::fp16) == 2e-2);
  CHECK(check_tolerance(DType::fp8e4m3) == 0.125);
  CHECK(check_tolerance(DType::fp8e5m2) == 0.25);
  const auto l = load_library(std::string(NAPKIN_SOURCE_DIR) + "/tests/kernels/gemm_fp8.napkin");
  const std::string spec = bench_spec(*l.program, *l.diagram, l.sizes);
  CHECK(has(spec, "{\"A\", 3, "));  // fp8e4m3: code 3
  CHECK(has(spec, "{\"C\", 1, "));
  CHECK(has(spec, "kNumGemms = 0;"));  // the cuBLAS baseline is 16-bit: an fp8 contraction is not one of its problems
  ModelOptions e5m2;
  e5m2.dtype = DType::fp8e5m2;
  CHECK(has(bench_spec(*l.program, stored_as(*l.diagram, e5m2), l.sizes), "{\"B\", 4, "));
  ModelOptions int8;
  int8.dtype = DType::int8;
  CHECK(has(bench_spec(*l.program, stored_as(*l.diagram, int8), l.sizes), "{\"A\", 6, "));  // int8: code 6
  ModelOptions int4;
  int4.dtype = DType::int4;
  CHECK_THROWS_WITH(bench_spec(*l.program, stored_as(*l.diagram, int4), l.sizes), Catch::Contains("not int4"));
  const auto fp32 = load_text("diagram d\naxis a = 64\naxis b = 32\naxis c = 48\nin A[a,b] : fp32\nin B[b,c] : fp32\nC[a,c] = contract(A, B; b)\nout C : fp32\n");
  CHECK(has(bench_spec(*fp32.program, *fp32.diagram, fp32.sizes), "kNumGemms = 0;"));  // fp32 buffers are not the baseline's 2-byte ones
}

namespace {
/** A predicted row with made-up figures. */
CompareRow row(const std::string& hw, const std::string& dtype, double seconds, double hbm, double l2) {
  CompareRow r;
  r.hw = hw, r.dtype = dtype, r.ok = true, r.bound = "tensor", r.kernels = 1, r.seconds = seconds, r.flops = 550e9, r.hbm = hbm, r.l2 = l2;
  return r;
}
/** Rows of every kind, with made-up figures. */
std::vector<CompareRow> sample_rows() {
  CompareRow bf16 = row("H100-SXM5", "bf16", 800e-6, 3.2e9, 40e9);
  bf16.measure = Measured::measured, bf16.measured_s = 850e-6, bf16.max_rel_err = 3.1e-3, bf16.tolerance = 2e-2;
  CompareRow fp8 = row("H100-SXM5", "fp8e4m3", 450e-6, 1.6e9, 20e9);
  fp8.measure = Measured::wrong, fp8.measured_s = 400e-6, fp8.max_rel_err = 0.5, fp8.tolerance = 0.125;
  CompareRow h200 = row("H200", "bf16", 700e-6, 3.2e9, 40e9);
  h200.measure = Measured::not_measured, h200.measure_note = "H200 has 131.3 GiB of HBM, the GPU here is NVIDIA H100 80GB HBM3 (cc 9.0, 132 SMs, 79.6 GiB)";
  CompareRow int4;
  int4.hw = "H100-SXM5", int4.dtype = "int4", int4.note = "no int4 tensor cores on H100-SXM5";
  int4.measure = Measured::not_measured, int4.measure_note = int4.note;
  CompareRow failed = row("H100-SXM5", "fp16", 800e-6, 3.2e9, 40e9);
  failed.measure = Measured::failed, failed.measure_note = "nvcc failed (exit status 1): nvcc -O3 ...";
  return {bf16, fp8, h200, int4, failed};
}
}  // namespace

TEST_CASE("compare's table, CSV and SVG show measured beside predicted, from given figures", "[compare][golden]") {
  const auto rows = sample_rows();
  const std::string table = cli::compare_table(rows, "attention");
  INFO(table);
  CHECK(has(table, "measured"));
  CHECK(has(table, "  H100-SXM5        bf16            1      800.0 us       688      850.0 us       647     -6%"));
  CHECK(has(table, "WRONG: max|err| / max|ref| = 5.00e-01 > tolerance 1.25e-01"));
  CHECK(has(table, "  H100-SXM5        int4      not measured: no int4 tensor cores on H100-SXM5\n"));
  CHECK(has(table, "; not measured: H200 has 131.3 GiB of HBM"));
  CHECK(has(table, "; failed: nvcc failed"));
  const std::string csv = cli::compare_csv(rows);
  CHECK(has(csv, "note,measured_us,measured_tflops,model_error,check,max_err_over_max_ref,tolerance\n"));
  CHECK(has(csv, "H100-SXM5,bf16,1,800.000,687.50,\"tensor\",3200000000,40000000000,\"\",850.000,647.06,-0.0588,ok,3.100e-03,2.000e-02\n"));
  CHECK(has(csv, ",\"not measured: no int4 tensor cores on H100-SXM5\",,,,not measured,,\n"));
  CHECK(has(csv, ",\"WRONG: max|err| / max|ref| = 5.00e-01 > tolerance 1.25e-01\",400.000,"));
  check_golden("compare/measured.svg", cli::compare_chart(rows, "napkin compare: attention"));
  check_golden("compare/measured.csv", csv);
  // Without --measure the outputs keep their columns and the chart its single bars.
  std::vector<CompareRow> plain = rows;
  for (auto& r : plain) r.measure = Measured::off;
  CHECK(cli::compare_csv(plain).substr(0, cli::compare_csv(plain).find('\n')) ==
        "hardware,dtype,kernels,predicted_us,tflops,bound,hbm_bytes,l2_to_smem_bytes,note");
  CHECK_FALSE(has(cli::compare_chart(plain, "t"), "measured"));
  CHECK_FALSE(has(cli::compare_table(plain, "t"), "measured"));
  CHECK(has(cli::compare_table(plain, "t"), "  H100-SXM5        int4      no int4 tensor cores on H100-SXM5\n"));
}
