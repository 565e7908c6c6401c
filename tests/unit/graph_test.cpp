// Boost.Graph views: topological order, cycles, reachability, the call graph.
#include <catch2/catch.hpp>

#include "diagrams/graph_view.hpp"
#include "diagrams/program.hpp"

using namespace napkin;

TEST_CASE("dataflow graph order, reachability and cycles", "[graph]") {
  DiagnosticEngine diags;
  auto p = load_program_text("g.napkin",
                             "diagram t\naxis a = 2\nin X[a] : fp32\nC[a] = B + 1\nB[a] = X * 2\nD[a] = C + X\nout D : fp32\n", diags);
  REQUIRE_FALSE(diags.has_errors());
  NamedGraph g = dataflow_graph(p->select(""));
  auto order = g.topological_order();
  REQUIRE(order);
  auto pos = [&](const std::string& n) { return std::find(order->begin(), order->end(), *g.index(n)) - order->begin(); };
  CHECK(pos("X") < pos("B"));
  CHECK(pos("B") < pos("C"));
  CHECK(pos("C") < pos("D"));
  CHECK(g.reaches(*g.index("X"), *g.index("D")));
  CHECK_FALSE(g.reaches(*g.index("D"), *g.index("X")));
  CHECK(g.find_cycle().empty());

  NamedGraph cyc({"A", "B", "C"}, {{0, 1}, {1, 2}, {2, 1}});
  CHECK_FALSE(cyc.topological_order());
  auto c = cyc.find_cycle();
  REQUIRE(c.size() == 2);
  CHECK(cyc.names()[c[0]] == "B");
}

TEST_CASE("call graph has an edge from caller to callee", "[graph]") {
  DiagnosticEngine diags;
  auto p = load_program_text("g.napkin",
                             "diagram f\naxis a = 2\nin X[a] : fp32\nout X : fp32\n\n"
                             "diagram g\naxis a = 2\nin X[a] : fp32\nY[a] = f(X)\nout Y : fp32\n", diags);
  NamedGraph cg = call_graph(p->diagrams);
  CHECK(cg.reaches(*cg.index("g"), *cg.index("f")));
  CHECK_FALSE(cg.reaches(*cg.index("f"), *cg.index("g")));
}
