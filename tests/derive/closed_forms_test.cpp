// The paper's closed forms, obtained from the model and the search (two-level model, objective:
// transfers, no hardware divisibility), not typed in:
//  - tiled matmul a x b x c with memory M: g_a = g_c near sqrt(M), H = 2abc/sqrt(M) + ac (§3.1);
//  - unlimited memory: H = ab + bc + ac;
//  - attention: H falls as M^-1 and approaches 2qd + 4qxd^2/M per head (§3, FlashAttention);
//  - quantization fp16 -> fp8 divides transfer time by about 4 (attention) and 2^1.5 (matmul) (§4.3).
#include <catch2/catch.hpp>
#include <cmath>

#include "derive/search.hpp"
#include "diagrams/verify.hpp"
#include "tests/support/run.hpp"

using namespace napkin;

namespace {

using Loaded = test::LoadedDiagram;
Loaded load(const std::string& text) { return test::load_text(text); }

const std::string kMatmul =
    "diagram mm\naxis a = 4096\naxis b = 4096\naxis c = 4096\nin A[a,b] : fp16\nin B[b,c] : fp16\nC[a,c] = contract(A, B; b)\nout C : fp16\n";
const std::string kAttention =
    "diagram att\naxis q = 4096\naxis x = 4096\naxis d = 128\nin Q[q,d] : fp16\nin K[x,d] : fp16\nin V[x,d] : fp16\n"
    "S[q,x] = contract(Q, K; d) * rsqrt(d)\nP[q,x] = softmax(S; x)\nO[q,d] = contract(P, V; x)\nout O : fp16\n";

/** Best transfers (elements into the lower level) with a lower level of `m_elements`. */
SearchResult minimise(const Loaded& l, double m_elements, DType dt = DType::fp16) {
  ModelOptions opt;
  opt.two_level = true;  // the diagram declares its dtype: every array in dt (the paper's q^(1+beta) assumes it)
  opt.two_level_capacity_bytes = m_elements * dtype_bits(dt) / 8.0;
  SearchOptions so;
  so.objective = SearchOptions::Objective::transfers;
  so.hardware_divisibility = false;
  Hardware hw = load_hardware("h100");
  return search_schedule(*l.program, *l.diagram, l.sizes, hw, opt, so);
}

double elements(const SearchResult& r, DType dt = DType::fp16) { return r.cost.l2_to_smem_bytes / (dtype_bits(dt) / 8.0); }

}  // namespace

TEST_CASE("tiled matmul: square tiles near sqrt(M) and H = 2abc/sqrt(M) + ac", "[model][closed-form]") {
  Loaded l = load(kMatmul);
  const double a = 4096, b = 4096, c = 4096;
  for (double m : {16384.0, 65536.0}) {
    INFO("M = " << m << " elements");
    SearchResult r = minimise(l, m);
    REQUIRE(r.kernels.size() == 1);
    const auto& axes = r.kernels[0].cost.axes;
    double ga = static_cast<double>(axes.at("a").tile), gc = static_cast<double>(axes.at("c").tile);
    INFO("g_a = " << ga << ", g_c = " << gc << ", s_b = " << axes.at("b").tile);
    CHECK(axes.at("b").kind == AxisPlan::Kind::stream);
    CHECK(ga == Approx(std::sqrt(m)).epsilon(0.12));
    CHECK(gc == Approx(std::sqrt(m)).epsilon(0.12));
    double closed = 2 * a * b * c / std::sqrt(m) + a * c;
    CHECK(elements(r) == Approx(closed).epsilon(0.06));
    CHECK(elements(r) >= closed * 0.999);  // the closed form is the optimum: nothing beats it
  }
}

TEST_CASE("matmul with unlimited memory moves ab + bc + ac", "[model][closed-form]") {
  Loaded l = load(kMatmul);
  SearchResult r = minimise(l, 1e12);
  CHECK(elements(r) == Approx(4096.0 * 4096 * 3).epsilon(1e-12));
}

TEST_CASE("attention transfers fall as 1/M and approach 2qd + 4qxd^2/M", "[model][closed-form]") {
  Loaded l = load(kAttention);
  const double q = 4096, x = 4096, d = 128;
  double previous = 0;
  for (double m : {32768.0, 65536.0, 131072.0}) {
    SearchResult r = minimise(l, m);
    INFO("M = " << m);
    REQUIRE(r.kernels.size() == 1);  // FlashAttention: one fused kernel
    double h = elements(r);
    double asymptote = 2 * q * d + 4 * q * x * d * d / m;
    CHECK(h == Approx(asymptote).epsilon(0.15));
    CHECK(h >= asymptote * 0.99);
    if (previous > 0) CHECK((previous - 2 * q * d) / (h - 2 * q * d) == Approx(2.0).epsilon(0.12));  // beta = 1
    previous = h;
  }
}

TEST_CASE("quantization fp16 -> fp8: transfer time / 4 for attention, / 2^1.5 for matmul", "[model][closed-form]") {
  // The lower level holds a fixed number of bytes; fp8 fits twice the elements, each half the size.
  const double m_bytes = 2 * 65536;
  // Every array declared in the dtype (compare --dtype fp8e4m3 would keep outputs in bf16).
  // The search resumes after each replacement: replacing fp16 with fp16 must not find it again.
  auto in = [](std::string text, const std::string& dt) {
    for (std::size_t at = 0; (at = text.find("fp16", at)) != std::string::npos; at += dt.size()) text.replace(at, 4, dt);
    return load(text);
  };
  auto bytes = [&](const std::string& text, DType dt) {
    return minimise(in(text, std::string(dtype_name(dt))), m_bytes / (dtype_bits(dt) / 8.0), dt).cost.l2_to_smem_bytes;
  };
  double att_ratio = bytes(kAttention, DType::fp16) / bytes(kAttention, DType::fp8e4m3);
  double mm_ratio = bytes(kMatmul, DType::fp16) / bytes(kMatmul, DType::fp8e4m3);
  INFO("attention " << att_ratio << ", matmul " << mm_ratio);
  CHECK(att_ratio == Approx(4.0).epsilon(0.12));
  CHECK(mm_ratio == Approx(std::pow(2.0, 1.5)).epsilon(0.08));
}
