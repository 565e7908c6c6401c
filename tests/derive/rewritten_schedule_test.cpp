// A schedule napkin derive prints for a diagram it rewrote before its search (derive-bind-reduction's
// statistics, derive-operand-relayout's copies) names the rewrite's statements; `--schedule` checks it
// against the same rewrite (cli load_schedule, SearchResult::rewritten), so the printed schedule loads
// back, prices the same and emits the same CUDA. And a saved schedule of a diagram with calls prices
// its call kernels as derive does (each at its callee's derivation).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>

#include "tests/support/run.hpp"

using napkin::test::RunResult;
using napkin::test::run_napkin;

namespace {

/** The schedule block of `napkin derive`'s text output, its two-space indent removed. */
std::string printed_schedule(const std::string& out) {
  const auto from = out.find("  schedule derived for ");
  const auto to = out.find("\nCost per kernel", from);
  REQUIRE(from != std::string::npos);
  REQUIRE(to != std::string::npos);
  std::istringstream in(out.substr(from, to - from));
  std::string text, line;
  while (std::getline(in, line)) text += (line.rfind("  ", 0) == 0 ? line.substr(2) : line) + "\n";
  return text;
}

/** The figure after `label` in `out` (e.g. "predicted total: "), as printed. */
std::string figure_after(const std::string& out, const std::string& pattern) {
  std::smatch m;
  REQUIRE(std::regex_search(out, m, std::regex(pattern)));
  return m[1];
}

/** derive's own prediction in its text output ("derived: N kernel(s), HBM .., predicted T"), as printed. */
std::string derived_prediction(const std::string& out) { return figure_after(out, "derived: +[0-9]+ kernel\\(s\\), HBM [^,]+, predicted ([0-9.]+ [um]s)"); }

/** `napkin COMMAND --schedule S REST`, S a file holding the schedule `derived` (a run of napkin
 *  derive) printed; the file is removed afterwards. */
RunResult with_printed_schedule(const RunResult& derived, const std::string& command, const std::string& rest = "") {
  const std::string schedule = std::filesystem::temp_directory_path().string() + "/napkin-printed-" + std::to_string(getpid()) + ".schedule";
  std::ofstream(schedule) << printed_schedule(derived.output);
  RunResult r = run_napkin(command + " --schedule " + schedule + rest);
  std::filesystem::remove(schedule);
  return r;
}

}  // namespace

TEST_CASE("a schedule derive printed for a diagram it rewrote loads back with --schedule: same price, same CUDA", "[derive][schedule]") {
  const std::string tmp = std::filesystem::temp_directory_path().string() + "/napkin-rewritten-" + std::to_string(getpid());
  for (const char* rel : {"diagrams/library/l2norm_attention.napkin", "tests/kernels/gemm_fp8_mn_major.napkin"}) {
    const std::string file = std::string(NAPKIN_SOURCE_DIR) + "/" + rel;
    INFO(rel);
    const RunResult d = run_napkin("derive " + file + " --hw h200");
    REQUIRE(d.status == 0);
    REQUIRE(std::regex_search(d.output, std::regex("\\[derive-(bind-reduction|operand-relayout)\\]")));  // the case: a rewrite
    const RunResult g = with_printed_schedule(d, "derive " + file + " --hw h200");
    INFO(g.output);
    CHECK(g.status == 0);
    CHECK(figure_after(g.output, "predicted total: ([0-9.]+ [um]s)") == derived_prediction(d.output));
    const RunResult e1 = run_napkin("emit " + file + " --hw h200 --target cuda -o " + tmp + "-a.cu");
    const RunResult e2 = with_printed_schedule(d, "emit " + file + " --hw h200 --target cuda", " -o " + tmp + "-b.cu");
    CHECK(e1.status == 0);
    CHECK(e2.status == 0);
    CHECK(napkin::test::slurp(tmp + "-a.cu") == napkin::test::slurp(tmp + "-b.cu"));
    for (const char* ext : {"-a.cu", "-b.cu"}) std::filesystem::remove(tmp + ext);
  }
}

TEST_CASE("a schedule naming a statement neither the diagram nor derive's rewrite has is a located error", "[derive][schedule]") {
  const std::string file = std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/l2norm_attention.napkin";
  const std::string schedule = std::filesystem::temp_directory_path().string() + "/napkin-rewritten-bad-" + std::to_string(getpid()) + ".schedule";
  std::ofstream(schedule) << "schedule s for l2norm_attention\nkernel A\n  fuse Qn_sum, Qn\nkernel B\n  fuse Kn_norm\n";
  const RunResult r = run_napkin("derive " + file + " --hw h200 --schedule " + schedule);
  std::filesystem::remove(schedule);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(r.output.find(":5:8: error: diagram 'l2norm_attention' has no statement 'Kn_norm'") != std::string::npos);
}

TEST_CASE("derive --schedule prices a call kernel at its callee's derivation, as derive does", "[derive][schedule]") {
  // The transformer block's schedule names its call kernels (H1, A, H2, Y) with `fuse` alone; checked
  // on their own they are SIMT loops over the woven axes (session 46: 32.1 ms printed against 5.9 ms).
  const std::string file = std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/transformer_block.napkin --hw h200 --set s=256";
  const RunResult d = run_napkin("derive " + file);
  REQUIRE(d.status == 0);
  const RunResult g = with_printed_schedule(d, "derive " + file);
  INFO(g.output);
  CHECK(g.status == 0);
  CHECK(figure_after(g.output, "predicted total: ([0-9.]+ [um]s)") == derived_prediction(d.output));
  CHECK(g.output.find("as derived for gqa_attention") != std::string::npos);  // the call kernel's row
}

TEST_CASE("render --schedule with a schedule of derive's rewrite draws the rewritten diagram", "[derive][schedule]") {
  const std::string file = std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/l2norm_attention.napkin --hw h200";
  const RunResult d = run_napkin("derive " + file);
  REQUIRE(d.status == 0);
  const RunResult r = with_printed_schedule(d, "render " + file, " --format dot -o -");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("\"op:Qn_sum\" [shape=box") != std::string::npos);  // the bound statistic, a statement of the rewrite only
}
