// derive-contraction-order: contractions of three or more operands split into pairwise ones.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "derive/derivation.hpp"
#include "derive/passes/contraction_order.hpp"
#include "diagrams/eval.hpp"
#include "diagrams/graph_view.hpp"
#include "diagrams/printer.hpp"
#include "tests/support/run.hpp"

using namespace napkin;
using namespace napkin::test;

namespace {

const char* kChainAxes = "axis i = 4096\naxis j = 4096\naxis k = 4096\naxis l = 4096\n"
                         "in A[i,j] : bf16\nin B[j,k] : bf16\nin C[k,l] : bf16\n";

/** Contractions of `n` or more operands left in `d`. */
int contractions_of_at_least(const Diagram& d, std::size_t n) {
  int count = 0;
  for (const auto* s : d.statements())
    walk(*s->expr, [&](const Expr& e) { count += e.kind == Expr::Kind::apply && e.op == Op::contract && e.args.size() >= n; });
  return count;
}

}  // namespace

TEST_CASE("a contraction of three operands is priced as the hand-written chain of two", "[derive][contraction-order]") {
  LoadedDiagram one = load_text(std::string("diagram chain3\n") + kChainAxes + "D[i,l] = contract(A, B, C; j, k)\nout D : bf16\n");
  LoadedDiagram two = load_text(std::string("diagram chain2\n") + kChainAxes +
                                "T[i,k] = contract(A, B; j)\nD[i,l] = contract(T, C; k)\nout D : bf16\n");
  Hardware hw = load_hardware("h100");
  // Unsplit, the one statement is one SIMT loop nest over i, j, k, l: far slower than the chain.
  const double unsplit = search_schedule(*one.program, *one.diagram, one.sizes, hw, {}, {}).cost.t_total;
  Derivation d1 = derive(*one.program, *one.diagram, one.sizes, hw);
  Derivation d2 = derive(*two.program, *two.diagram, two.sizes, hw);
  CHECK(unsplit > 100 * d2.chosen.cost.t_total);
  CHECK(d1.chosen.cost.t_total == Approx(d2.chosen.cost.t_total).epsilon(0.03));
  REQUIRE(d1.rewritten);
  CHECK_FALSE(d2.rewritten);  // nothing to split: the diagram as given
  CHECK(contractions_of_at_least(*d1.rewritten, 3) == 0);
  REQUIRE(d1.rewritten->find_statement("D_c1"));
  CHECK(*d1.rewritten->find_statement("D_c1")->expr == *load_text(std::string("diagram x\n") + kChainAxes +
                                                                    "T[i,k] = contract(A, B; j)\nout T : fp32\n")
                                                              .diagram->find_statement("T")->expr);
  REQUIRE_FALSE(d1.steps.empty());
  const Step& s = d1.steps.front();
  CHECK(s.pass == "derive-contraction-order");
  CHECK(s.kernel == "D");
  CHECK(s.move == "contract(A, B, C; j, k) split as (A B) C");
  CHECK(s.detail.find("2.75e+11 FLOP, predicted") == 0);
  CHECK(s.detail.find("for A (B C)") != std::string::npos);
  CHECK(s.detail.find("(3 orders weighed)") != std::string::npos);
}

TEST_CASE("the order follows the shapes: a thin last factor is contracted first", "[derive][contraction-order]") {
  LoadedDiagram l = load_text(std::string("diagram chain3\n") + kChainAxes + "D[i,l] = contract(A, B, C; j, k)\nout D : bf16\n",
                              {{"l", 16}});
  Hardware hw = load_hardware("h100");
  ContractionOrderResult r = order_contractions(*l.program, *l.diagram, l.sizes, hw);
  REQUIRE(r.changed);
  REQUIRE(r.steps.size() == 1);
  CHECK(r.steps[0].move == "contract(A, B, C; j, k) split as A (B C)");
  const Statement* c1 = r.diagram.find_statement("D_c1");
  REQUIRE(c1);
  CHECK(c1->axes == std::vector<std::string>{"j", "l"});
  CHECK(print_expr(*c1->expr) == "contract(B, C; k)");
  CHECK(print_expr(*r.diagram.find_statement("D")->expr) == "contract(A, D_c1; j)");
}

TEST_CASE("split diagrams evaluate as the original within 1e-12", "[derive][contraction-order]") {
  struct Case {
    const char* text;
    int new_statements;
    const char* weighed;  ///< in the first step's detail
  };
  const Case cases[] = {
      // A batched chain whose reduced axis j is carried by three operands: j is reduced only when all are joined.
      {"diagram a\naxis b = 2\naxis i = 5\naxis j = 4\naxis k = 6\naxis l = 3\nin A[b,i,j] : fp32\nin B[b,j,k] : fp32\n"
       "in C[k,l] : fp32\nin E[l,j] : fp32\nY[b,i] = contract(A, B, C, E; j, k, l)\nout Y : fp32\n",
       2, "(15 orders weighed)"},
      // Operands that are expressions, inside a larger expression, beside a pairwise contraction; an
      // axis (m) that only one operand carries; a name (Y_c1) already taken.
      {"diagram b\naxis i = 5\naxis j = 4\naxis k = 6\naxis m = 3\nin A[i,j,m] : fp32\nin B[j,k] : fp32\nin C[k] : fp32\n"
       "Y_c1[i] = sum(contract(A, B; j, k, m); i) + contract(A, B; j, k, m)\n"
       "Y[i] = contract(exp(A * 0.1), B + 1, C; j, k, m) * 2 + Y_c1\nout Y : fp32\n",
       1, "(3 orders weighed)"},
      // Nested: a contraction of three inside another's operands; an outer product (no axes after ';').
      {"diagram c\naxis i = 3\naxis j = 4\naxis k = 5\nin A[i] : fp32\nin B[j] : fp32\nin C[k] : fp32\nin W[i,j,k] : fp32\n"
       "Y[i,j] = contract(contract(A, B, C), W, C; k)\nout Y : fp32\n",
       2, "orders weighed"},
      // Seven operands: the greedy order.
      {"diagram d\naxis a = 3\naxis b = 4\naxis c = 2\naxis e = 5\naxis f = 3\naxis g = 2\naxis h = 4\naxis o = 3\n"
       "in A[a,b] : fp32\nin B[b,c] : fp32\nin C[c,e] : fp32\nin D[e,f] : fp32\nin E[f,g] : fp32\nin F[g,h] : fp32\n"
       "in G[h,o] : fp32\nY[a,o] = contract(A, B, C, D, E, F, G; b, c, e, f, g, h)\nout Y : fp32\n",
       5, "(1 greedy order)"},
  };
  Hardware hw = load_hardware("h100");
  for (const auto& c : cases) {
    INFO(c.text);
    LoadedDiagram l = load_text(c.text);
    ContractionOrderResult r = order_contractions(*l.program, *l.diagram, l.sizes, hw);
    REQUIRE(r.changed);
    CHECK(contractions_of_at_least(r.diagram, 3) == 0);
    CHECK(r.diagram.statements().size() == l.diagram->statements().size() + static_cast<std::size_t>(c.new_statements));
    REQUIRE_FALSE(r.steps.empty());
    CHECK(r.steps.front().detail.find(c.weighed) != std::string::npos);
    // The rewritten diagram prints as text that parses and verifies to it.
    File f;
    f.diagrams.push_back(r.diagram);
    const std::string text = print_file(f);
    INFO(text);
    LoadedDiagram again = load_text(text);
    CHECK(*again.diagram == r.diagram);
    std::map<std::string, Tensor> in;
    for (const auto* i : l.diagram->inputs()) in[i->name] = random_input(*i, l.sizes, 7);
    const auto want = evaluate(*l.program, *l.diagram, l.sizes, in);
    const auto got = evaluate(*again.program, *again.diagram, again.sizes, in);
    CHECK(relative_difference(got, want) < 1e-12);
  }
}

TEST_CASE("a diagram without contractions of three operands comes back as it was", "[derive][contraction-order]") {
  Hardware hw = load_hardware("h100");
  for (const auto& file : library_files()) {
    INFO(file);
    LoadedDiagram l = load_library(file);
    ContractionOrderResult r = order_contractions(*l.program, *l.diagram, l.sizes, hw);
    CHECK_FALSE(r.changed);
    CHECK(r.steps.empty());
    CHECK(r.diagram == *l.diagram);
  }
}

TEST_CASE("derive, emit and render work on the split diagram from the command line", "[derive][contraction-order][cli]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("napkin-contraction-order-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string file = (dir / "chain3.napkin").string();
  std::ofstream(file) << "diagram chain3\n" << kChainAxes << "D[i,l] = contract(A, B, C; j, k)\nout D : bf16\n";
  const std::string sizes = " --set i=256 --set j=128 --set k=64 --set l=32";
  RunResult derived = run_napkin("derive " + file + sizes);
  CHECK(derived.status == 0);
  CHECK(derived.output.find("[derive-contraction-order] D: contract(A, B, C; j, k) split as") != std::string::npos);
  for (const char* target : {"cpu", "cuda", "pseudo"}) {
    INFO(target);
    RunResult emitted = run_napkin("emit " + file + sizes + " --target " + target);
    CHECK(emitted.status == 0);
    CHECK(emitted.output.find("D_c1") != std::string::npos);
  }
  RunResult drawn = run_napkin("render " + file + sizes + " --derive --format dot");
  CHECK(drawn.status == 0);
  CHECK(drawn.output.find("D_c1") != std::string::npos);
  fs::remove_all(dir);
}
