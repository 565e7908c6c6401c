// The labelled IR (derive/labelled.hpp): passes as rewrites, schedules as printed labels, and
// `napkin derive --dump-after`.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "derive/derivation.hpp"
#include "derive/labelled.hpp"
#include "derive/registry.hpp"
#include "diagrams/parser.hpp"
#include "diagrams/printer.hpp"
#include "tests/support/run.hpp"

using namespace napkin;
using namespace napkin::test;

namespace {

std::string print_diagrams(const std::vector<Diagram>& ds) { return print_labelled(ds); }

/** Parses printed diagrams back (the printer's output must parse); REQUIREs no diagnostic. */
std::vector<Diagram> reparse(const std::string& text, SourceManager& sources) {
  DiagnosticEngine diags;
  ParseResult r = parse_file(*sources.add("labelled.napkin", text), diags);
  INFO(diags.render());
  REQUIRE(!diags.has_errors());
  return r.file.diagrams;
}

}  // namespace

TEST_CASE("a derived schedule is the printed form of the labels the passes write, for every bundled diagram", "[derive][labels]") {
  Hardware hw = load_hardware("h100");
  for (const auto& path : library_files()) {
    INFO(path);
    LoadedDiagram l = load_library(path);
    Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
    const Diagram& d = dv.diagram(*l.diagram);  // as derive rewrote it (derive-bind-reduction, contraction order): what the schedule is of
    REQUIRE(dv.after.size() == pass_registry().size());
    const std::vector<Diagram>& labels = dv.after.back().second;
    REQUIRE(labels.size() == dv.chosen.kernels.size());
    DiagnosticEngine diags;
    // labels -> schedule: exactly the schedule the search chose.
    auto from_labels = schedule_of(labels, dv.chosen.schedule.name, d.name, diags);
    REQUIRE(from_labels);
    CHECK(print_schedule(*from_labels) == print_schedule(dv.chosen.schedule));
    CHECK(*from_labels == dv.chosen.schedule);
    // schedule text -> parse -> labels -> schedule: the same again.
    std::string text = print_schedule(dv.chosen.schedule);
    SourceManager sources;
    auto parsed = parse_schedule(*sources.add("derived.schedule", text), diags);
    REQUIRE(parsed);
    auto relabelled = schedule_of(labelled_kernels(*l.program, d, *parsed, {}), parsed->name, d.name, diags);
    REQUIRE(relabelled);
    CHECK(*relabelled == dv.chosen.schedule);
    // labels -> printed diagrams -> parse -> labels: same text, same schedule.
    std::string printed = print_diagrams(labels);
    auto back = reparse(printed, sources);
    CHECK(print_diagrams(back) == printed);
    auto from_text = schedule_of(back, dv.chosen.schedule.name, d.name, diags);
    REQUIRE(from_text);
    CHECK(*from_text == dv.chosen.schedule);
  }
}

TEST_CASE("each pass's labelled diagrams before and after it match their golden files and parse back", "[derive][labels][golden]") {
  Hardware hw = load_hardware("h100");
  for (const std::string stem : {"attention", "matmul"}) {
    INFO(stem);
    LoadedDiagram l = load_library(std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/" + stem + ".napkin");
    Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
    check_golden("passes/" + stem + "/00-source.napkin", print_diagrams({*l.diagram}));  // before the first pass
    int i = 0;
    for (const auto& [pass, diagrams] : dv.after) {
      INFO(pass);
      std::string after = print_diagrams(diagrams);
      ++i;
      const std::string prefix = (i < 10 ? "0" : "") + std::to_string(i) + "-";
      check_golden("passes/" + stem + "/" + prefix + pass + ".napkin", after);
      SourceManager sources;
      CHECK(print_diagrams(reparse(after, sources)) == after);
    }
  }
}

TEST_CASE("a pass that does not apply leaves its input unchanged", "[derive][labels]") {
  Hardware hw = load_hardware("h100");
  LoadedDiagram l = load_library(std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/attention.napkin");
  Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
  REQUIRE(!dv.chosen.kernels.front().plan.cluster());
  const auto& a = dv.after;
  REQUIRE(a[a.size() - 1].first == "derive-cluster");
  CHECK(a[a.size() - 1].second == a[a.size() - 2].second);  // no cluster: derive-cluster writes nothing
  CHECK(a[0].second.front() == *l.diagram);                 // weave analysis reads, writes no label
}

TEST_CASE("plan_of rejects labels that cannot form a plan, with their location", "[derive][labels]") {
  SourceManager sources;
  DiagnosticEngine diags;
  ParseResult r = parse_file(*sources.add("k.napkin",
                                          "diagram k\n"
                                          "axis a = 64 group 16 warps 4\n"
                                          "axis b = 64 cluster 2 warps 8\n"
                                          "in X[a,b] : bf16\n"
                                          "Y[a] = sum(X; b)\n"
                                          "out Y : bf16\n"),
                             diags);
  REQUIRE(!diags.has_errors());
  CHECK(!plan_of(r.file.diagrams.front(), diags));
  std::string text = diags.render();
  CHECK(text.find("k.napkin:3:13: error: 'cluster' on axis 'b' of kernel 'k' needs a group label") != std::string::npos);
  CHECK(text.find("k.napkin:3:13: error: kernel 'k' has 'warps' on axes 'a' and 'b'") != std::string::npos);
}

TEST_CASE("napkin derive --dump-after prints the labelled diagram, and an unknown pass is an error listing the valid ones", "[derive][labels][cli]") {
  const std::string file = std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/attention.napkin";
  RunResult ok = run_napkin("derive " + file + " --dump-after derive-stream-partition");
  CHECK(ok.status == 0);
  CHECK(ok.output.find("stream ") != std::string::npos);
  CHECK(ok.output.find("Relabelling steps") == std::string::npos);
  RunResult bad = run_napkin("derive " + file + " --dump-after derive-nothing");
  CHECK(bad.status == 1);
  CHECK(bad.output.find("unknown pass 'derive-nothing'; the passes are derive-contraction-order, derive-split-reduction, derive-atomic-accumulation, derive-operand-relayout, derive-bind-reduction, derive-weave-analysis, derive-fusion") != std::string::npos);
}

TEST_CASE("napkin derive --dump-after writes the --set sizes its labels were chosen for", "[derive][labels][cli]") {
  const std::string file = std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/mlp_swiglu.napkin";
  RunResult r = run_napkin("derive " + file + " --set f=4096 --set t=1000 --dump-after derive-group-partition");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("axis f = 4096") != std::string::npos);
  CHECK(r.output.find("axis t = 1000") != std::string::npos);
  CHECK(r.output.find("14336") == std::string::npos);  // the declared width of f
  CHECK(r.output.find("axis m = 4096") != std::string::npos);  // not overridden: as declared
  // The dump parses back and verifies.
  const std::string dumped = std::filesystem::temp_directory_path() / ("napkin-dump-" + std::to_string(getpid()) + ".napkin");
  std::ofstream(dumped) << r.output;
  RunResult check = run_napkin("check " + dumped);
  INFO(check.output);
  CHECK(check.status == 0);
  std::filesystem::remove(dumped);
}
