// The softmax scale folded into the exponent (lower/flash_scale.hpp): folded where the scale is
// uniform and provably positive and finite and the scaled value is read once on a path of masks
// and fused statements; not folded for a runtime scale (its sign unknown), a negative, zero or
// overflowing constant, or a score read twice. Where folded, the CUDA keeps the max in the
// unscaled units and multiplies by score_log2 in the exponent; the kernels are compiled by
// cuda_compile_test and run on the GPU by tests/gpu/sweep.sh.
#include <catch2/catch.hpp>

#include "derive/derivation.hpp"
#include "emit/cuda_emitter.hpp"
#include "lower/flash_scale.hpp"
#include "tests/support/run.hpp"

using namespace napkin;
using namespace napkin::test;

namespace {

std::string attention(const std::string& s_line, const std::string& p_line) {
  return "diagram a\naxis b = 2\naxis q = 256\naxis x = 256\naxis d = 64\n"
         "in Q[b,q,d] : bf16\nin K[b,x,d] : bf16\nin V[b,x,d] : bf16\n" +
         s_line + "\n" + p_line + "\nO[b,q,d] = contract(P, V; x)\nout O : bf16\n";
}

const FlashForm& flash_of(const Derivation& dv) {
  REQUIRE(dv.chosen.kernels.size() == 1);
  const KernelSpec& spec = *dv.chosen.kernels[0].cost.spec;
  REQUIRE(spec.strategy == Strategy::flash);
  return *spec.flash;
}

}  // namespace

TEST_CASE("flash scale: folded where positive and finite, kept where not provable", "[emit][cuda]") {
  const Hardware hw = load_hardware("h100");
  struct Case {
    std::string s, p;
    bool folded, divides;
  };
  const std::vector<Case> cases = {
      {"S[b,q,x] = contract(Q, K; d) * rsqrt(d)", "P[b,q,x] = softmax(S; x)", true, false},
      {"S[b,q,x] = rsqrt(d) * contract(Q, K; d)", "P[b,q,x] = softmax(mask(S, causal(q, x)); x)", true, false},
      {"S[b,q,x] = contract(Q, K; d) / sqrt(d)", "P[b,q,x] = softmax(S; x)", true, true},
      {"S[b,q,x] = contract(Q, K; d) * (0.5 / sqrt(d))", "P[b,q,x] = softmax(S; x)", true, false},
      {"S[b,q,x] = contract(Q, K; d) * -0.125", "P[b,q,x] = softmax(S; x)", false, false},
      {"S[b,q,x] = contract(Q, K; d) * 0", "P[b,q,x] = softmax(S; x)", false, false},
      {"S[b,q,x] = contract(Q, K; d) * (1e30 * 1e30)", "P[b,q,x] = softmax(S; x)", false, false},
      {"S[b,q,x] = contract(Q, K; d) * rsqrt(d)", "P[b,q,x] = softmax(S + S * S; x)", false, false},
      {"S[b,q,x] = contract(Q, K; d) * rsqrt(d)", "P[b,q,x] = softmax(mask(S, S); x)", false, false},
      {"S[b,q,x] = contract(Q, K; d) * rsqrt(d)", "P[b,q,x] = sigmoid(S)", false, false},
  };
  for (const auto& c : cases) {
    INFO(c.s << " / " << c.p);
    LoadedDiagram l = load_text(attention(c.s, c.p));
    Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
    const FlashForm& f = flash_of(dv);
    CHECK((f.scaled != nullptr) == c.folded);
    CHECK(f.scale_divides == c.divides);
    const std::string cu = emit_cuda(*l.program, *l.diagram, dv, hw);
    CHECK((cu.find("score_log2 = score_scale * LOG2E") != std::string::npos) == c.folded);
    CHECK((cu.find("* score_log2 - ms[e / 2]") != std::string::npos) == c.folded);
  }
}

TEST_CASE("flash scale: a runtime scale (fp8 dequantisation) is not folded (its sign is not known)", "[emit][cuda]") {
  LoadedDiagram l = load_library(std::string(NAPKIN_SOURCE_DIR) + "/tests/kernels/attention_fp8.napkin");
  Derivation dv = derive(*l.program, *l.diagram, l.sizes, load_hardware("h100"));
  CHECK(flash_of(dv).scaled == nullptr);
}

TEST_CASE("flash scale: positivity by interval arithmetic on log2", "[emit]") {
  auto expr = [&](const std::string& text) {
    LoadedDiagram m = load_text(attention("S[b,q,x] = contract(Q, K; d) * (" + text + ")", "P[b,q,x] = softmax(S; x)"));
    const Statement* s = m.diagram->find_statement("S");
    REQUIRE(s);
    return std::make_pair(std::move(m), s->expr->args[1]);
  };
  for (const auto& [text, want] : std::vector<std::pair<std::string, bool>>{
           {"rsqrt(d)", true}, {"1 / sqrt(d)", true}, {"d * d", false}, {"2", true}, {"-2", false}, {"d - 1", false},
           {"exp(d)", false}, {"1e-20 * 1e-20", false}, {"sqrt(d) * 1e20", true}}) {
    INFO(text);
    auto [m, e] = expr(text);
    CHECK(positive_finite_uniform(*m.diagram, *e) == want);
  }
}
