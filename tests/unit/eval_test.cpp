// The reference evaluator against hand-computed results.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <limits>

#include "diagrams/eval.hpp"
#include "diagrams/verify.hpp"
#include "tests/support/run.hpp"

using namespace napkin;

namespace {
struct Run {
  std::unique_ptr<Program> p;
  const Diagram* d = nullptr;
  SizeMap sizes;
};
Run load(const std::string& text, const SizeMap& overrides = {}) {
  test::LoadedDiagram l = test::load_text(text, overrides);
  return Run{std::move(l.program), l.diagram, l.sizes};
}

Tensor tensor(const AxisList& axes, std::vector<std::int64_t> shape, std::vector<double> data) {
  return Tensor{axes, std::move(shape), std::move(data)};
}
}  // namespace

TEST_CASE("a 2x3 by 3x2 matmul", "[eval]") {
  Run r = load("diagram mm\naxis i = 2\naxis k = 3\naxis j = 2\nin A[i,k] : fp32\nin B[k,j] : fp32\nC[i,j] = contract(A, B; k)\nout C : fp32\n");
  auto out = evaluate(*r.p, *r.d, r.sizes,
                      {{"A", tensor({"i", "k"}, {2, 3}, {1, 2, 3, 4, 5, 6})},
                       {"B", tensor({"k", "j"}, {3, 2}, {7, 8, 9, 10, 11, 12})}});
  // [1 2 3; 4 5 6] [7 8; 9 10; 11 12] = [58 64; 139 154]
  CHECK(out.at("C").data == std::vector<double>{58, 64, 139, 154});
  CHECK(out.at("C").axes == AxisList{"i", "j"});
}

TEST_CASE("the result takes the declared axis order (a transpose)", "[eval]") {
  Run r = load("diagram tr\naxis i = 2\naxis j = 3\nin A[i,j] : fp32\nB[j,i] = A * 1\nout B : fp32\n");
  auto out = evaluate(*r.p, *r.d, r.sizes, {{"A", tensor({"i", "j"}, {2, 3}, {1, 2, 3, 4, 5, 6})}});
  CHECK(out.at("B").data == std::vector<double>{1, 4, 2, 5, 3, 6});
}

TEST_CASE("softmax rows sum to one and match exp/sum", "[eval]") {
  Run r = load("diagram sm\naxis t = 5\naxis v = 7\nin L[t,v] : fp32\nP[t,v] = softmax(L; v)\nout P : fp32\n");
  Tensor L = random_input(*r.d->find_input("L"), r.sizes, 3);
  Tensor P = evaluate(*r.p, *r.d, r.sizes, {{"L", L}}).at("P");
  for (int t = 0; t < 5; ++t) {
    double sum = 0, den = 0;
    for (int v = 0; v < 7; ++v) sum += P.data[static_cast<std::size_t>(t * 7 + v)], den += std::exp(L.data[static_cast<std::size_t>(t * 7 + v)]);
    CHECK(sum == Approx(1.0).epsilon(1e-14));
    CHECK(P.data[static_cast<std::size_t>(t * 7)] == Approx(std::exp(L.data[static_cast<std::size_t>(t * 7)]) / den).epsilon(1e-13));
  }
}

TEST_CASE("attention equals the direct formula, causal mask included", "[eval]") {
  for (bool causal : {false, true}) {
    std::string p = causal ? "softmax(mask(S, causal(q, x)); x)" : "softmax(S; x)";
    Run r = load("diagram att\naxis q = 6\naxis x = 5\naxis d = 4\nin Q[q,d] : bf16\nin K[x,d] : bf16\nin V[x,d] : bf16\n"
                 "S[q,x] = contract(Q, K; d) * rsqrt(d)\nP[q,x] = " + p + "\nO[q,d] = contract(P, V; x)\nout O : bf16\n");
    std::map<std::string, Tensor> in;
    for (const auto* i : r.d->inputs()) in[i->name] = random_input(*i, r.sizes, 11);
    Tensor O = evaluate(*r.p, *r.d, r.sizes, in).at("O");
    const auto &Q = in["Q"].data, &K = in["K"].data, &V = in["V"].data;
    for (int i = 0; i < 6; ++i) {
      double w[5], den = 0;
      for (int j = 0; j < 5; ++j) {
        double s = 0;
        for (int k = 0; k < 4; ++k) s += Q[static_cast<std::size_t>(i * 4 + k)] * K[static_cast<std::size_t>(j * 4 + k)];
        w[j] = (causal && j > i) ? 0.0 : std::exp(s / 2.0);
        den += w[j];
      }
      for (int k = 0; k < 4; ++k) {
        double o = 0;
        for (int j = 0; j < 5; ++j) o += w[j] / den * V[static_cast<std::size_t>(j * 4 + k)];
        CHECK(O.data[static_cast<std::size_t>(i * 4 + k)] == Approx(o).epsilon(1e-12));
      }
    }
  }
}

TEST_CASE("layernorm gives mean 0 and variance 1 and rmsnorm gives mean square 1", "[eval]") {
  Run r = load("diagram ln\naxis t = 4\naxis m = 33\nin X[t,m] : fp32\nY[t,m] = layernorm(X; m, eps=1e-30)\nZ[t,m] = rmsnorm(X; m, eps=1e-30)\nout Y : fp32\nout Z : fp32\n");
  Tensor X = random_input(*r.d->find_input("X"), r.sizes, 5);
  for (auto& v : X.data) v = 3 * v + 7;  // away from mean 0 and variance 1
  auto out = evaluate(*r.p, *r.d, r.sizes, {{"X", X}});
  for (int t = 0; t < 4; ++t) {
    double mean = 0, var = 0, ms = 0;
    for (int m = 0; m < 33; ++m) mean += out["Y"].data[static_cast<std::size_t>(t * 33 + m)] / 33;
    for (int m = 0; m < 33; ++m) {
      double y = out["Y"].data[static_cast<std::size_t>(t * 33 + m)], z = out["Z"].data[static_cast<std::size_t>(t * 33 + m)];
      var += (y - mean) * (y - mean) / 33;
      ms += z * z / 33;
    }
    CHECK(std::fabs(mean) < 1e-12);
    CHECK(var == Approx(1.0).epsilon(1e-12));
    CHECK(ms == Approx(1.0).epsilon(1e-12));
  }
}

TEST_CASE("a call is woven over the caller's extra axes", "[eval][composition]") {
  Run r = load(
      "diagram rowsum\naxis k = 3\nin X[k] : fp32\nY[] = sum(X; k)\nout Y : fp32\n\n"
      "diagram main\naxis n = 2\naxis j = 3\nin A[n,j] : fp32\nB[n] = rowsum(A; k=j)\nout B : fp32\n");
  auto out = evaluate(*r.p, *r.d, r.sizes, {{"A", tensor({"n", "j"}, {2, 3}, {1, 2, 3, 10, 20, 30})}});
  CHECK(out.at("B").data == std::vector<double>{6, 60});
}

TEST_CASE("element-wise maps, broadcasting and casts", "[eval]") {
  Run r = load("diagram ew\naxis i = 2\naxis j = 2\nin A[i] : fp32\nin B[j] : fp32\n"
               "C[i,j] = relu(A - B) + cast(A / 3, bf16) * 0\nD[i] = gelu(A) + silu(A) + sigmoid(A) + tanh(A) + gelu_tanh(A)\nout C : fp32\nout D : fp32\n");
  auto out = evaluate(*r.p, *r.d, r.sizes, {{"A", tensor({"i"}, {2}, {1, 4})}, {"B", tensor({"j"}, {2}, {2, 0})}});
  CHECK(out["C"].data == std::vector<double>{0, 1, 2, 4});
  double a = 1;
  double d = 0.5 * a * (1 + std::erf(a / std::sqrt(2.0))) + a / (1 + std::exp(-a)) + 1 / (1 + std::exp(-a)) + std::tanh(a) +
             0.5 * a * (1 + std::tanh(std::sqrt(2 / M_PI) * (a + 0.044715 * a * a * a)));  // gelu_tanh(1) = 0.841192...
  CHECK(out["D"].data[0] == Approx(d).epsilon(1e-15));
  // gelu_tanh is its own function, not gelu: gelu_tanh(1) - gelu(1) = -1.53e-4
  Run g = load("diagram g\naxis i = 1\nin A[i] : fp32\nD[i] = gelu_tanh(A) - gelu(A)\nout D : fp32\n");
  CHECK(evaluate(*g.p, *g.d, g.sizes, {{"A", tensor({"i"}, {1}, {1})}}).at("D").data[0] == Approx(-1.5275546e-4).epsilon(1e-6));
}

TEST_CASE("random inputs are seeded, rounded to their dtype and roughly standard normal", "[eval]") {
  Run r = load("diagram t\naxis n = 4096\nin X[n] : bf16\nout X : bf16\n");
  Tensor a = random_input(*r.d->find_input("X"), r.sizes, 1), b = random_input(*r.d->find_input("X"), r.sizes, 1),
         c = random_input(*r.d->find_input("X"), r.sizes, 2);
  CHECK(a.data == b.data);
  CHECK(a.data != c.data);
  double mean = 0, var = 0;
  for (double v : a.data) {
    CHECK(round_to_dtype(v, DType::bf16) == v);
    mean += v / 4096;
  }
  for (double v : a.data) var += (v - mean) * (v - mean) / 4096;
  CHECK(std::fabs(mean) < 0.1);
  CHECK(var == Approx(1.0).epsilon(0.1));
}

TEST_CASE("evaluation too large for the reference evaluator is refused", "[eval][limits]") {
  Run r = load("diagram mm\naxis i = 4096\naxis k = 4096\naxis j = 4096\nin A[i,k] : fp32\nin B[k,j] : fp32\nC[i,j] = contract(A, B; k)\nout C : fp32\n");
  CHECK(estimate_work(*r.p, *r.d, r.sizes) > kMaxEvalWork);
  CHECK_THROWS_AS(evaluate(*r.p, *r.d, r.sizes, {}), UserError);
}

TEST_CASE("a diagram that only copies its input still counts the elements it makes and stores", "[eval][limits]") {
  // Found by fuzz.diagram: an identity diagram on 2.4e8 elements was estimated at 0 operations,
  // so a caller that gates on the estimate allocated 2 GB of inputs.
  Run big = load("diagram t\naxis a = 241488545\nin X[a] : fp32\nout X : fp32\n");
  CHECK(estimate_work(*big.p, *big.d, big.sizes) >= 241488545.0);
  Run small = load("diagram t\naxis a = 8\nin X[a] : fp32\nY[a] = exp(X)\nout Y : fp32\n");
  CHECK(estimate_work(*small.p, *small.d, small.sizes) >= 8 + 8);
}

TEST_CASE("windowed causal and band masks keep the offsets they name", "[eval][language]") {
  // q = 4 rows, x = 5 columns; row q keeps the x with q - 2 < x <= q (window=2), and the band
  // -1 <= x - q <= 1 (lo=-1, hi=1).
  Run r = load("diagram m\naxis q = 4\naxis x = 5\nW[q,x] = causal(q, x; window=2)\nB[q,x] = band(q, x; lo=-1, hi=1)\n"
               "C[q,x] = causal(q, x)\nout W : fp32\nout B : fp32\nout C : fp32\n");
  auto out = evaluate(*r.p, *r.d, r.sizes, {});
  CHECK(out.at("W").data == std::vector<double>{1, 0, 0, 0, 0,   //
                                                1, 1, 0, 0, 0,   //
                                                0, 1, 1, 0, 0,   //
                                                0, 0, 1, 1, 0});
  CHECK(out.at("B").data == std::vector<double>{1, 1, 0, 0, 0,   //
                                                1, 1, 1, 0, 0,   //
                                                0, 1, 1, 1, 0,   //
                                                0, 0, 1, 1, 1});
  CHECK(out.at("C").data == std::vector<double>{1, 0, 0, 0, 0,   //
                                                1, 1, 0, 0, 0,   //
                                                1, 1, 1, 0, 0,   //
                                                1, 1, 1, 1, 0});
}

TEST_CASE("positions as values: ALiBi from pos(q) - pos(x)", "[eval][language]") {
  Run r = load("diagram a\naxis q = 3\naxis x = 2\nin S[q,x] : fp32\nP[q] = pos(q) * 1\n"
               "A[q,x] = S - 0.5 * (pos(q) - pos(x))\nout P : fp32\nout A : fp32\n");
  auto out = evaluate(*r.p, *r.d, r.sizes, {{"S", tensor({"q", "x"}, {3, 2}, {10, 20, 30, 40, 50, 60})}});
  CHECK(out.at("P").data == std::vector<double>{0, 1, 2});
  // A[q,x] = S[q,x] - 0.5 (q - x)
  CHECK(out.at("A").data == std::vector<double>{10, 20.5, 29.5, 40, 49, 59.5});
}

TEST_CASE("abs, pow, element-wise min and max, and max as a reduction beside them", "[eval][language]") {
  Run r = load("diagram e\naxis i = 4\nin A[i] : fp32\nin B[i] : fp32\nU[i] = abs(A)\nP[i] = pow(abs(A), 2)\n"
               "R[i] = pow(B, -0.5)\nN[i] = min(A, B)\nX[i] = max(A, B)\nM[] = max(A; i)\nC[i] = max(A, 0)\n"
               "out U : fp32\nout P : fp32\nout R : fp32\nout N : fp32\nout X : fp32\nout M : fp32\nout C : fp32\n");
  auto out = evaluate(*r.p, *r.d, r.sizes,
                      {{"A", tensor({"i"}, {4}, {-3, 2, -0.5, 4})}, {"B", tensor({"i"}, {4}, {1, 4, 0.25, 16})}});
  CHECK(out.at("U").data == std::vector<double>{3, 2, 0.5, 4});
  CHECK(out.at("P").data == std::vector<double>{9, 4, 0.25, 16});
  CHECK(out.at("R").data == std::vector<double>{1, 0.5, 2, 0.25});
  CHECK(out.at("N").data == std::vector<double>{-3, 2, -0.5, 4});
  CHECK(out.at("X").data == std::vector<double>{1, 4, 0.25, 16});
  CHECK(out.at("M").data == std::vector<double>{4});
  CHECK(out.at("C").data == std::vector<double>{0, 2, 0, 4});
}

TEST_CASE("logsumexp and l2norm, as written and as expanded when loaded", "[eval][language]") {
  const std::string text = "diagram b\naxis t = 2\naxis v = 2\nin X[t,v] : fp32\nZ[t] = logsumexp(X; v)\n"
                           "N[t,v] = l2norm(X; v)\nout Z : fp32\nout N : fp32\n";
  // Rows [0, ln 3] and [3, 4]: logsumexp log(1 + 3) = log 4 and log(e^3 + e^4); l2norm of [3, 4] is [0.6, 0.8].
  const Tensor x = tensor({"t", "v"}, {2, 2}, {0, std::log(3.0), 3, 4});
  for (bool expand : {false, true}) {
    INFO("expanded: " << expand);
    DiagnosticEngine diags;
    auto p = load_program_text("b.napkin", text, diags, expand);
    const Diagram& d = p->select("");
    REQUIRE(verify_program(*p, diags, &d));
    CHECK((d.find_statement("Z_max") != nullptr) == expand);
    auto out = evaluate(*p, d, *resolve_sizes(d, {}, diags), {{"X", x}});
    CHECK(out.at("Z").data[0] == Approx(std::log(4.0)).epsilon(1e-14));
    CHECK(out.at("Z").data[1] == Approx(std::log(std::exp(3.0) + std::exp(4.0))).epsilon(1e-14));
    CHECK(out.at("N").data[2] == Approx(0.6).epsilon(1e-12));
    CHECK(out.at("N").data[3] == Approx(0.8).epsilon(1e-12));
    CHECK(out.at("N").data[1] == Approx(1.0).epsilon(1e-12));  // [0, ln 3] / ln 3
  }
}

TEST_CASE("gather reads the target's entry along its axis, as written and as expanded", "[eval][language]") {
  const std::string text = "diagram g\naxis t = 3\naxis v = 4\nin L[t,v] : fp32\nin T[t] : int32\n"
                           "G[t] = gather(L, T; v)\nC[t] = logsumexp(L; v) - gather(L, T; v)\nout G : fp32\nout C : fp32\n";
  // Rows [1 2 3 4], [-inf 5 -inf 0], [0 0 0 0]; targets 2, 1, 3: G = [3, 5, 0]. The -inf entries
  // off the target stay out (a select, not a product with 0); C = log(sum(exp(row))) - G.
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor l = tensor({"t", "v"}, {3, 4}, {1, 2, 3, 4, -inf, 5, -inf, 0, 0, 0, 0, 0});
  const Tensor t = tensor({"t"}, {3}, {2, 1, 3});
  for (bool expand : {false, true}) {
    INFO("expanded: " << expand);
    DiagnosticEngine diags;
    auto p = load_program_text("g.napkin", text, diags, expand);
    const Diagram& d = p->select("");
    REQUIRE(verify_program(*p, diags, &d));
    auto out = evaluate(*p, d, *resolve_sizes(d, {}, diags), {{"L", l}, {"T", t}});
    CHECK(out.at("G").data == std::vector<double>{3, 5, 0});
    CHECK(out.at("C").data[0] == Approx(std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + std::exp(4.0)) - 3).epsilon(1e-14));
    CHECK(out.at("C").data[1] == Approx(std::log(std::exp(5.0) + 1.0) - 5).epsilon(1e-14));
    CHECK(out.at("C").data[2] == Approx(std::log(4.0)).epsilon(1e-14));
    // A target outside [0, N_v) is a located error, never a read past the row.
    for (double bad : {4.0, -1.0, 1.5}) {
      INFO("target " << bad);
      const Tensor tb = tensor({"t"}, {3}, {0, bad, 0});
      CHECK_THROWS_WITH(evaluate(*p, d, *resolve_sizes(d, {}, diags), {{"L", l}, {"T", tb}}),
                        Catch::Contains("g.napkin:") && Catch::Contains("is not an index along 'v' (0 to 3)") &&
                            Catch::Contains(" at t=1 of "));
    }
  }
}

TEST_CASE("gather targets are drawn in range, and int32 inputs over their range otherwise", "[eval][language]") {
  Run r = load("diagram g\naxis t = 50\naxis v = 7\nin L[t,v] : fp32\nin T[t] : int32\nin U[t] : int32\n"
               "G[t] = gather(L, T; v) + U\nout G : fp32\n");
  const auto bounds = target_bounds(*r.d, r.sizes);
  REQUIRE(bounds.size() == 1);
  CHECK(bounds.at("T") == 7);
  Tensor t = random_input(*r.d->find_input("T"), r.sizes, 1, bounds.at("T"));
  for (double x : t.data) CHECK((x >= 0 && x < 7 && x == std::floor(x)));
  Tensor u = random_input(*r.d->find_input("U"), r.sizes, 1);
  double widest = 0;
  for (double x : u.data) widest = std::max(widest, std::fabs(x));
  CHECK(widest > 1e6);  // uniform over int32's range
}
