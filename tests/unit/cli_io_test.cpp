// The napkin binary on extreme input and awkward outputs (issue 15): bounded standard input,
// outputs through links and pipes, output sets complete or absent.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "diagrams/files.hpp"
#include "tests/support/run.hpp"

using namespace napkin;
using namespace napkin::test;
namespace fs = std::filesystem;

namespace {
std::string lib(const std::string& f) { return std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/" + f; }
/** A fresh scratch folder of this process. */
std::string scratch(const std::string& name) {
  auto p = fs::temp_directory_path() / ("napkin-cli-io-" + name + "-" + std::to_string(getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}
/** Runs a shell command line with stderr merged into stdout. */
RunResult run_shell(const std::string& line) {
  RunResult r;
  FILE* p = popen(("(" + line + ") 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.output.append(buf, n);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  return r;
}
bool has(const RunResult& r, const std::string& part) { return r.output.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("standard input is read up to 64 MiB like any file", "[cli][io]") {
  auto r = run_napkin("check - < /dev/zero");
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(has(r, "cannot read standard input: larger than 64 MiB"));
  auto piped = run_shell("cat " + lib("matmul.napkin") + " | " + NAPKIN_BIN + " check /dev/stdin");  // a pipe by name
  INFO(piped.output);
  CHECK(piped.status == 0);
}

TEST_CASE("output files are written through symbolic links, into FIFOs and to napkin's own standard output", "[cli][io]") {
  std::string dir = scratch("out");
  write_file_atomic(dir + "/real.napkin", "old\n");
  fs::create_symlink("real.napkin", dir + "/link.napkin");
  auto r = run_napkin("print " + lib("matmul.napkin") + " -o " + dir + "/link.napkin");
  CHECK(r.status == 0);
  CHECK(fs::is_symlink(dir + "/link.napkin"));
  CHECK(slurp(dir + "/real.napkin").find("diagram matmul") != std::string::npos);

  std::string fifo = dir + "/pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // The reader gives up after 10 s, so that a regression fails instead of hanging.
  auto f = run_napkin("print " + lib("matmul.napkin") + " -o " + fifo + " & timeout 10 cat " + fifo + " > " + dir +
                      "/from-pipe; wait $!");
  INFO(f.output);
  CHECK(f.status == 0);
  CHECK(fs::is_fifo(fifo));
  CHECK(slurp(dir + "/from-pipe").find("diagram matmul") != std::string::npos);

  auto out = run_napkin("print " + lib("matmul.napkin") + " -o /dev/fd/1 | cat");
  INFO(out.output);
  CHECK(out.status == 0);
  CHECK(has(out, "diagram matmul"));
}

TEST_CASE("output sets are complete or absent: eval's folder, compare's CSV and SVG, bench's work folder", "[cli][io]") {
  std::string dir = scratch("sets");
  fs::create_directories(dir + "/eval/O.npy");  // the output's name is taken by a folder
  auto e = run_napkin("eval " + lib("attention.napkin") + " --set q=8 --set x=8 --set d=4 --set h=2 -o " + dir + "/eval");
  INFO(e.output);
  CHECK(e.status == 1);
  CHECK(has(e, "it is a folder"));
  for (const char* n : {"Q", "K", "V"}) CHECK_FALSE(fs::exists(dir + "/eval/" + n + ".npy"));
  std::size_t left = 0;
  for ([[maybe_unused]] const auto& x : fs::directory_iterator(dir + "/eval")) ++left;
  CHECK(left == 1);  // only the folder that was there before

  fs::create_directories(dir + "/cmp.svg");
  auto c = run_napkin("compare " + lib("matmul.napkin") + " --hw h100 --dtype bf16 -o " + dir + "/cmp");
  CHECK(c.status == 1);
  CHECK_FALSE(fs::exists(dir + "/cmp.csv"));

  auto b = run_napkin("bench " + lib("matmul.napkin") + " --set a=64 --set b=64 --set c=64 --nvcc false --workdir " + dir + "/work");
  INFO(b.output);
  CHECK(b.status == 1);
  CHECK(has(b, "nvcc failed"));
  CHECK_FALSE(fs::exists(dir + "/work"));
  for (const auto& x : fs::recursive_directory_iterator(dir)) CHECK(x.path().string().find(".tmp-napkin") == std::string::npos);
}

TEST_CASE("a UTF-8 byte-order mark is accepted", "[cli][io]") {
  std::string dir = scratch("bom");
  write_file_atomic(dir + "/bom.napkin", "\xEF\xBB\xBF# with a byte-order mark\ndiagram t\naxis a = 4\nin X[a] : fp32\nY[a] = X * 2\nout Y : fp32\n");
  auto r = run_napkin("check " + dir + "/bom.napkin");
  INFO(r.output);
  CHECK(r.status == 0);
}
