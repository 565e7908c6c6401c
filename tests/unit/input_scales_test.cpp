// The scales test inputs are drawn at (diagrams/input_scales.hpp): 1/sqrt(fan-in) for an input
// contracted with a computed array, 1 otherwise; followed through calls.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>

#include "diagrams/input_scales.hpp"
#include "tests/support/run.hpp"

using namespace napkin;
using namespace napkin::test;

namespace {

/** input -> fan-in of `l`'s diagram. */
std::map<std::string, std::int64_t> fan_ins(const LoadedDiagram& l) {
  std::map<std::string, std::int64_t> m;
  for (const auto& s : input_scales(*l.program, *l.diagram, l.sizes)) m[s.input] = s.fan_in;
  return m;
}

/** input -> its fan-in factors, axis names or literals, joined by '*'. */
std::map<std::string, std::string> factors(const LoadedDiagram& l) {
  std::map<std::string, std::string> m;
  for (const auto& s : input_scales(*l.program, *l.diagram, l.sizes)) {
    std::string f;
    for (const auto& x : s.factors) f += (f.empty() ? "" : "*") + (x.axis.empty() ? std::to_string(x.literal) : x.axis);
    m[s.input] = f;
  }
  return m;
}

}  // namespace

TEST_CASE("transformer block: every projection weight gets 1/sqrt(fan-in), through the calls", "[input-scales]") {
  const LoadedDiagram l = load_library("transformer_block.napkin");
  using M = std::map<std::string, std::int64_t>;
  // Wq, Wk, Wv meet H1 over m; Wo meets A over g, r, d; W1, W3 meet H2 over m inside mlp_swiglu;
  // W2 meets the computed hidden activation over f. X and the norm weights are never contracted.
  CHECK(fan_ins(l) == M{{"X", 1}, {"norm1", 1}, {"Wq", 4096}, {"Wk", 4096}, {"Wv", 4096}, {"Wo", 8 * 4 * 128},
                        {"norm2", 1}, {"W1", 4096}, {"W3", 4096}, {"W2", 14336}});
  const auto f = factors(l);
  CHECK(f.at("Wo") == "g*r*d");
  CHECK(f.at("W1") == "m");  // the callee's m, bound to the caller's m
  CHECK(f.at("W2") == "f");
  CHECK(f.at("X").empty());
  for (const auto& s : input_scales(*l.program, *l.diagram, l.sizes)) CHECK(s.scale() == Approx(1 / std::sqrt(double(s.fan_in))));
}

TEST_CASE("inputs contracted only with inputs keep scale 1", "[input-scales]") {
  using M = std::map<std::string, std::int64_t>;
  CHECK(fan_ins(load_library("matmul.napkin")) == M{{"A", 1}, {"B", 1}});
  // Q and K meet each other; V meets the computed P over x, a softmax along x: an average, scale 1.
  CHECK(fan_ins(load_library("attention.napkin")) == M{{"Q", 1}, {"K", 1}, {"V", 1}});
  // Without the softmax (sigmoid attention) P V is a sum over x: V at 1/sqrt(x).
  CHECK(fan_ins(load_library("sigmoid_attention.napkin")).at("V") > 1);
  // W1 and W3 meet the input X (scale 1); W2 meets the computed H over f.
  CHECK(fan_ins(load_library("mlp_swiglu.napkin")) == M{{"X", 1}, {"W1", 1}, {"W3", 1}, {"W2", 14336}});
}

TEST_CASE("fan-in follows the sizes, takes the largest of several contractions and only the input's own contracted axes", "[input-scales]") {
  const auto l = load_text("diagram d\naxis t = 16\naxis m = 32\naxis k = 8\naxis f = 64\nin X[t,m] : bf16\nin W[m,f] : bf16\nin U[f,m] : bf16\n"
                           "in V[k] : bf16\nH[t,f] = contract(X, W; m)\nY[t,m] = contract(H, U; f)\nZ[t,f] = contract(Y, W; m)\n"
                           "S[t] = contract(Y, V, X; m, k)\nout Z : bf16\nout S : bf16\n",
                           {{"f", 96}});
  using M = std::map<std::string, std::int64_t>;
  // W: 1 with X, 32 with Y (computed): 32. U: f at its --set size. V carries only k of (m, k).
  // X meets Y (computed) over m: 32.
  CHECK(fan_ins(l) == M{{"X", 32}, {"W", 32}, {"U", 96}, {"V", 8}});
}

TEST_CASE("the scales are described in one line", "[input-scales]") {
  const LoadedDiagram l = load_library("mlp_swiglu.napkin");
  CHECK(describe_input_scales(input_scales(*l.program, *l.diagram, l.sizes)) == "W2 1/sqrt(14336); X, W1, W3 1");
  const LoadedDiagram m = load_library("matmul.napkin");
  CHECK(describe_input_scales(input_scales(*m.program, *m.diagram, m.sizes)) == "all 1");
}
