// Robust at scale (issue 15): nesting limits on calls and imports, located errors just past them,
// every command within a quarter of the default stack at the limits, and a search whose work
// grows linearly with the statements. Diagrams come from tools/scale_diagrams.sh, into a scratch
// folder of this process.
#include <catch2/catch.hpp>
#include <filesystem>
#include <regex>
#include <unistd.h>

#include "diagrams/limits.hpp"
#include "tests/support/run.hpp"

using namespace napkin;
using namespace napkin::test;

namespace {

namespace fs = std::filesystem;

/** A fresh scratch folder of this process. */
std::string scratch(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("napkin-scale-" + name + "-" + std::to_string(getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

/** Runs tools/scale_diagrams.sh with `args`; its first output line (a path, or the diagram when
 *  redirected by `args`). */
std::string generate(const std::string& args) {
  auto r = run_shell(std::string(NAPKIN_SOURCE_DIR) + "/tools/scale_diagrams.sh " + args);
  INFO(r.output);
  REQUIRE(r.status == 0);
  return r.output.substr(0, r.output.find('\n'));
}

/** `napkin ARGS` with the stack limited to 2 MiB, a quarter of the usual default. */
RunResult run_small_stack(const std::string& args) { return run_shell("ulimit -s 2048 && " + std::string(NAPKIN_BIN) + " " + args); }

/** The "candidate kernel partitions scored" count that `napkin derive` prints. */
double scored(const std::string& output) {
  std::smatch m;
  REQUIRE(std::regex_search(output, m, std::regex("search: ([0-9]+) candidate kernel partitions scored")));
  return std::stod(m[1]);
}

}  // namespace

TEST_CASE("calls nested to the limit run every command and one more is an error at that call", "[scale][limits]") {
  std::string dir = scratch("calls");
  fs::create_directories(dir + "/at");
  fs::create_directories(dir + "/over");
  // At the limit, each call inside an expression nested 250 deep (the parser allows 256): the worst
  // the limits admit, run with a quarter of the default stack.
  std::string at = generate("calls " + std::to_string(kMaxCallDepth) + " " + dir + "/at 250");
  for (std::string cmd : {"check", "eval", "derive --format json", "emit --target cuda", "emit --target cpu"}) {
    if (cmd == "eval") cmd += " -o " + dir + "/at/eval";
    auto r = run_small_stack(cmd + " " + at);
    INFO(cmd << "\n" << r.output.substr(0, 2000));
    CHECK(r.status == 0);
  }
  std::string over = generate("calls " + std::to_string(kMaxCallDepth + 1) + " " + dir + "/over");
  for (std::string cmd : {"check", "eval", "derive", "emit --target cuda"}) {
    auto r = run_napkin(cmd + " " + over);
    INFO(cmd << "\n" << r.output);
    CHECK(r.status == 1);
    CHECK(r.output.find("calls.napkin:12:10: error: calls nested too deeply: this call of 'c65' is the 65th nested call "
                        "(c0 -> c1 -> ... -> c64 -> c65); at most 64 calls may nest") != std::string::npos);
    CHECK(r.output.find("         ^") != std::string::npos);
  }
  fs::remove_all(dir);
}

TEST_CASE("imports nested to the limit load and one more is an error at that import", "[scale][limits]") {
  std::string dir = scratch("imports");
  fs::create_directories(dir + "/at");
  fs::create_directories(dir + "/over");
  auto at = run_small_stack("check " + generate("imports " + std::to_string(kMaxImportDepth) + " " + dir + "/at"));
  INFO(at.output);
  CHECK(at.status == 0);
  auto over = run_napkin("check " + generate("imports " + std::to_string(kMaxImportDepth + 1) + " " + dir + "/over"));
  INFO(over.output);
  CHECK(over.status == 1);
  CHECK(over.output.find("i64.napkin:1:1: error: imports nested too deeply: this import would be the 65th nested one "
                         "(from i0.napkin); at most 64 imports may nest") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("calls that expand past the limit are an error and below it every command runs", "[scale][limits]") {
  // Diagrams each calling the next twice: depth 11 makes 2^12 - 2 = 4094 calls, depth 12 8190.
  std::string dir = scratch("diamond");
  fs::create_directories(dir + "/at");
  fs::create_directories(dir + "/over");
  std::string at = generate("diamond 11 " + dir + "/at");
  for (std::string cmd : {"eval -o " + dir + "/at/eval", std::string("derive --format json"), std::string("emit --target cuda")}) {
    auto r = run_napkin(cmd + " " + at + " > /dev/null");
    INFO(cmd << "\n" << r.output);
    CHECK(r.status == 0);
  }
  auto over = run_napkin("derive " + generate("diamond 12 " + dir + "/over"));
  INFO(over.output);
  CHECK(over.status == 1);
  CHECK(over.output.find("diamond.napkin:89:10: error: calls expand too much: diagram 'c0' makes more than 4096 calls") !=
        std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("derive's search grows linearly with the statements, at any count", "[scale][derive]") {
  // 100 statements used to stop at an assertion (at most 62); the parallel shape (independent
  // statements and their sum) made the search exponential from 13.
  std::string dir = scratch("search");
  for (std::string kind : {"chain", "parallel"}) {
    double work[2];
    int i = 0;
    for (int n : {25, 100}) {
      std::string file = dir + "/" + kind + ".napkin";
      generate(kind + " " + std::to_string(n) + " > " + file);
      auto r = run_napkin("derive " + file);
      INFO(kind << " " << n << "\n" << r.output.substr(r.output.size() > 3000 ? r.output.size() - 3000 : 0));
      REQUIRE(r.status == 0);
      work[i++] = scored(r.output);
    }
    INFO(kind << ": " << work[0] << " plans scored at 25 statements, " << work[1] << " at 100");
    CHECK(work[1] <= 6 * work[0]);  // linear: 4x; the subset search grew far faster
  }
  fs::remove_all(dir);
}
