// The napkin binary: exit codes, stdin, eval outputs, render, help and version.
#include <catch2/catch.hpp>
#include <filesystem>
#include <unistd.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "diagrams/npy.hpp"
#include "tests/support/run.hpp"

using namespace napkin;
using namespace napkin::test;

namespace {
std::string lib(const std::string& f) { return std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/" + f; }
/** A scratch path of this process: concurrent test runs must not share files. */
std::string scratch(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "-" + std::to_string(getpid()))).string();
}
}  // namespace

TEST_CASE("check: 0 on a good file, 1 with located errors on a bad one", "[cli]") {
  auto ok = run_napkin("check " + lib("attention.napkin"));
  CHECK(ok.status == 0);
  CHECK(ok.output.find("ok: diagram 'attention'") != std::string::npos);
  std::string bad_file = scratch("napkin-cli-test-bad.napkin");
  write_file_atomic(bad_file, "diagram t\naxis a = 4\nin X[a,z] : fp32\nout X : fp32\n");
  auto bad = run_napkin("check - < " + bad_file);
  CHECK(bad.status == 1);
  CHECK(bad.output.find("<stdin>:3:8: error: unknown axis 'z'") != std::string::npos);
}

TEST_CASE("usage errors exit 1, help and version exit 0", "[cli]") {
  CHECK(run_napkin("--version").output.find("napkin 0.1.0") != std::string::npos);
  CHECK(run_napkin("--version").status == 0);
  CHECK(run_napkin("check --help").status == 0);
  CHECK(run_napkin("frobnicate").status == 1);
  CHECK(run_napkin("check /no/such/file.napkin").status == 1);
  CHECK(run_napkin("eval " + lib("attention.napkin") + " --set q=abc").status == 1);
  CHECK(run_napkin("eval " + lib("attention.napkin") + " --set z=4").output.find("has no axis 'z'") != std::string::npos);
}

TEST_CASE("eval writes inputs and outputs as .npy, and refuses huge sizes without writing", "[cli][eval]") {
  std::string dir = scratch("napkin-cli-test-eval");
  std::filesystem::remove_all(dir);
  auto r = run_napkin("eval " + lib("attention.napkin") + " --set q=8 --set x=8 --set d=4 --set h=2 --seed 3 -o " + dir);
  INFO(r.output);
  REQUIRE(r.status == 0);
  for (const char* n : {"Q", "K", "V", "O"}) CHECK(std::filesystem::exists(dir + "/" + n + ".npy"));
  auto O = decode_npy(slurp(dir + "/O.npy"), "O");
  CHECK(O.shape == std::vector<std::int64_t>{1, 2, 8, 4});
  std::string big = dir + "-big";
  std::filesystem::remove_all(big);
  auto r2 = run_napkin("eval " + lib("attention.napkin") + " -o " + big);
  CHECK(r2.status == 1);
  CHECK(r2.output.find("shrink axes with --set") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(big));
}

TEST_CASE("eval reads an input from .npy and checks its shape", "[cli][eval]") {
  std::string dir = scratch("napkin-cli-test-npy");
  std::filesystem::create_directories(dir);
  write_file_atomic(dir + "/A.npy", encode_npy({{2, 3}, {1, 2, 3, 4, 5, 6}}));
  write_file_atomic(dir + "/B.npy", encode_npy({{3, 2}, {7, 8, 9, 10, 11, 12}}));
  auto r = run_napkin("eval " + lib("matmul.napkin") + " --set a=2 --set b=3 --set c=2 --input A=" + dir +
                      "/A.npy --input B=" + dir + "/B.npy -o " + dir + "/out");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(decode_npy(slurp(dir + "/out/C.npy"), "C").data == std::vector<double>{58, 64, 139, 154});
  auto bad = run_napkin("eval " + lib("matmul.napkin") + " --set a=3 --set b=3 --set c=2 --input A=" + dir + "/A.npy");
  CHECK(bad.status == 1);
  CHECK(bad.output.find("size mismatch") != std::string::npos);
}

TEST_CASE("render writes SVG and DOT", "[cli][render]") {
  std::string out = scratch("napkin-cli-test.svg");
  auto r = run_napkin("render " + lib("causal_attention.napkin") + " -o " + out);
  REQUIRE(r.status == 0);
  std::string svg = slurp(out);
  CHECK(svg.find("<svg") != std::string::npos);
  CHECK(svg.find("softmax along x") != std::string::npos);
  auto dot = run_napkin("render " + lib("matmul.napkin") + " --format dot");
  CHECK(dot.output.rfind("digraph \"matmul\"", 0) == 0);
}

TEST_CASE("derive prints steps, schedule and costs, its JSON parses and a saved schedule re-checks", "[cli][derive]") {
  auto text = run_napkin("derive " + lib("attention.napkin") + " --hw h100");
  REQUIRE(text.status == 0);
  for (const char* part : {"[derive-stream-partition]", "online-softmax", "Fusion Theorem", "schedule derived for attention",
                           "L2 -> SMEM", "Comparison", "I/O lower bound"})
    CHECK(text.output.find(part) != std::string::npos);
  auto json = run_napkin("derive " + lib("attention.napkin") + " --hw h100 --format json");
  REQUIRE(json.status == 0);
  CHECK(json.output.find("\"predicted_seconds\"") != std::string::npos);
  CHECK(json.output.find("\"lemma\": \"online-softmax\"") != std::string::npos);
  // Save the printed schedule and score it back.
  std::string sched = scratch("napkin-cli-test.schedule");
  std::size_t at = text.output.find("  schedule derived for attention");
  std::size_t end = text.output.find("\n\n", at);
  std::string body;
  for (std::size_t p = at; p < end;) {
    std::size_t q = text.output.find('\n', p);
    body += text.output.substr(p + 2, q - p - 2) + "\n";
    p = q + 1;
  }
  write_file_atomic(sched, body);
  auto rescored = run_napkin("derive " + lib("attention.napkin") + " --hw h100 --schedule " + sched);
  INFO(body << rescored.output);
  CHECK(rescored.status == 0);
  CHECK(rescored.output.find("is legal on H100-SXM5") != std::string::npos);
  // --format json holds with --schedule too: the same predicted total as the derivation's JSON
  auto rescored_json = run_napkin("derive " + lib("attention.napkin") + " --hw h100 --schedule " + sched + " --format json");
  REQUIRE(rescored_json.status == 0);
  const auto given = nlohmann::json::parse(rescored_json.output), derived = nlohmann::json::parse(json.output);
  CHECK(given["predicted_seconds"].get<double>() == Approx(derived["predicted_seconds"].get<double>()));
  CHECK(given["kernels"].size() == derived["kernels"].size());
  auto relabelled = run_napkin("render " + lib("attention.napkin") + " --schedule " + sched + " --format dot");
  CHECK(relabelled.status == 0);
  CHECK(relabelled.output.find("subgraph \"cluster_") != std::string::npos);
}

TEST_CASE("emit, compare, render --derive and passes run end to end", "[cli][derive]") {
  auto pseudo = run_napkin("emit " + lib("matmul.napkin") + " --target pseudo");
  CHECK(pseudo.status == 0);
  CHECK(pseudo.output.find("parallel for") != std::string::npos);
  auto cpu = run_napkin("emit " + lib("matmul.napkin") + " --target cpu");
  CHECK(cpu.output.find("extern \"C\" void napkin_run(") != std::string::npos);
  std::string prefix = scratch("napkin-cli-compare");
  auto cmp = run_napkin("compare " + lib("matmul.napkin") + " --hw a100,h100 --dtype bf16,fp8e4m3 -o " + prefix);
  REQUIRE(cmp.status == 0);
  CHECK(cmp.output.find("no fp8e4m3 tensor cores on A100-SXM4-80GB") != std::string::npos);
  std::string csv = slurp(prefix + ".csv");
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 5);  // header and four pairs
  CHECK(slurp(prefix + ".svg").find("<svg") != std::string::npos);
  auto derived = run_napkin("render " + lib("mlp_swiglu.napkin") + " --derive --format dot");
  CHECK(derived.output.find("@smem") != std::string::npos);
  auto passes = run_napkin("passes");
  CHECK(passes.output.find("derive-warp-recursion") != std::string::npos);
  CHECK(passes.output.find("welford") != std::string::npos);
  CHECK(run_napkin("derive " + lib("attention.napkin") + " --hw tpu").status == 1);
}

TEST_CASE("inputs that once crashed napkin (tests/fuzz/regressions) give located errors or results", "[cli][fuzz]") {
  std::size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(NAPKIN_SOURCE_DIR) + "/tests/fuzz/regressions")) {
    std::string p = e.path().string();
    std::string cmd = e.path().extension() == ".schedule" ? "derive " + lib("attention.napkin") + " --schedule " + p : "derive " + p;
    auto r = run_napkin(cmd);
    INFO(p << "\n" << r.output);
    CHECK((r.status == 0 || r.status == 1));  // never an internal error (2) or a signal
    CHECK(r.output.find("internal error") == std::string::npos);
    ++n;
  }
  CHECK(n >= 2);
}
