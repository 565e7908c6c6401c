/** \file run.hpp
 *  Test helpers: run the napkin binary, read files, compare golden files.
 */
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "diagrams/eval.hpp"
#include "diagrams/program.hpp"
#include "diagrams/sizes.hpp"

namespace napkin::test {

struct RunResult {
  int status = -1;      ///< exit status, or 128 + signal when killed
  std::string output;   ///< stdout and stderr together
};

/** Runs `napkin ARGS` through the shell with stderr merged into stdout. */
RunResult run_napkin(const std::string& args);
/** Runs a shell command line with stderr merged into stdout. */
RunResult run_shell(const std::string& command);
std::string slurp(const std::string& path);
/** Occurrences of `what` in `s` (overlapping ones included). */
std::size_t count(const std::string& s, const std::string& what);
/** Every .napkin file of `folder` (relative to the source tree, e.g. "tests/language"), sorted. */
std::vector<std::string> napkin_files(const std::string& folder);
/** Bundled diagrams: every .napkin file of diagrams/library, sorted. */
std::vector<std::string> library_files();
/** max |got - want| / max |want| over every output of `want` (each must be in `got`, same size). */
double relative_difference(const std::map<std::string, Tensor>& got, const std::map<std::string, Tensor>& want);
/** A loaded and verified diagram (the last of its file) with its resolved sizes. */
struct LoadedDiagram {
  std::unique_ptr<Program> program;
  const Diagram* diagram = nullptr;
  SizeMap sizes;
};
/** Loads diagram text; REQUIREs that it verifies. */
LoadedDiagram load_text(const std::string& text, const SizeMap& overrides = {});
/** Loads a file of diagrams/library by name ("attention.napkin") or by path; REQUIREs that it verifies. */
LoadedDiagram load_library(const std::string& file);

/** Prints "napkin-test-skipped: <reason>" on stdout, which CTest reports as a skipped test
 *  (SKIP_REGULAR_EXPRESSION, cmake/NapkinTests.cmake). The caller returns from the test case
 *  right after, having checked nothing it could not check: only for a missing tool (nvcc). */
void skip_test(const std::string& reason);

/** Compares `actual` with tests/golden/<name>; UPDATE_GOLDEN=1 rewrites the file instead.
 *  A missing golden file fails. */
void check_golden(const std::string& name, const std::string& actual);

}  // namespace napkin::test
