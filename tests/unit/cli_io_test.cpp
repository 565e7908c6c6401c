// The napkin binary on extreme input and awkward outputs (issue 15): bounded standard input,
// resource errors instead of internal ones, outputs through links and pipes, output sets complete
// or absent, warnings for non-finite results, and command-line values out of range.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "diagrams/files.hpp"
#include "diagrams/npy.hpp"
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

TEST_CASE("an intermediate too large for the evaluator is refused before allocating, out of memory is exit 1", "[cli][io][eval]") {
  std::string dir = scratch("huge");
  write_file_atomic(dir + "/outer.napkin",
                    "diagram outer\naxis a = 30000\naxis b = 30000\nin A[a] : fp32\nin B[b] : fp32\n"
                    "Y[a] = sum(contract(A, B); b)\nout Y : fp32\n");
  auto r = run_napkin("eval " + dir + "/outer.napkin -o " + dir + "/out");
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(has(r, "contract(...)"));
  CHECK(has(r, "at most 2^28"));
  CHECK_FALSE(fs::exists(dir + "/out"));

  // 2^27 fp64 elements (1 GiB) per input under a 768 MiB address-space limit: the allocation fails.
  write_file_atomic(dir + "/big.napkin", "diagram big\naxis a = 134217728\nin A[a] : fp32\nY[a] = A * 2\nout Y : fp32\n");
  auto oom = run_shell("ulimit -v 786432; " + std::string(NAPKIN_BIN) + " eval " + dir + "/big.napkin -o " + dir + "/big-out");
  INFO(oom.output);
  CHECK(oom.status == 1);
  CHECK(has(oom, "out of memory"));
  CHECK(has(oom, "1073741824 bytes"));
  CHECK_FALSE(has(oom, "internal error"));
  CHECK_FALSE(fs::exists(dir + "/big-out"));
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
  // --candidates: the first candidate's failure leaves no folder either (each candidate's is its own)
  auto bc = run_napkin("bench " + lib("matmul.napkin") + " --set a=64 --set b=64 --set c=64 --nvcc false --candidates 3 --workdir " + dir +
                       "/cands");
  INFO(bc.output);
  CHECK(bc.status == 1);
  CHECK(has(bc, "nvcc failed"));
  CHECK_FALSE(fs::exists(dir + "/cands"));
  CHECK(run_napkin("bench " + lib("matmul.napkin") + " --candidates 1").status == 1);
  CHECK(run_napkin("bench " + lib("matmul.napkin") + " --candidates 4 --schedule x.schedule").status == 1);
  for (const auto& x : fs::recursive_directory_iterator(dir)) CHECK(x.path().string().find(".tmp-napkin") == std::string::npos);
}

TEST_CASE("eval warns about non-finite results with their count and first index", "[cli][io][eval]") {
  std::string dir = scratch("nan");
  write_file_atomic(dir + "/masked.napkin",
                    "diagram masked\naxis q = 3\naxis x = 4\nin S[q,x] : fp32\nin M[q,x] : fp32\n"
                    "P[q,x] = softmax(mask(S, M); x)\nout P : fp32\n");
  write_file_atomic(dir + "/M.npy", encode_npy({{3, 4}, {1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 1, 0}}));
  auto r = run_napkin("eval " + dir + "/masked.napkin --input M=" + dir + "/M.npy -o " + dir + "/out");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(has(r, "warning: output 'P' has 4 non-finite values (NaN or infinity) among 12; the first is P[q=1, x=0] = NaN"));
  auto clean = run_napkin("eval " + lib("matmul.napkin") + " --set a=2 --set b=2 --set c=2 -o " + dir + "/clean");
  CHECK(clean.status == 0);
  CHECK_FALSE(has(clean, "non-finite"));
}

TEST_CASE("command-line values out of range and unknown commands are named errors", "[cli][io]") {
  auto seed = run_napkin("eval " + lib("matmul.napkin") + " --set a=2 --set b=2 --set c=2 --seed -1 -o /nonexistent/x");
  CHECK(seed.status == 1);
  CHECK(has(seed, "--seed"));
  auto hw = run_napkin("compare " + lib("matmul.napkin") + " --hw , -o /nonexistent/x");
  CHECK(hw.status == 1);
  CHECK(has(hw, "--hw needs at least one name"));
  auto dt = run_napkin("compare " + lib("matmul.napkin") + " --dtype '' -o /nonexistent/x");
  CHECK(dt.status == 1);
  CHECK(has(dt, "--dtype needs at least one name"));
  auto cmd = run_napkin("frobnicate x");
  CHECK(cmd.status == 1);
  CHECK(has(cmd, "unknown command 'frobnicate'"));
  CHECK(has(cmd, "check, print"));
}

TEST_CASE("a UTF-8 byte-order mark is accepted", "[cli][io]") {
  std::string dir = scratch("bom");
  write_file_atomic(dir + "/bom.napkin", "\xEF\xBB\xBF# with a byte-order mark\ndiagram t\naxis a = 4\nin X[a] : fp32\nY[a] = X * 2\nout Y : fp32\n");
  auto r = run_napkin("check " + dir + "/bom.napkin");
  INFO(r.output);
  CHECK(r.status == 0);
}
