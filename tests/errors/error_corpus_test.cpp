// Runs `napkin check` on every file of tests/errors/ and compares its diagnostics with the
// expectations written in the file:
//   # expected-error {{message part}}           on the bad line itself
//   # expected-error@+1 {{message part}}        on the line before (also @-N, and :COL after)
//   # expected-warning ...                      the same for warnings
// or, for files that cannot hold a comment (empty, binary), in NAME.napkin.expected beside them:
//   PATH:LINE:COL: error: message part          (PATH relative to tests/errors)
// Every expected diagnostic must be reported at its line (and column, if given); no unexpected
// error may be reported; every located error is followed by its source line and a caret; the
// exit status is 1; nothing crashes (status 2 or a signal fails the test).
#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>
#include <regex>
#include <sstream>

#include "tests/support/run.hpp"

using namespace napkin::test;
namespace fs = std::filesystem;

namespace {

struct Expect {
  std::string file;  // relative to tests/errors
  std::string severity;
  int line = 0;
  int col = 0;  // 0: any
  std::string message;
  bool seen = false;
};

std::vector<Expect> expectations(const fs::path& path, const std::string& rel) {
  std::vector<Expect> out;
  fs::path side = path.string() + ".expected";
  if (fs::exists(side)) {
    std::istringstream in(slurp(side.string()));
    static const std::regex re(R"(^(.*):(\d+):(\d+): (error|warning): (.*)$)");
    std::string line;
    std::smatch m;
    while (std::getline(in, line))
      if (std::regex_match(line, m, re)) out.push_back({m[1], m[4], std::stoi(m[2]), std::stoi(m[3]), m[5]});
    return out;
  }
  std::istringstream in(slurp(path.string()));
  static const std::regex re(R"(# expected-(error|warning)(@([+-]\d+))?(:(\d+))? \{\{(.*?)\}\})");
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    std::smatch m;
    if (!std::regex_search(line, m, re)) continue;
    int offset = m[3].matched ? std::stoi(m[3]) : 0;
    out.push_back({rel, m[1], n + offset, m[5].matched ? std::stoi(m[5]) : 0, m[6]});
  }
  return out;
}

/** Runs `command(path)` on every file of `dir` ending in `ext` and checks its diagnostics against
 *  the expectations written in the file. */
void check_corpus(const fs::path& dir, const std::string& ext, std::size_t at_least,
                  const std::function<std::string(const fs::path&)>& command) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ext) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= at_least);

  static const std::regex header(R"(^(.*):(\d+):(\d+): (error|warning): (.*)$)");
  for (const auto& path : files) {
    std::string rel = path.filename().string();
    auto expects = expectations(path, rel);
    INFO(rel);
    REQUIRE_FALSE(expects.empty());
    auto r = run_napkin(command(path));
    INFO(r.output);
    CHECK(r.status == 1);
    std::istringstream in(r.output);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    for (std::size_t i = 0; i < lines.size(); ++i) {
      std::smatch m;
      if (!std::regex_match(lines[i], m, header)) continue;
      std::string file = fs::relative(fs::path(m[1].str()), dir).string();
      int line = std::stoi(m[2]), col = std::stoi(m[3]);
      bool matched = false;
      for (auto& x : expects)
        if (!x.seen && x.file == file && x.severity == m[4].str() && x.line == line && (x.col == 0 || x.col == col) &&
            m[5].str().find(x.message) != std::string::npos)
          matched = x.seen = true;
      if (m[4] == "error") {
        INFO("unexpected or mismatched error: " << lines[i]);
        CHECK(matched);
      }
      REQUIRE(i + 2 < lines.size());  // the source line, then the caret under the column
      CHECK(lines[i + 2].find('^') == static_cast<std::size_t>(col - 1));
    }
    for (const auto& x : expects) {
      INFO("expected " << x.severity << " at " << x.file << ":" << x.line << ": " << x.message);
      CHECK(x.seen);
    }
  }
}

}  // namespace

TEST_CASE("every malformed diagram gets its located diagnostics and exit status 1", "[errors]") {
  check_corpus(fs::path(NAPKIN_SOURCE_DIR) / "tests" / "errors", ".napkin", 30,
               [](const fs::path& p) { return "check " + p.string(); });
}

TEST_CASE("every illegal schedule is a located error that names the reason", "[errors][schedule]") {
  check_corpus(fs::path(NAPKIN_SOURCE_DIR) / "tests" / "errors" / "schedules", ".schedule", 15, [](const fs::path& p) {
    std::string first = slurp(p.string()).substr(0, slurp(p.string()).find('\n'));
    std::string diagram = (p.parent_path() / first.substr(first.find(':') + 2)).string();
    return "derive " + diagram + " --hw h100 --schedule " + p.string();
  });
}

TEST_CASE("every bad hardware description is a located error that names the field", "[errors][hardware]") {
  check_corpus(fs::path(NAPKIN_SOURCE_DIR) / "tests" / "errors" / "hardware", ".toml", 20, [](const fs::path& p) {
    return "derive " + std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/matmul.napkin --hw " + p.string();
  });
}
