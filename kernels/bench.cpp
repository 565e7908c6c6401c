#include "kernels/bench.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <nlohmann/json.hpp>

#include "diagrams/eval.hpp"
#include "diagrams/files.hpp"
#include "diagrams/input_scales.hpp"
#include "diagrams/npy.hpp"
#include "emit/cuda_emitter.hpp"
#include "kernels/harness_source.hpp"
#include "kernels/process.hpp"
#include "lower/blas_problem.hpp"

namespace napkin {

namespace {

/** The harness's dtype code (kernels/bench/harness.cu): 0 fp32, 1 bf16, 2 fp16, 3 fp8e4m3, 4 fp8e5m2,
 *  5 int32, 6 int8. Raises UserError for a dtype the CUDA emitter does not store (tf32, int4). */
int dtype_code(DType t) {
  switch (t) {
    case DType::fp32: return 0;
    case DType::bf16: return 1;
    case DType::fp16: return 2;
    case DType::fp8e4m3: return 3;
    case DType::fp8e5m2: return 4;
    case DType::int32: return 5;
    case DType::int8: return 6;
    default: throw UserError(std::string("napkin bench stores fp32, bf16, fp16, fp8e4m3, fp8e5m2, int32 and int8 arrays, not ") + std::string(dtype_name(t)));
  }
}

/** The check's tolerance (max |err| / max |ref|): `given`, or for a diagram with 8-bit float inputs
 *  the unit roundoff of the narrowest, u = 2^-(mantissa bits + 1) (fp8e4m3: 3 bits, 2^-4; fp8e5m2:
 *  2^-3): its kernels round intermediates to that type before the next tensor-core product (the
 *  fp8 flash form's P), each rounded value off by at most u relative, and an output summing such
 *  values is off by at most u times the sum of their magnitudes (tests/kernels/attention_fp8.napkin). */
double input_tolerance(const Diagram& d, double given) {
  double u = 0;
  for (const auto* in : d.inputs())
    if (!is_integer_dtype(in->dtype) && dtype_bits(in->dtype) == 8) u = std::max(u, std::ldexp(1.0, -(dtype_mantissa_bits(in->dtype) + 1)));
  return std::max(given, u);
}

std::string read_all(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return {};
  std::string s;
  char buf[65536];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
  std::fclose(f);
  return s;
}

/** max |got - want| and max |want| over the elements where both are finite, and the count of the
 *  others where they differ (a non-finite value matches only the same one: -inf of a row masked
 *  throughout in both, NaN in both). The harness's compare() applies the same rule on the GPU. */
struct ElementwiseDiff {
  double max_err = 0, max_ref = 0;
  long long nonfinite_mismatches = 0;
};
ElementwiseDiff elementwise_diff(const std::vector<double>& got, const std::vector<double>& want) {
  ElementwiseDiff d;
  for (std::size_t i = 0; i < want.size() && i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    if (!std::isfinite(g) || !std::isfinite(w)) {
      d.nonfinite_mismatches += !((std::isnan(g) && std::isnan(w)) || g == w);
      continue;
    }
    d.max_err = std::max(d.max_err, std::fabs(g - w)), d.max_ref = std::max(d.max_ref, std::fabs(w));
  }
  d.nonfinite_mismatches += static_cast<long long>(got.size() != want.size());
  return d;
}

std::string tail(const std::string& s, std::size_t n = 3000) { return s.size() > n ? "..." + s.substr(s.size() - n) : s; }



/** kEpilogues of bench_spec.h: the contractions whose statement is a diagram output of the form
 *  [gelu|gelu_tanh|relu]( contract(A, B) [+ bias[N]] ), A and B inputs, no batch axes, which cuBLASLt
 *  runs with a fused epilogue (cublasLtEpilogue_t: BIAS, RELU_BIAS, GELU_BIAS, RELU, GELU; its GELU
 *  is the tanh approximation: gelu_tanh's function, within bf16 rounding of gelu's erf form). Codes: 1 bias, 2 relu + bias,
 *  3 gelu + bias, 4 relu, 5 gelu. */
std::string epilogue_specs(const Diagram& d, const std::vector<std::string>& gemm_statements) {
  auto index_of = [](const auto& decls, const std::string& name) {  // in d.inputs() or d.outputs(), -1: absent
    for (std::size_t i = 0; i < decls.size(); ++i)
      if (decls[i]->name == name) return static_cast<int>(i);
    return -1;
  };
  auto input_index = [&](const std::string& name) { return index_of(d.inputs(), name); };
  std::string s = "struct EpilogueSpec { int gemm, epilogue, a, b, bias, out; };  // indices into kGemms, kInputs, kOutputs\nstatic const EpilogueSpec kEpilogues[] = {\n";
  int n = 0;
  for (std::size_t g = 0; g < gemm_statements.size(); ++g) {
    const Statement* st = d.find_statement(gemm_statements[g]);
    const Expr* e = &*st->expr;
    int act = 0;  // 0 none, 1 relu, 2 gelu (gelu_tanh exactly, gelu within bf16 rounding)
    if (e->kind == Expr::Kind::apply && (e->op == Op::relu || e->op == Op::gelu || e->op == Op::gelu_tanh) && e->args.size() == 1)
      act = e->op == Op::relu ? 1 : 2, e = &*e->args[0];
    const Expr* bias = nullptr;
    if (e->kind == Expr::Kind::apply && e->op == Op::add && e->args.size() == 2) {
      const Expr *x = &*e->args[0], *y = &*e->args[1];
      if (y->kind == Expr::Kind::apply) std::swap(x, y);
      bias = y, e = x;
    }
    if (e->kind != Expr::Kind::apply || e->op != Op::contract || e->args.size() != 2 || (act == 0 && !bias)) continue;
    if (e->args[0]->kind != Expr::Kind::ref || e->args[1]->kind != Expr::Kind::ref) continue;
    const int a = input_index(e->args[0]->name), b = input_index(e->args[1]->name), oi = index_of(d.outputs(), st->name);
    const AxisList out = *d.array_axes(st->name);
    if (a < 0 || b < 0 || oi < 0 || out.size() != 2 || storage_dtype(d, st->name, {}) != storage_dtype(d, e->args[0]->name, {})) continue;
    if (bias && (bias->kind != Expr::Kind::ref || input_index(bias->name) < 0 || *d.array_axes(bias->name) != AxisList{out.back()})) continue;
    const int code = bias ? 1 + act : 3 + act;
    s += "    {" + std::to_string(g) + ", " + std::to_string(code) + ", " + std::to_string(a) + ", " + std::to_string(b) + ", " +
         std::to_string(bias ? input_index(bias->name) : -1) + ", " + std::to_string(oi) + "},\n";
    ++n;
  }
  if (n == 0) s += "    {0, 0, 0, 0, -1, 0},\n";
  return s + "};\nstatic const int kNumEpilogues = " + std::to_string(n) + ";\n";
}

/** kInputScales of bench_spec.h: per input (kInputs' order) the factor its uniform [-1, 1) values
 *  are drawn with (diagrams/input_scales.hpp), with the fan-in in a comment; for a gather's int32
 *  targets (in `bounds`, diagrams/eval.hpp target_bounds) the bound N_v its integers are drawn under. */
std::string input_scale_spec(const std::vector<InputScale>& scales, const std::map<std::string, std::int64_t>& bounds) {
  std::string s = "// Inputs are drawn uniform in [-1, 1) times these (1/sqrt(fan-in), diagrams/input_scales.hpp);\n"
                  "// gather targets uniform over [0, bound).\nstatic const double kInputScales[] = {\n";
  for (const auto& x : scales) {
    if (const auto b = bounds.find(x.input); b != bounds.end()) s += fmt::format("    {},  // {} targets in [0, {})\n", b->second, x.input, b->second);
    else s += fmt::format("    {:.17g},  // {} fan-in {}\n", x.scale(), x.input, x.fan_in);
  }
  return s + "    1.0};\n";
}

}  // namespace

std::string bench_spec(const Program& p, const Diagram& d, const SizeMap& sizes) {
  std::string s = "// Generated by napkin bench for diagram " + d.name + ".\n#pragma once\n#include <cstdint>\n";
  s += "static const int64_t kSizes[] = {";
  for (const auto* a : d.axes()) s += std::to_string(sizes.at(a->name)) + ", ";
  s += "0};\n";
  s += "struct ArraySpec { const char* name; int dtype; int64_t count; int rank; int64_t shape[8]; };\n";
  auto spec = [&](const std::string& name, const AxisList& axes, DType t) {
    std::string shape;
    for (const auto& a : axes) shape += std::to_string(sizes.at(a)) + ", ";
    return "    {\"" + name + "\", " + std::to_string(dtype_code(t)) + ", " + std::to_string(product(sizes, axes)) + ", " + std::to_string(axes.size()) +
           ", {" + shape + "}},\n";
  };
  s += "static const ArraySpec kInputs[] = {\n";
  for (const auto* in : d.inputs()) s += spec(in->name, in->axes, storage_dtype(d, in->name, {}));
  s += "};\nstatic const ArraySpec kOutputs[] = {\n";
  for (const auto* o : d.outputs()) s += spec(o->name, *d.array_axes(o->name), storage_dtype(d, o->name, {}));
  s += "};\nstatic const int kNumInputs = " + std::to_string(d.inputs().size()) + ", kNumOutputs = " + std::to_string(d.outputs().size()) + ";\n";
  s += input_scale_spec(input_scales(p, d, sizes), target_bounds(d, sizes));
  s += "struct GemmSpec { const char* statement; int64_t m, n, k, batch, batch_a, batch_b; int trans_a, trans_b; int64_t lda, ldb; long long sa, sb; int dtype; };\n";
  s += "static const GemmSpec kGemms[] = {\n";
  int n = 0;
  std::vector<std::string> gemm_statements;  // kGemms[i].statement
  Typer typer(d, p.diagrams, nullptr);
  for (const auto* st : d.statements()) {
    std::function<void(const Expr&)> visit = [&](const Expr& e) {
      for (const auto& a : e.args) visit(*a);
      std::string why;
      const auto g = blas_problem(d, typer, e, sizes, why);
      // cuBLAS is timed on 16-bit operands of one dtype only (an fp8 operand has no cublasGemmEx type here)
      if (!g || (g->dtype != DType::bf16 && g->dtype != DType::fp16) || storage_dtype(d, g->b, {}) != g->dtype) return;
      s += "    {\"" + st->name + "\", " + std::to_string(g->m) + ", " + std::to_string(g->n) + ", " + std::to_string(g->k) + ", " +
           std::to_string(g->batch_count) + ", " + std::to_string(g->batch_a) + ", " + std::to_string(g->batch_b) + ", " + (g->trans_a ? "1" : "0") + ", " +
           (g->trans_b ? "1" : "0") + ", " + std::to_string(g->lda) + ", " + std::to_string(g->ldb) + ", " + std::to_string(g->stride_a) + ", " +
           std::to_string(g->stride_b) + ", " + std::to_string(dtype_code(g->dtype)) + "},\n";
      gemm_statements.push_back(st->name);
      ++n;
    };
    visit(*st->expr);
  }
  if (n == 0) s += "    {\"\", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},\n";
  s += "};\nstatic const int kNumGemms = " + std::to_string(n) + ";\n";
  s += epilogue_specs(d, gemm_statements);
  return s;
}

namespace {

/** Runs `argv` without a shell, stdout and stderr to files of `dir`; raises UserError naming
 *  `what` with the command line and the tail of its log when it does not exit with status 0. */
void run_step(const std::string& what, const std::vector<std::string>& argv, const std::string& dir, const std::string& out_name,
              const std::string& log_name) {
  const ChildStatus st = run_child(argv, dir + "/" + out_name, dir + "/" + log_name);
  if (!st.ok())
    throw UserError(what + " failed (" + st.describe() + "): " + shell_quoted(argv) + "\n" + tail(read_all(dir + "/" + log_name)));
}

/** run_bench's steps in the work folder `dir`. */
int bench_in(const Program& p, const Diagram& given, const SizeMap& sizes, const Hardware& hw, const BenchOptions& opt,
             const std::string& dir, BenchResult* result = nullptr) {
  Derivation dv = opt.schedule ? derive_given(p, given, sizes, hw, *opt.schedule) : derive(p, given, sizes, hw);
  const Diagram& d = dv.diagram(given);  // as derive rewrote it (contraction order): what the schedules are of
  Derivation unf = dv;
  unf.chosen = dv.unfused;
  cuda::EmitOptions o_main, o_unf, o_ref;
  o_unf.prefix = "unfused_";
  o_ref.prefix = "ref_";
  o_ref.reference = true;
  write_file_atomic(dir + "/kernel.cu", emit_cuda(p, d, dv, hw, o_main));
  write_file_atomic(dir + "/unfused.cu", emit_cuda(p, d, unf, hw, o_unf));
  write_file_atomic(dir + "/reference.cu", emit_cuda(p, d, unf, hw, o_ref));
  write_file_atomic(dir + "/bench_spec.h", bench_spec(p, d, sizes));
  write_file_atomic(dir + "/harness.cu", kHarnessSource);
  std::vector<std::string> nvcc = {opt.nvcc, "-O3", "-std=c++17", "-lineinfo"};
  nvcc.insert(nvcc.end(), opt.arch.begin(), opt.arch.end());
  for (const char* f : {"harness.cu", "kernel.cu", "unfused.cu", "reference.cu"}) nvcc.push_back(dir + "/" + f);
  nvcc.insert(nvcc.end(), {"-I" + dir, "-o", dir + "/harness", "-lcublasLt", "-lcublas"});
  run_step("nvcc", nvcc, dir, "nvcc.out", "nvcc.log");
  // Small problems: also dump inputs and outputs for the fp64 evaluator.
  bool small = false;  // the fp64 evaluator's limits (diagrams/eval.hpp) also bound this check
  try {
    check_eval_limits(p, d, sizes);
    small = estimate_work(p, d, sizes) < 2e8;
  } catch (const UserError&) {
    small = false;
  }
  std::vector<std::string> harness = {dir + "/harness", "--runs", std::to_string(opt.runs), "--seed", std::to_string(opt.seed)};
  if (small) harness.insert(harness.end(), {"--dump", dir});
  run_step("the benchmark harness", harness, dir, "harness.json", "harness.log");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_all(dir + "/harness.json"));
  } catch (const std::exception& e) {
    throw InternalError(std::string("malformed harness output: ") + e.what());
  }
  bool ok = true;
  double max_rel = 0;
  const double tol = input_tolerance(d, opt.rel_tolerance);
  nlohmann::json report;
  report["diagram"] = d.name;
  report["device"] = j["device"];
  report["model"] = hw.name;
  for (auto& c : j["check"]) {
    const double rel = c["max_abs_ref"].get<double>() > 0 ? c["max_abs_err"].get<double>() / c["max_abs_ref"].get<double>() : c["max_abs_err"].get<double>();
    c["max_err_over_max_ref"] = rel;
    c["pass"] = rel <= tol && c["nonfinite_mismatches"].get<long long>() == 0;
    max_rel = std::max(max_rel, c["nonfinite_mismatches"].get<long long>() == 0 ? rel : INFINITY);
    ok &= c["pass"].get<bool>();
  }
  report["check_fp32_gpu_reference"] = j["check"];
  if (small) {
    std::map<std::string, Tensor> inputs;
    for (const auto* in : d.inputs()) {
      NpyArray a = decode_npy(read_all(dir + "/" + in->name + ".npy"), in->name + ".npy");
      Tensor t = Tensor::filled(in->axes, sizes);
      t.data = a.data;
      inputs[in->name] = t;
    }
    auto want = evaluate(p, given, sizes, inputs);  // the diagram as written: the rewrite is checked too
    nlohmann::json checks = nlohmann::json::array();
    for (const auto* o : d.outputs()) {
      NpyArray got = decode_npy(read_all(dir + "/" + o->name + ".npy"), o->name + ".npy");
      const Tensor& w = want.at(o->name);
      const ElementwiseDiff df = elementwise_diff(got.data, w.data);
      const double rel = df.max_ref > 0 ? df.max_err / df.max_ref : df.max_err;
      const bool pass = rel <= tol && df.nonfinite_mismatches == 0;
      checks.push_back({{"output", o->name}, {"max_abs_err", df.max_err}, {"max_abs_ref", df.max_ref}, {"max_err_over_max_ref", rel},
                        {"nonfinite_mismatches", df.nonfinite_mismatches}, {"pass", pass}});
      ok &= pass;
      max_rel = std::max(max_rel, df.nonfinite_mismatches == 0 ? rel : INFINITY);
    }
    report["check_fp64_evaluator"] = checks;
  }
  if (!j.contains("kernels")) throw InternalError("harness output has no timings");
  nlohmann::json rows = nlohmann::json::array();
  double flops_all = 0, hbm_all = 0;
  for (std::size_t k = 0; k < j["kernels"].size(); ++k) {
    const KernelCost& c = dv.chosen.kernels.at(k).cost;
    const double t = j["kernels"][k]["seconds"].get<double>();
    const double flops = c.flops_tensor + c.flops_fp32;
    flops_all += flops, hbm_all += c.hbm_bytes;
    std::string strategy = j["kernels"][k]["strategy"].get<std::string>();
    if (const std::string v = j["kernels"][k].value("variant", ""); !v.empty() && v != strategy) strategy += "/" + v;
    rows.push_back({{"kernel", c.name}, {"strategy", strategy}, {"measured_s", t}, {"tflops", flops / t / 1e12},
                    {"hbm_gbps", c.hbm_bytes / t / 1e9}, {"predicted_s", c.t_total}, {"model_error", c.t_total / t - 1}, {"bound", c.bound}});
  }
  report["kernels"] = rows;
  const double t_all = j["derived_seconds"].get<double>(), t_unf = j["unfused_seconds"].get<double>();
  double t_blas = 0;
  for (const auto& g : j["cublas"]) t_blas += g["seconds"].get<double>();
  report["derived_s"] = t_all;
  report["derived_predicted_s"] = dv.chosen.cost.t_total;
  report["derived_tflops"] = flops_all / t_all / 1e12;
  report["unfused_s"] = t_unf;
  report["unfused_predicted_s"] = dv.unfused.cost.t_total;
  report["speedup_over_unfused"] = t_unf / t_all;
  report["cublas"] = j["cublas"];
  report["cublaslt_epilogue"] = j.value("cublaslt", nlohmann::json::array());
  if (t_blas > 0) report["cublas_contractions_s"] = t_blas, report["speedup_over_cublas"] = t_blas / t_all;
  // The eager chain (the kernels eager PyTorch would launch, stood in for): cuBLAS for each
  // contraction, the unfused schedule's own kernels for the rest (softmax, normalisers,
  // element-wise maps), one after another. For a diagram without contractions it is napkin's
  // unfused schedule, not a PyTorch reference (compare_torch.py times PyTorch itself).
  double t_eager = t_blas;
  int eager_kernels = static_cast<int>(j["cublas"].size());
  std::set<std::string> gemm_statements;
  for (const auto& g : j["cublas"]) gemm_statements.insert(g["statement"].get<std::string>());
  for (std::size_t k = 0; k < j["unfused_kernel_times"].size() && k < dv.unfused.kernels.size(); ++k) {
    bool contraction = false;
    for (const auto& st : dv.unfused.kernels[k].cost.statements) contraction |= gemm_statements.count(st) > 0;
    if (!contraction) t_eager += j["unfused_kernel_times"][k]["seconds"].get<double>(), ++eager_kernels;
  }
  report["eager_chain_s"] = t_eager;
  report["eager_chain_kernels"] = eager_kernels;
  report["speedup_over_eager_chain"] = t_eager / t_all;
  report["runs"] = j["runs"];
  if (j.contains("sm_clock_mhz") && !j["sm_clock_mhz"].empty()) {
    const ClockSummary c = summarise_clock(j["sm_clock_mhz"].get<std::vector<double>>());
    report["sm_clock_mhz"] = {{"median", c.median}, {"min", c.min}, {"max", c.max}, {"spread", c.spread()}};
  }
  report["rotating_input_sets"] = j["rotating_input_sets"];
  report["pass"] = ok;
  report["tolerance"] = tol;
  const std::vector<InputScale> scales = input_scales(p, d, sizes);
  for (const auto& x : scales) report["input_scales"][x.input] = {{"fan_in", x.fan_in}, {"scale", x.scale()}};
  if (result) {
    *result = {j["device"].get<std::string>(), ok, max_rel, t_all, dv.chosen.cost.t_total, flops_all,
               report.contains("sm_clock_mhz") ? report["sm_clock_mhz"]["median"].get<double>() : 0.0};
    return ok ? 0 : 1;
  }
  if (opt.json) {
    fmt::print("{}\n", report.dump(2));
    return ok ? 0 : 1;
  }
  fmt::print("napkin bench {} on {} (model: {}), median of {} interleaved rounds, {} rotating input sets\n", d.name, j["device"].get<std::string>(), hw.name,
             j["runs"].get<int>(), j["rotating_input_sets"].get<int>());
  if (report.contains("sm_clock_mhz")) {
    const auto& c = report["sm_clock_mhz"];
    const double spread = c["spread"].get<double>();
    fmt::print("SM clock over the rounds: median {:.0f} MHz ({:.0f} to {:.0f}); the model's peaks are quoted at {:.0f} MHz{}\n", c["median"].get<double>(),
               c["min"].get<double>(), c["max"].get<double>(), hw.clock_hz / 1e6,
               spread > ClockSummary::kClockDrift
                   ? fmt::format(" (the clock moved {:.0f}% between rounds: a power or thermal limit; the medians mix clock states)", spread * 100)
                   : "");
  }
  fmt::print("inputs uniform in [-1, 1) times 1/sqrt(fan-in) where contracted with a computed array (seed {}): {}\n", opt.seed, describe_input_scales(scales));
  for (const auto& c : report["check_fp32_gpu_reference"])
    fmt::print("check {} vs fp32 GPU reference: max|err| / max|ref| = {:.2e}, rel. L2 {:.2e}, non-finite mismatches {}  {}\n", c["output"].get<std::string>(),
               c["max_err_over_max_ref"].get<double>(), c["rel_l2"].get<double>(), c["nonfinite_mismatches"].get<long long>(), c["pass"].get<bool>() ? "ok" : "FAILED");
  if (report.contains("check_fp64_evaluator"))
    for (const auto& c : report["check_fp64_evaluator"])
      fmt::print("check {} vs fp64 evaluator:      max|err| / max|ref| = {:.2e}, non-finite mismatches {}  {}\n", c["output"].get<std::string>(),
                 c["max_err_over_max_ref"].get<double>(), c["nonfinite_mismatches"].get<long long>(), c["pass"].get<bool>() ? "ok" : "FAILED");
  fmt::print("\n  {:<12} {:<14} {:>11} {:>9} {:>9} {:>11} {:>8}\n", "kernel", "strategy", "measured", "TFLOP/s", "GB/s", "predicted", "model");
  for (const auto& r : rows)
    fmt::print("  {:<12} {:<14} {:>8.1f} us {:>9.1f} {:>9.0f} {:>8.1f} us {:>+7.0f}%\n", r["kernel"].get<std::string>(), r["strategy"].get<std::string>(),
               r["measured_s"].get<double>() * 1e6, r["tflops"].get<double>(), r["hbm_gbps"].get<double>(), r["predicted_s"].get<double>() * 1e6,
               r["model_error"].get<double>() * 100);
  fmt::print("\n  derived: {:.1f} us ({:.1f} TFLOP/s), predicted {:.1f} us ({:+.0f}%)\n", t_all * 1e6, flops_all / t_all / 1e12, dv.chosen.cost.t_total * 1e6,
             (dv.chosen.cost.t_total / t_all - 1) * 100);
  fmt::print("  unfused schedule ({} kernels, napkin's): {:.1f} us, derived is {:.2f}x faster\n", j["unfused_kernels"].get<int>(), t_unf * 1e6, t_unf / t_all);
  if (t_blas > 0) fmt::print("  cuBLAS, the contractions alone: {:.1f} us, derived is {:.2f}x of cuBLAS speed\n", t_blas * 1e6, t_blas / t_all);
  for (const auto& e : report["cublaslt_epilogue"]) {
    const double t = e["seconds"].get<double>();
    fmt::print("  cuBLASLt {} with the fused epilogue ({}): {:.1f} us, derived is {:.2f}x of its speed; its result vs the fp32 reference: max|err| / max|ref| = {:.2e}\n",
               e["statement"].get<std::string>(), e["epilogue"].get<std::string>(), t * 1e6, t / t_all, e["max_err_over_max_ref"].get<double>());
  }
  fmt::print("  eager chain ({} kernels: cuBLAS contractions + napkin's own unfused kernels for the rest, not PyTorch's): {:.1f} us, derived is {:.2f}x faster\n",
             eager_kernels, t_eager * 1e6, t_eager / t_all);
  fmt::print("  result: {} (tolerance: max|err| / max|ref| <= {:.2e})\n", ok ? "correct" : "INCORRECT", tol);
  return ok ? 0 : 1;
}

}  // namespace

int run_bench(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const BenchOptions& opt) {
  // A folder this run created is removed when a step fails with an error (diagrams/files.hpp);
  // once the harness has run, its report and logs stay.
  WorkFolder work(opt.workdir.empty() ? "napkin-bench-" + d.name : opt.workdir);
  return bench_in(p, d, sizes, hw, opt, work.path());
}

BenchResult measure_bench(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const BenchOptions& opt) {
  WorkFolder work(opt.workdir.empty() ? "napkin-bench-" + d.name : opt.workdir);
  BenchResult r;
  bench_in(p, d, sizes, hw, opt, work.path(), &r);
  return r;
}

ClockSummary summarise_clock(std::vector<double> mhz) {
  if (mhz.empty()) throw InternalError("summarise_clock: no clock samples");
  std::sort(mhz.begin(), mhz.end());
  return {mhz[mhz.size() / 2], mhz.front(), mhz.back()};
}

double check_tolerance(DType t) {
  if (is_integer_dtype(t)) return BenchOptions{}.rel_tolerance;
  const int p = dtype_mantissa_bits(t) + 1;  // significand bits, the implicit one included
  return std::max(BenchOptions{}.rel_tolerance, std::ldexp(1.0, 1 - p));
}

}  // namespace napkin
