// bench_spec.h: the cuBLAS problems and the cuBLASLt fused-epilogue references napkin bench times,
// the input scales; the harness compiles against it.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "kernels/bench.hpp"
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

// The harness is compiled by `napkin bench` on the device only; here nvcc compiles it (no link, no
// GPU) against a generated bench_spec.h, so that a change to either is caught in CI.
TEST_CASE("the bench harness compiles against a generated bench_spec.h (needs nvcc 12.0+)", "[bench][nvcc]") {
  if (std::string(NAPKIN_NVCC).empty()) {
    skip_test(NAPKIN_NVCC_MISSING);
    return;
  }
  const std::string dir = std::filesystem::temp_directory_path().string() + "/napkin-harness-test-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/bench_spec.h") << spec_of(load_library("transformer_block.napkin"));
  std::ofstream(dir + "/harness.cu") << slurp(std::string(NAPKIN_SOURCE_DIR) + "/kernels/bench/harness.cu");
  const std::string cmd = std::string(NAPKIN_NVCC) + " -std=c++17 -O0 -c -gencode=arch=compute_90a,code=sm_90a -I" + dir + " -o " + dir + "/harness.o " +
                          dir + "/harness.cu > " + dir + "/nvcc.log 2>&1";
  INFO(cmd << "\n" << slurp(dir + "/nvcc.log"));
  CHECK(std::system(cmd.c_str()) == 0);
  std::filesystem::remove_all(dir);
}
