// Bounded reads, output sets (complete or absent), writing through links and to pipes, and the
// removal of temporaries on a signal (diagrams/files.hpp, diagrams/temporaries.hpp).
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <thread>

#include "diagrams/diagnostics.hpp"
#include "diagrams/files.hpp"
#include "diagrams/source.hpp"
#include "tests/support/run.hpp"

using namespace napkin;
using napkin::test::slurp;
namespace fs = std::filesystem;

namespace {
/** A fresh scratch folder of this process. */
std::string scratch(const std::string& name) {
  auto p = fs::temp_directory_path() / ("napkin-files-" + name + "-" + std::to_string(getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

/** Names in `dir` that contain ".tmp-napkin" (leftover temporaries). */
int temporaries_in(const std::string& dir) {
  int n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) n += e.path().filename().string().find(".tmp-napkin") != std::string::npos;
  return n;
}
}  // namespace

TEST_CASE("read_file: any readable non-folder up to 64 MiB, devices included", "[files]") {
  std::string dir = scratch("read");
  CHECK_THROWS_WITH(read_file("/dev/zero"), Catch::Contains("larger than 64 MiB"));  // was: not a regular file
  CHECK_THROWS_WITH(read_file(dir), Catch::Contains("it is a folder"));
  CHECK_THROWS_WITH(read_file(dir + "/absent"), Catch::Contains("No such file"));
  write_file_atomic(dir + "/a.txt", "hello");
  CHECK(read_file(dir + "/a.txt") == "hello");
  CHECK(read_file("/dev/null").empty());
}

TEST_CASE("an output set is complete after commit and absent when abandoned", "[files]") {
  std::string dir = scratch("set");
  {
    OutputSet set(dir + "/new/deeper");
    set.add(dir + "/new/deeper/a.npy", "A");
    set.add(dir + "/new/deeper/b.npy", "B");
    CHECK(fs::exists(dir + "/new/deeper"));
    CHECK_FALSE(fs::exists(dir + "/new/deeper/a.npy"));  // staged, not yet in place
    CHECK(live_temporaries() >= 4);                       // two files, two created folders
  }  // abandoned
  CHECK_FALSE(fs::exists(dir + "/new"));
  CHECK(live_temporaries() == 0);
  {
    write_file_atomic(dir + "/old.csv", "old");
    fs::create_directories(dir + "/taken.svg");
    OutputSet set;
    set.add(dir + "/old.csv", "new");
    CHECK_THROWS_WITH(set.add(dir + "/taken.svg", "<svg/>"), Catch::Contains("it is a folder"));
  }
  CHECK(slurp(dir + "/old.csv") == "old");  // the CSV is not replaced without its SVG
  CHECK(temporaries_in(dir) == 0);
  OutputSet set(dir + "/out");
  set.add(dir + "/out/a.npy", "A");
  set.add(dir + "/old.csv", "new");
  set.commit();
  CHECK(slurp(dir + "/out/a.npy") == "A");
  CHECK(slurp(dir + "/old.csv") == "new");
  CHECK(temporaries_in(dir) == 0);
  CHECK(live_temporaries() == 0);
}

TEST_CASE("outputs go through symbolic links and into FIFOs, and keep a file's permissions", "[files]") {
  std::string dir = scratch("links");
  write_file_atomic(dir + "/target.txt", "old");
  fs::create_symlink("target.txt", dir + "/link.txt");
  write_file_atomic(dir + "/link.txt", "new");
  CHECK(fs::is_symlink(dir + "/link.txt"));
  CHECK(slurp(dir + "/target.txt") == "new");
  fs::create_symlink("made.txt", dir + "/dangling.txt");  // a dangling link creates its target
  write_file_atomic(dir + "/dangling.txt", "made");
  CHECK(fs::is_symlink(dir + "/dangling.txt"));
  CHECK(slurp(dir + "/made.txt") == "made");

  ::chmod((dir + "/target.txt").c_str(), 0640);
  write_file_atomic(dir + "/target.txt", "again");
  CHECK((fs::status(dir + "/target.txt").permissions() & fs::perms::all) ==
        (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read));

  std::string fifo = dir + "/pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string got;
  std::thread reader([&] { got = slurp(fifo); });
  write_file_atomic(fifo, "through the pipe");
  reader.join();
  CHECK(got == "through the pipe");
  CHECK(fs::is_fifo(fifo));
}

TEST_CASE("a signal removes the live temporaries and the folders made for them", "[files][signal]") {
  std::string dir = scratch("signal");
  for (int sig : {SIGINT, SIGTERM}) {
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      OutputSet set(dir + "/eval-out");
      set.add(dir + "/eval-out/O.npy", std::string(1 << 20, 'x'));
      ::raise(sig);
      _exit(0);  // not reached: the handler ends the process with the signal
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == sig);
    CHECK_FALSE(fs::exists(dir + "/eval-out"));
    CHECK(temporaries_in(dir) == 0);
  }
}

TEST_CASE("a work folder is removed when an exception leaves its scope, kept otherwise", "[files]") {
  std::string dir = scratch("work");
  try {
    WorkFolder w(dir + "/bench");
    write_file_atomic(dir + "/bench/kernel.cu", "x");
    throw UserError("nvcc failed");
  } catch (const UserError&) {
  }
  CHECK_FALSE(fs::exists(dir + "/bench"));
  {
    WorkFolder w(dir + "/bench");
    write_file_atomic(dir + "/bench/kernel.cu", "x");
  }
  CHECK(fs::exists(dir + "/bench/kernel.cu"));
  try {
    WorkFolder w(dir + "/bench");  // it existed: not this object's to remove
    throw UserError("later failure");
  } catch (const UserError&) {
  }
  CHECK(fs::exists(dir + "/bench/kernel.cu"));
}

TEST_CASE("utf8_length: valid sequences are one character, other bytes one each", "[files][source]") {
  CHECK(utf8_length("a", 0) == 1);
  CHECK(utf8_length("\xc3\xa9", 0) == 2);          // é
  CHECK(utf8_length("\xe2\x86\x92", 0) == 3);      // →
  CHECK(utf8_length("\xf0\x9f\x98\x80", 0) == 4);  // an emoji
  CHECK(utf8_length("\xc3", 0) == 1);              // truncated
  CHECK(utf8_length("\xc0\xaf", 0) == 1);          // overlong
  CHECK(utf8_length("\xed\xa0\x80", 0) == 1);      // a surrogate
  CHECK(utf8_length("\xff", 0) == 1);
  SourceFile f("t", "\xEF\xBB\xBF" "diagram t\n");
  CHECK(f.text == "diagram t\n");  // the byte-order mark is dropped
}
