// bench_spec.h: the cuBLAS problems and the cuBLASLt fused-epilogue references napkin bench times,
// the input scales; the harness compiles against it.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "kernels/bench.hpp"
#include "lower/blas_problem.hpp"
#include "tests/support/run.hpp"

using namespace napkin;
using namespace napkin::test;

namespace {
std::string spec_of(const LoadedDiagram& l) { return bench_spec(*l.program, *l.diagram, l.sizes); }
}  // namespace

TEST_CASE("a GEMM with a bias and GELU epilogue gets a cuBLASLt reference with that epilogue", "[bench]") {
  const std::string s = spec_of(load_library("matmul_bias_gelu.napkin"));
  CHECK(s.find("kNumGemms = 1;") != std::string::npos);
  // gemm 0, code 3 (bias + GELU), A = X (input 0), B = W (input 1), bias (input 2), output 0.
  CHECK(s.find("{0, 3, 0, 1, 2, 0},") != std::string::npos);
  CHECK(s.find("kNumEpilogues = 1;") != std::string::npos);
}

TEST_CASE("contractions without a cuBLASLt epilogue get none", "[bench]") {
  CHECK(spec_of(load_library("matmul.napkin")).find("kNumEpilogues = 0;") != std::string::npos);  // a plain GEMM: cuBLAS alone
  CHECK(spec_of(load_library("mlp_swiglu.napkin")).find("kNumEpilogues = 0;") != std::string::npos);  // silu(X W1): no such epilogue
  const auto relu = load_text("diagram d\naxis t = 64\naxis m = 32\naxis f = 48\nin X[t,m] : bf16\nin W[m,f] : bf16\n"
                                 "Y[t,f] = relu(contract(X, W; m))\nout Y : bf16\n");
  CHECK(spec_of(relu).find("{0, 4, 0, 1, -1, 0},") != std::string::npos);  // ReLU, no bias
}

TEST_CASE("bench_spec.h carries each input's scale, 1/sqrt(fan-in), in kInputs' order", "[bench]") {
  const std::string s = spec_of(load_library("transformer_block.napkin"));
  const auto at = s.find("static const double kInputScales[] = {");
  REQUIRE(at != std::string::npos);
  const std::string table = s.substr(at, s.find("};", at) - at);
  // X, norm1, Wq, Wk, Wv, Wo, norm2, W1, W3, W2: 1/sqrt(4096) = 0.015625, 1/sqrt(14336) for W2.
  const std::string want = "    1,  // X fan-in 1\n    1,  // norm1 fan-in 1\n    0.015625,  // Wq fan-in 4096\n    0.015625,  // Wk fan-in 4096\n"
                           "    0.015625,  // Wv fan-in 4096\n    0.015625,  // Wo fan-in 4096\n    1,  // norm2 fan-in 1\n"
                           "    0.015625,  // W1 fan-in 4096\n    0.015625,  // W3 fan-in 4096\n    0.0083519138097632624,  // W2 fan-in 14336\n";
  CHECK(table.find(want) != std::string::npos);
  CHECK(spec_of(load_library("matmul.napkin")).find("    1,  // A fan-in 1\n    1,  // B fan-in 1\n") != std::string::npos);
}

TEST_CASE("bench_spec.h gives fp8 and int32 arrays their own dtype codes and gather targets their bound", "[bench]") {
  // cross_entropy: L[t,v] fp32 (code 0), T[t] int32 (code 5) drawn under N_v = 1000.
  const std::string ce = spec_of(load_library(std::string(NAPKIN_SOURCE_DIR) + "/tests/language/cross_entropy.napkin"));
  CHECK(ce.find("{\"T\", 5, 64, 1, {64, }},") != std::string::npos);
  CHECK(ce.find("    1000,  // T targets in [0, 1000)\n") != std::string::npos);
  // The fp8 GEMM: A and B fp8e4m3 (code 3), the scales fp32; no cuBLAS problem (no fp8 in cublasGemmEx).
  const std::string f8 = spec_of(load_library(std::string(NAPKIN_SOURCE_DIR) + "/tests/kernels/gemm_fp8.napkin"));
  CHECK(f8.find("{\"A\", 3, ") != std::string::npos);
  CHECK(f8.find("{\"sa\", 0, 1, 0, {}},") != std::string::npos);
  CHECK(f8.find("kNumGemms = 0;") != std::string::npos);
}

// The harness is compiled by `napkin bench` on the device only; here nvcc compiles it (no link, no
// GPU) against a generated bench_spec.h, so that a change to either is caught in CI.
TEST_CASE("the bench harness compiles against a generated bench_spec.h (needs nvcc 12.0+)", "[bench][nvcc]") {
  if (std::string(NAPKIN_NVCC).empty()) {
    skip_test(NAPKIN_NVCC_MISSING);
    return;
  }
  const std::string dir = std::filesystem::temp_directory_path().string() + "/napkin-harness-test-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/bench_spec.h") << spec_of(load_library("transformer_block.napkin"));  // the harness takes every dtype code at run time
  std::ofstream(dir + "/harness.cu") << slurp(std::string(NAPKIN_SOURCE_DIR) + "/kernels/bench/harness.cu");
  const std::string cmd = std::string(NAPKIN_NVCC) + " -std=c++17 -O0 -c -gencode=arch=compute_90a,code=sm_90a -I" + dir + " -o " + dir + "/harness.o " +
                          dir + "/harness.cu > " + dir + "/nvcc.log 2>&1";
  INFO(cmd << "\n" << slurp(dir + "/nvcc.log"));
  CHECK(std::system(cmd.c_str()) == 0);
  std::filesystem::remove_all(dir);
}

// lower/blas_problem.hpp: the recogniser bench_spec.h's kGemms come from.
namespace {
/** The BLAS problem of statement `stmt`'s top-level contraction (nullopt with `why` set). */
std::optional<BlasProblem> problem_of(const LoadedDiagram& l, const std::string& stmt, std::string& why) {
  Typer typer(*l.diagram, l.program->diagrams, nullptr);
  return blas_problem(*l.diagram, typer, *l.diagram->find_statement(stmt)->expr, l.sizes, why);
}
const char* kAxes = "diagram d\naxis b = 3\naxis h = 2\naxis t = 64\naxis m = 32\naxis f = 48\n";
}  // namespace

TEST_CASE("a plain GEMM is one BLAS problem with no transposes", "[bench][blas]") {
  const auto l = load_text(std::string(kAxes) + "in X[t,m] : bf16\nin W[m,f] : bf16\nY[t,f] = contract(X, W; m)\nout Y : bf16\n");
  std::string why;
  const auto g = problem_of(l, "Y", why);
  REQUIRE(g);
  CHECK((g->a == "X" && g->b == "W" && g->M == "t" && g->N == "f" && g->K == "m"));
  CHECK((g->m == 64 && g->n == 48 && g->k == 32 && g->batch_count == 1 && g->batch_a == 1 && g->batch_b == 1));
  CHECK((!g->trans_a && !g->trans_b && g->lda == 32 && g->ldb == 48 && g->stride_a == 0 && g->stride_b == 0));
  CHECK(g->dtype == DType::bf16);
}

TEST_CASE("transposed operands: A stored [K, M], B stored [N, K]", "[bench][blas]") {
  const auto l = load_text(std::string(kAxes) + "in X[m,t] : fp16\nin W[f,m] : fp16\nY[t,f] = contract(X, W; m)\nout Y : fp16\n");
  std::string why;
  const auto g = problem_of(l, "Y", why);
  REQUIRE(g);
  CHECK((g->trans_a && g->trans_b && g->lda == 64 && g->ldb == 32));
  CHECK(g->dtype == DType::fp16);
}

TEST_CASE("a batched contraction is one strided-batched GEMM", "[bench][blas]") {
  const auto l = load_text(std::string(kAxes) + "in Q[b,h,t,m] : bf16\nin K[b,h,f,m] : bf16\nS[b,h,t,f] = contract(Q, K; m)\nout S : bf16\n");
  std::string why;
  const auto g = problem_of(l, "S", why);
  REQUIRE(g);
  CHECK((g->batch == AxisList{"b", "h"} && g->batch_count == 6 && g->batch_a == 6 && g->batch_b == 6));
  CHECK((!g->trans_a && g->trans_b && g->lda == 32 && g->ldb == 32));
  CHECK((g->stride_a == 64 * 32 && g->stride_b == 48 * 32));
  // bench_spec.h carries the same numbers.
  CHECK(spec_of(l).find("{\"S\", 64, 48, 32, 6, 6, 6, 0, 1, 32, 32, 2048, 1536, 1},") != std::string::npos);
}

TEST_CASE("an operand without the batch axes is broadcast (stride 0)", "[bench][blas]") {
  const auto l = load_text(std::string(kAxes) + "in X[b,t,m] : bf16\nin W[m,f] : bf16\nY[b,t,f] = contract(X, W; m)\nout Y : bf16\n");
  std::string why;
  const auto g = problem_of(l, "Y", why);
  REQUIRE(g);
  CHECK((g->batch_count == 3 && g->batch_a == 3 && g->batch_b == 1 && g->stride_a == 64 * 32 && g->stride_b == 0));
}

TEST_CASE("the operand holding M is A whatever the diagram's order", "[bench][blas]") {
  const auto l = load_text(std::string(kAxes) + "in W[m,f] : bf16\nin X[t,m] : bf16\nY[t,f] = contract(W, X; m)\nout Y : bf16\n");
  std::string why;
  const auto g = problem_of(l, "Y", why);
  REQUIRE(g);
  INFO(g->M << " " << g->N);
  CHECK(g->a == (g->M == "t" ? "X" : "W"));
}

TEST_CASE("contractions no single BLAS call runs are rejected with the reason", "[bench][blas]") {
  std::string why;
  // W holds h but not b: cuBLAS has one batch stride per operand.
  const auto part = load_text(std::string(kAxes) + "in X[b,h,t,m] : bf16\nin W[h,m,f] : bf16\nY[b,h,t,f] = contract(X, W; m)\nout Y : bf16\n");
  CHECK_FALSE(problem_of(part, "Y", why));
  CHECK(why.find("some of the batch axes but not all") != std::string::npos);
  CHECK(spec_of(part).find("kNumGemms = 0;") != std::string::npos);
  // X's matrix axes t and m are not its last two (b lies between): no leading dimension describes it.
  const auto strided = load_text(std::string(kAxes) + "in X[m,b,t] : bf16\nin W[b,m,f] : bf16\nY[b,t,f] = contract(X, W; m)\nout Y : bf16\n");
  CHECK_FALSE(problem_of(strided, "Y", why));
  INFO(why);
  CHECK(why.find("X is not batch axes then a matrix of t and m") != std::string::npos);
  // Two contracted axes.
  const auto two = load_text(std::string(kAxes) + "in X[t,h,m] : bf16\nin W[h,m,f] : bf16\nY[t,f] = contract(X, W; h, m)\nout Y : bf16\n");
  CHECK_FALSE(problem_of(two, "Y", why));
  CHECK(why == "not a contraction of two operands over one axis");
}

TEST_CASE("fp8 inputs get their own dtype codes and no cuBLAS problem", "[bench][fp8]") {
  // tests/kernels/attention_fp8.napkin: Q, K, Vt fp8e4m3 (code 3, 1 byte each in the harness); cuBLAS
  // has no fp8 problem here, and P (bf16) times Vt (fp8) is no cuBLAS problem of one dtype either.
  const std::string s = spec_of(load_library(std::string(NAPKIN_SOURCE_DIR) + "/tests/kernels/attention_fp8.napkin"));
  CHECK(s.find("{\"Q\", 3, ") != std::string::npos);
  CHECK(s.find("{\"Vt\", 3, ") != std::string::npos);
  CHECK(s.find("{\"O\", 1, ") != std::string::npos);
  CHECK(s.find("kNumGemms = 0;") != std::string::npos);
}
