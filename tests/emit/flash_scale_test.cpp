// The softmax scale folded into the exponent (lower/flash_scale.hpp): folded where the scale is
// uniform and provably positive and finite and the scaled value is read once on a path of masks
// and fused statements; a scale read from a scalar input (an fp8 dequantisation factor) folded
// with its sign taken at run time, where no mask lies on its path; not folded for a negative,
// zero or overflowing constant, a per-row scale, or a score read twice. Where folded, the CUDA keeps the max in the
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

TEST_CASE("flash scale: a runtime scale (fp8 dequantisation) is folded with its sign taken at run time", "[emit][cuda]") {
  LoadedDiagram l = load_library(std::string(NAPKIN_SOURCE_DIR) + "/tests/kernels/attention_fp8.napkin");
  Derivation dv = derive(*l.program, *l.diagram, l.sizes, load_hardware("h100"));
  const FlashForm& f = flash_of(dv);
  REQUIRE(f.scaled != nullptr);
  CHECK(f.scale_sign_at_run_time);
  const std::string cu = emit_cuda(*l.program, *l.diagram, dv, load_hardware("h100"));
  // the max on the negative side without a select in interior chunks; the fill +inf there
  CHECK(cu.find("const bool score_neg = score_scale < 0.0f;") != std::string::npos);
  CHECK(cu.find("mx[e / 2] = fmaxf(mx[e / 2], -S_reg[nt * 4 + e]);") != std::string::npos);
  CHECK(cu.find("(score_neg ? INFINITY : -INFINITY)") != std::string::npos);
  CHECK(cu.find("* score_log2 - ms[e / 2]") != std::string::npos);
  CHECK(cu.find("m_reg[0] * max_log2") != std::string::npos);
  // the score element itself is B, not B times the scale
  CHECK(cu.find("const float v = S_reg[nt * 4 + e];") != std::string::npos);
}

TEST_CASE("flash scale: a scalar input's scale folds only without a mask on its path", "[emit][cuda]") {
  const Hardware hw = load_hardware("h100");
  auto with_scalar = [](const std::string& s_line, const std::string& p_line) {
    std::string t = attention(s_line, p_line);
    return t.replace(t.find("in V"), 0, "in c[] : fp32\nin w[b] : fp32\n");
  };
  struct Case {
    std::string s, p;
    bool folded, runtime;
  };
  const std::vector<Case> cases = {
      {"S[b,q,x] = contract(Q, K; d) * (c / sqrt(d))", "P[b,q,x] = softmax(S; x)", true, true},
      {"S[b,q,x] = contract(Q, K; d) / c", "P[b,q,x] = softmax(S; x)", true, true},
      {"S[b,q,x] = contract(Q, K; d) * (-c)", "P[b,q,x] = softmax(S; x)", true, true},
      {"S[b,q,x] = contract(Q, K; d) * c", "P[b,q,x] = softmax(mask(S, causal(q, x)); x)", false, false},
      {"S[b,q,x] = contract(Q, K; d) * w", "P[b,q,x] = softmax(S; x)", false, false},
      {"S[b,q,x] = contract(Q, K; d) * exp(c)", "P[b,q,x] = softmax(S; x)", false, false},
  };
  for (const auto& c : cases) {
    INFO(c.s << " / " << c.p);
    LoadedDiagram l = load_text(with_scalar(c.s, c.p));
    Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
    const FlashForm& f = flash_of(dv);
    CHECK((f.scaled != nullptr) == c.folded);
    CHECK(f.scale_sign_at_run_time == c.runtime);
    const std::string cu = emit_cuda(*l.program, *l.diagram, dv, hw);
    CHECK((cu.find("const bool score_neg") != std::string::npos) == c.runtime);
  }
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

TEST_CASE("a scalar input is read once per kernel, at its start, not again after each epilogue store", "[emit][cuda]") {
  // The compiler repeats an ordinary load after every store it cannot prove disjoint: the fp8 GEMM's
  // PTX read sa and sb 288 times in its epilogue, the fp8 attention's sv 32 times (session 39).
  auto count = [](const std::string& s, const std::string& what) {
    std::size_t n = 0;
    for (auto at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
    return n;
  };
  const Hardware hw = load_hardware("h100");
  for (const char* file : {"/tests/kernels/gemm_fp8.napkin", "/tests/kernels/attention_fp8.napkin"}) {
    INFO(file);
    LoadedDiagram l = load_library(std::string(NAPKIN_SOURCE_DIR) + file);
    Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
    const std::string cu = emit_cuda(*l.program, *l.diagram, dv, hw);
    for (const auto* in : l.diagram->inputs()) {
      if (!in->axes.empty()) continue;
      INFO(in->name);
      const std::string decl = "const float scalar_" + in->name + " = napkin::to_f(a." + in->name + "[0]);";
      CHECK(count(cu, "a." + in->name + "[") == count(cu, decl));  // every read is a kernel-start declaration
      CHECK(count(cu, decl) >= 1);
      CHECK(count(cu, "scalar_" + in->name) > count(cu, decl));  // and the value is used
    }
  }
}
