// Labels written in a diagram are constraints the search keeps, or a located error says why they
// cannot hold (derive/user_labels.hpp).
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <unistd.h>

#include "tests/support/run.hpp"

using namespace napkin::test;

namespace {

/** attention.napkin with `from` replaced by `to` (a regex over its text), derived on the H100. */
RunResult derive_edited(const std::string& from, const std::string& to, const std::string& file_name) {
  std::string text = slurp(std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/attention.napkin");
  std::string edited = std::regex_replace(text, std::regex(from), to);
  REQUIRE(edited != text);
  auto dir = std::filesystem::temp_directory_path() / ("napkin_user_labels_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto path = dir / file_name;
  std::ofstream(path) << edited;
  RunResult r = run_napkin("derive " + path.string() + " --hw h100");
  std::filesystem::remove_all(dir);
  return r;
}

}  // namespace

TEST_CASE("labels written in a diagram are kept by the derived schedule", "[derive][labels]") {
  RunResult plain = run_napkin("derive " + std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/attention.napkin --hw h100");
  REQUIRE(plain.status == 0);
  REQUIRE(plain.output.find("group q by 128") != std::string::npos);  // what the search picks alone
  REQUIRE(plain.output.find("stream x by 128") != std::string::npos);

  RunResult g = derive_edited("axis q = 8192 ", "axis q = 8192 group 64 ", "group.napkin");
  CHECK(g.status == 0);
  CHECK(g.output.find("group q by 64") != std::string::npos);

  RunResult s = derive_edited("axis x = 8192 ", "axis x = 8192 stream 64 warps 8 ", "stream.napkin");
  CHECK(s.status == 0);
  CHECK(s.output.find("stream x by 64\n") != std::string::npos);
  CHECK(s.output.find("warps 8\n") != std::string::npos);

  RunResult h = derive_edited("softmax\\(S; x\\)", "softmax(S@hbm; x)", "hbm.napkin");  // S leaves its kernel
  CHECK(h.status == 0);
  CHECK(h.output.find("fuse S\n") != std::string::npos);
}

TEST_CASE("labels that cannot hold are located errors that say why", "[derive][labels][errors]") {
  struct Case {
    std::string from, to, message;
  };
  const Case cases[] = {
      {"axis d = 128 ", "axis d = 128 group 16 ",
       "group.napkin:8:14: error: cannot keep 'group 16' on axis 'd': it is reduced by contract in 'S'"},
      {"axis q = 8192 ", "axis q = 8192 stream 64 ", "stream.napkin:6:15: error: cannot keep 'stream 64' on axis 'q': no operation reduces or normalises it"},
      {"out O : bf16", "out O : bf16 @smem", "output.napkin:15:1: error: 'O' is an output: it is written to HBM, so '@smem' cannot hold"},
      {"contract\\(Q, K; d\\)", "contract(Q@reg, K; d)", "input.napkin:12:23: error: cannot keep 'Q@reg': every lowering reads an input from HBM through SMEM"},
      {"axis q = 8192 ", "axis q = 8192 group 8192 ", "nofit.napkin:6:15: error: no schedule of diagram 'attention' on H100-SXM5 keeps the labels written in it"},
      {"axis q = 8192 ", "axis q = 8192 group 128 warps 8 pingpong ",
       "pingpong.napkin:6:15: error: 'pingpong' on axis 'q' is written by derive; napkin does not keep it as a constraint (schedule it: warps 8 pingpong)"},
  };
  const char* names[] = {"group.napkin", "stream.napkin", "output.napkin", "input.napkin", "nofit.napkin", "pingpong.napkin"};
  for (std::size_t i = 0; i < std::size(cases); ++i) {
    INFO(cases[i].to);
    RunResult r = derive_edited(cases[i].from, cases[i].to, names[i]);
    CHECK(r.status == 1);
    CHECK(r.output.find(cases[i].message) != std::string::npos);
    CHECK(r.output.find("^") != std::string::npos);  // the line and a caret
    CHECK(r.output.find("internal error") == std::string::npos);
  }
}
