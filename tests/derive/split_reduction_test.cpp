// derive-split-reduction: a reduced axis of a contraction split off into fp32 partials and a sum.
#include <catch2/catch.hpp>
#include <regex>

#include "derive/derivation.hpp"
#include "derive/passes/split_reduction.hpp"
#include "diagrams/eval.hpp"
#include "diagrams/printer.hpp"
#include "tests/support/run.hpp"

using namespace napkin;
using namespace napkin::test;

namespace {

/** GQA attention's backward as `napkin grad` writes it (gqa_attention_bshd.napkin, causal), at
 *  the shape of a Llama-3-8B layer at 2048 tokens: 8 key/value heads of 4 query heads each. */
std::string gqa_backward(int g, int r, int q, int x, int d) {
  return "diagram gqa_bwd\naxis b = 1\naxis g = " + std::to_string(g) + "\naxis r = " + std::to_string(r) + "\naxis q = " + std::to_string(q) +
         "\naxis x = " + std::to_string(x) + "\naxis d = " + std::to_string(d) +
         "\nin Q[b,q,g,r,d] : bf16\nin K[b,x,g,d] : bf16\nin V[b,x,g,d] : bf16\nin dO[b,q,g,r,d] : bf16\nin O[b,q,g,r,d] : bf16\n"
         "in P_lse[b,g,r,q] : fp32\n"
         "S[b,g,r,q,x] = contract(Q, K; d) * rsqrt(d)\n"
         "P[b,g,r,q,x] = exp(mask(S, causal(q, x)) - P_lse)\n"
         "dP[b,g,r,q,x] = contract(dO, V; d)\n"
         "dP_rowsum[b,q,g,r] = sum(dO * O; d)\n"
         "dS[b,g,r,q,x] = P * (dP - dP_rowsum) * causal(q, x)\n"
         "dQ[b,q,g,r,d] = contract(dS, K; x) * rsqrt(d)\n"
         "dK[b,x,g,d] = contract(dS, Q; r, q) * rsqrt(d)\n"
         "dV[b,x,g,d] = contract(dO, P; q, r)\n"
         "out dQ : bf16\nout dK : bf16\nout dV : bf16\n";
}

const Statement* statement(const Diagram& d, const std::string& name) {
  const Statement* s = d.find_statement(name);
  REQUIRE(s != nullptr);
  return s;
}

}  // namespace

TEST_CASE("GQA's backward splits the query heads off dK and dV where one wave of key tiles leaves SMs idle", "[derive][split-reduction]") {
  const Hardware hw = load_hardware("h200");
  LoadedDiagram l = load_text(gqa_backward(8, 4, 2048, 2048, 128));
  SplitReductionResult r = split_reductions(*l.program, *l.diagram, l.sizes, hw);
  REQUIRE(r.changed());
  const Diagram& d = *r.rewritten;
  for (const std::string y : {"dK", "dV"}) {
    INFO(y);
    const Statement* part = statement(d, y + "_r");
    CHECK(part->axes == AxisList{"b", "x", "g", "r", "d"});  // the output's innermost axis stays innermost
    CHECK(part->dtype == DType::fp32);
    const Statement* sum = statement(d, y);
    CHECK(sum->expr->kind == Expr::Kind::apply);
    CHECK(sum->expr->op == Op::sum);
    CHECK(sum->expr->axes == AxisList{"r"});
  }
  CHECK(statement(d, "dQ")->expr == statement(*l.diagram, "dQ")->expr);  // one reduced axis: not eligible
  REQUIRE(r.steps.size() == 1);
  CHECK(r.steps[0].pass == "derive-split-reduction");
  CHECK(r.steps[0].move.find("split r off") != std::string::npos);
  CHECK(r.steps[0].license.find("associative-sum") != std::string::npos);
  // q (2048) is longer than the SMs: never a candidate; the search kept is of the rewrite.
  REQUIRE(r.kept.has_value());
  REQUIRE(r.kept->searched.has_value());
  const Derivation whole = derive(*l.program, *l.diagram, l.sizes, hw);
  CHECK(whole.rewritten != nullptr);
  CHECK(whole.chosen.cost.t_total == Approx(r.kept->searched->first.cost.t_total));
  CHECK(whole.chosen.cost.t_total < search_with_unfused(*l.program, *l.diagram, l.sizes, hw, {}, {}).first.cost.t_total);

  // The rewrite prints, parses back, and computes what the diagram as given does (fp64
  // evaluator; the partials rounded to fp32), here at a small shape of the same text.
  File f;
  f.diagrams.push_back(d);
  std::string text = print_file(f);
  for (const auto& [axis, n] : std::vector<std::pair<std::string, std::string>>{{"g", "2"}, {"r", "3"}, {"q", "7"}, {"x", "5"}, {"d", "4"}})
    text = std::regex_replace(text, std::regex("axis " + axis + " = [0-9]+"), "axis " + axis + " = " + n);
  INFO(text);
  LoadedDiagram split = load_text(text), given = load_text(gqa_backward(2, 3, 7, 5, 4));
  std::map<std::string, Tensor> in;
  for (const auto* i : given.diagram->inputs()) in[i->name] = random_input(*i, given.sizes, 11);
  const auto want = evaluate(*given.program, *given.diagram, given.sizes, in);
  const auto got = evaluate(*split.program, *split.diagram, split.sizes, in);
  CHECK(relative_difference(got, want) < 1e-6);
}

TEST_CASE("only contractions a split keeps linear are split", "[derive][split-reduction]") {
  const Hardware hw = load_hardware("h100");
  // An added term would be summed |r| times; a factor reading r is refused (conservatively); one reduced
  // axis leaves nothing to split; and r longer than the SMs is never a candidate.
  for (const char* text : {"diagram s\naxis r = 4\naxis q = 4096\naxis m = 64\nin A[r,q,m] : bf16\nin B[r,q,m] : bf16\nin C[m] : fp32\n"
                           "Y[m] = contract(A, B; r, q) + C\nout Y : bf16\n",
                           "diagram s\naxis r = 4\naxis q = 4096\naxis m = 64\nin A[r,q,m] : bf16\nin B[r,q,m] : bf16\nin C[r] : fp32\n"
                           "Y[m] = contract(A, B; r, q) * sum(C; r)\nout Y : bf16\n",
                           "diagram s\naxis q = 4096\naxis m = 64\nin A[q,m] : bf16\nin B[q,m] : bf16\nY[m] = contract(A, B; q)\nout Y : bf16\n",
                           "diagram s\naxis r = 4096\naxis q = 4096\naxis m = 64\nin A[r,q,m] : bf16\nin B[r,q,m] : bf16\n"
                           "Y[m] = contract(A, B; r, q)\nout Y : bf16\n"}) {
    INFO(text);
    LoadedDiagram l = load_text(text);
    SplitReductionResult r = split_reductions(*l.program, *l.diagram, l.sizes, hw);
    CHECK_FALSE(r.changed());
    CHECK(r.steps.empty());
    CHECK_FALSE(r.kept.has_value());
  }
  // A factor free of the reduced axes stays with the partials: Y_r = contract(A, B; q) * C / 2.
  LoadedDiagram l = load_text("diagram s\naxis r = 4\naxis q = 4096\naxis m = 64\nin A[r,q,m] : bf16\nin B[r,q,m] : bf16\nin C[m] : fp32\n"
                              "Y[m] = -(contract(A, B; r, q) * C / 2)\nout Y : bf16\n");
  SplitReductionResult r = split_reductions(*l.program, *l.diagram, l.sizes, hw);
  REQUIRE(r.steps.size() == 1);  // weighed: kept or not, the model says which
  CHECK(r.steps[0].detail.find("as given") != std::string::npos);
}
