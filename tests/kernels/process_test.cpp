// Child processes without a shell (kernels/process.hpp): arguments with spaces and shell
// characters reach the child intact, nothing they contain runs, and `napkin bench` neither breaks
// on such a work folder nor leaves behind a folder it created when a step fails.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "diagrams/diagnostics.hpp"
#include "kernels/process.hpp"
#include "tests/support/run.hpp"

using namespace napkin;
using napkin::test::slurp;
namespace fs = std::filesystem;

namespace {

/** A fresh empty folder under the temporary directory, removed at the end of the test. */
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag) {
    path = fs::temp_directory_path() / ("napkin-" + tag + "-" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

/** Writes an executable /bin/sh script at `path`. */
void write_script(const fs::path& path, const std::string& body) {
  std::ofstream(path) << "#!/bin/sh\n" << body;
  fs::permissions(path, fs::perms::owner_all, fs::perm_options::add);
}

const std::string kHostile = "a b;touch PWNED $(touch PWNED2) 'q\" `touch PWNED3`";

}  // namespace

TEST_CASE("run_child passes each argument intact and runs nothing they contain", "[kernels][process]") {
  TempDir tmp("process");
  const fs::path dir = tmp.path / kHostile;  // a work folder named with spaces and shell characters
  fs::create_directories(dir);
  const fs::path script = dir / "child script";
  write_script(script, "printf '%s\\n' \"$#\" \"$@\"\necho to-stderr >&2\nexit 3\n");
  const std::string out = (dir / "out.txt").string(), err = (dir / "err.txt").string();
  // chdir so that a shell would create the PWNED files where this test looks for them
  const fs::path cwd = fs::current_path();
  fs::current_path(tmp.path);
  ChildStatus st = run_child({script.string(), dir.string(), "", "x"}, out, err);
  fs::current_path(cwd);
  CHECK(st.started);
  CHECK(st.exit_code == 3);
  CHECK_FALSE(st.ok());
  CHECK(st.describe() == "exit status 3");
  CHECK(slurp(out) == "3\n" + dir.string() + "\n\nx\n");
  CHECK(slurp(err) == "to-stderr\n");
  for (const char* f : {"PWNED", "PWNED2", "PWNED3"}) {
    CHECK_FALSE(fs::exists(tmp.path / f));
    CHECK_FALSE(fs::exists(dir / f));
  }
  // One file for both streams when the paths are equal.
  st = run_child({script.string(), "y"}, out, out);
  CHECK(slurp(out) == "1\ny\nto-stderr\n");
  // On PATH, as nvcc is found.
  st = run_child({"printf", "%s|", kHostile}, out, err);
  CHECK(st.ok());
  CHECK(slurp(out) == kHostile + "|");
}

TEST_CASE("run_child reports a program that cannot start, and bad output paths", "[kernels][process]") {
  TempDir tmp("process-missing");
  const std::string out = (tmp.path / "o").string();
  ChildStatus st = run_child({(tmp.path / "no such program").string()}, out, out);
  CHECK_FALSE(st.started);
  CHECK_FALSE(st.ok());
  CHECK(st.describe().find("could not start") != std::string::npos);
  CHECK(st.describe().find("No such file") != std::string::npos);
  CHECK_THROWS_AS(run_child({"true"}, (tmp.path / "missing dir" / "o").string(), out), UserError);
}

TEST_CASE("shell_quoted gives back the same words through a shell", "[kernels][process]") {
  TempDir tmp("process-quote");
  const std::vector<std::string> words = {"printf", "%s\\n", kHostile, "it's", "", "plain-word"};
  const std::string out = (tmp.path / "o").string();
  const fs::path cwd = fs::current_path();
  fs::current_path(tmp.path);
  ChildStatus st = run_child({"/bin/sh", "-c", shell_quoted(words)}, out, out);
  fs::current_path(cwd);
  CHECK(st.ok());
  CHECK(slurp(out) == kHostile + "\nit's\n\nplain-word\n");
  CHECK_FALSE(fs::exists(tmp.path / "PWNED"));
  CHECK(shell_quoted({"nvcc", "-O3", "a b"}) == "nvcc -O3 'a b'");
}

TEST_CASE("napkin bench: a work folder with shell characters reaches nvcc intact, and a failed bench removes the folder it made",
          "[kernels][process][cli]") {
  TempDir tmp("bench-workdir");
  const fs::path args = tmp.path / "nvcc-args.txt";
  const fs::path fake_nvcc = tmp.path / "fake nvcc";
  write_script(fake_nvcc, "printf '%s\\n' \"$@\" > '" + args.string() + "'\nexit ${FAKE_NVCC_STATUS:-1}\n");
  const fs::path workdir = tmp.path / kHostile;
  const std::string diagram = std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/matmul.napkin";
  const std::string cmd = "bench " + shell_quoted({diagram, "--hw", "h100", "--set", "a=64", "--set", "b=64", "--set", "c=64",
                                                   "--workdir", workdir.string(), "--nvcc", fake_nvcc.string()});
  const fs::path cwd = fs::current_path();
  fs::current_path(tmp.path);
  auto r = test::run_napkin(cmd);  // nvcc fails
  ::setenv("FAKE_NVCC_STATUS", "0", 1);
  auto r2 = test::run_napkin(cmd);  // nvcc "succeeds" without a binary: the harness cannot start
  ::unsetenv("FAKE_NVCC_STATUS");
  fs::current_path(cwd);
  INFO(r.output << "\n---\n" << r2.output);
  CHECK(r.status == 1);
  CHECK(r.output.find("nvcc failed (exit status 1)") != std::string::npos);
  CHECK(r2.status == 1);
  CHECK(r2.output.find("the benchmark harness failed (could not start") != std::string::npos);
  const std::string passed = slurp(args.string());
  CHECK(passed.find(workdir.string() + "/kernel.cu\n") != std::string::npos);
  CHECK(passed.find("-o\n" + workdir.string() + "/harness\n") != std::string::npos);
  CHECK_FALSE(fs::exists(workdir));  // created by bench, removed when it failed
  for (const char* f : {"PWNED", "PWNED2", "PWNED3"}) CHECK_FALSE(fs::exists(tmp.path / f));
  // A folder the user made stays.
  fs::create_directories(workdir);
  fs::current_path(tmp.path);
  r = test::run_napkin(cmd);
  fs::current_path(cwd);
  CHECK(r.status == 1);
  CHECK(fs::exists(workdir / "kernel.cu"));
}
