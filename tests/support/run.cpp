#include "tests/support/run.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "diagrams/verify.hpp"

namespace napkin::test {

RunResult run_napkin(const std::string& args) { return run_shell(std::string(NAPKIN_BIN) + " " + args); }

RunResult run_shell(const std::string& command) {
  std::string cmd = "{ " + command + " ; } 2>&1";
  RunResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  return r;
}

void skip_test(const std::string& reason) {
  std::printf("napkin-test-skipped: %s\n", reason.c_str());
  std::fflush(stdout);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

double relative_difference(const std::map<std::string, Tensor>& got, const std::map<std::string, Tensor>& want) {
  double err = 0, ref = 0;
  for (const auto& [name, w] : want) {
    const Tensor& g = got.at(name);
    REQUIRE(g.data.size() == w.data.size());
    for (std::size_t i = 0; i < w.data.size(); ++i)
      err = std::max(err, std::fabs(g.data[i] - w.data[i])), ref = std::max(ref, std::fabs(w.data[i]));
  }
  return ref > 0 ? err / ref : err;
}

std::vector<std::string> napkin_files(const std::string& folder) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(std::string(NAPKIN_SOURCE_DIR) + "/" + folder))
    if (e.path().extension() == ".napkin") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> library_files() { return napkin_files("diagrams/library"); }

namespace {
LoadedDiagram finish(std::unique_ptr<Program> p, DiagnosticEngine& diags, const SizeMap& overrides) {
  LoadedDiagram l;
  l.program = std::move(p);
  l.diagram = &l.program->select("");
  verify_program(*l.program, diags, l.diagram, overrides);
  INFO(diags.render());
  REQUIRE_FALSE(diags.has_errors());
  l.sizes = *resolve_sizes(*l.diagram, overrides, diags);
  return l;
}
}  // namespace

LoadedDiagram load_text(const std::string& text, const SizeMap& overrides) {
  DiagnosticEngine diags;
  auto p = load_program_text("test.napkin", text, diags);
  return finish(std::move(p), diags, overrides);
}

LoadedDiagram load_library(const std::string& file) {
  std::string path = file.find('/') == std::string::npos ? std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/" + file : file;
  DiagnosticEngine diags;
  auto p = load_program(path, diags);
  return finish(std::move(p), diags, {});
}

void check_golden(const std::string& name, const std::string& actual) {
  std::string path = std::string(NAPKIN_SOURCE_DIR) + "/tests/golden/" + name;
  if (std::getenv("UPDATE_GOLDEN")) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << actual;
    return;
  }
  INFO("golden file " << path << " (UPDATE_GOLDEN=1 rewrites it)");
  REQUIRE(std::filesystem::exists(path));
  CHECK(slurp(path) == actual);
}

}  // namespace napkin::test
