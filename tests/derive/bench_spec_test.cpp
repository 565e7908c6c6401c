// bench_spec.h: the cuBLAS problems and the cuBLASLt fused-epilogue references napkin bench times.
#include <catch2/catch.hpp>

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
