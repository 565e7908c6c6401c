/** \file diagnostics.hpp
 *  User diagnostics and internal errors, kept apart (style-anchors §2 habit 8).
 *
 *  - A user mistake is a Diagnostic collected by a DiagnosticEngine and printed as
 *    `file:line:col: error: message`, then the source line, then a caret under the column.
 *    Commands exit with status 1 when any error was reported.
 *  - A broken invariant inside napkin is an InternalError, raised by NAPKIN_ASSERT; the CLI prints
 *    "internal error ... please report" and exits with status 2.
 */
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "diagrams/source.hpp"

namespace napkin {

enum class Severity { error, warning, note };

/** One message about the user's input. `loc` may be invalid for messages about the command line. */
struct Diagnostic {
  Severity severity = Severity::error;
  SourceLoc loc;
  std::string message;
};

/** Collects diagnostics in the order reported. Caps errors at `max_errors` so that garbage input
 *  cannot flood the terminal; past the cap, further errors are counted but not stored. */
class DiagnosticEngine {
 public:
  explicit DiagnosticEngine(int max_errors = 50) : max_errors_(max_errors) {}

  void error(SourceLoc loc, std::string message);
  void warning(SourceLoc loc, std::string message);
  void note(SourceLoc loc, std::string message);

  bool has_errors() const { return error_count_ > 0; }
  int error_count() const { return error_count_; }
  /** True once the error cap was reached: callers may stop early. */
  bool saturated() const { return error_count_ >= max_errors_; }
  const std::vector<Diagnostic>& diagnostics() const { return diags_; }

  /** Sorts by file, line and column (stable), so that reports read top to bottom. */
  void sort_by_location();
  /** Renders every stored diagnostic: header line, source line, caret line. */
  std::string render() const;

 private:
  void add(Severity s, SourceLoc loc, std::string message);
  std::vector<Diagnostic> diags_;
  int error_count_ = 0;
  int max_errors_;
};

/** Renders one diagnostic as `file:line:col: error: msg` + source line + caret. */
std::string render_diagnostic(const Diagnostic& d);

/** A user error raised where collecting is impractical (e.g. command-line values, file I/O).
 *  The CLI prints it as `napkin: error: ...` and exits with status 1. */
struct UserError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/** A bug in napkin (a violated invariant). The CLI exits with status 2. */
struct InternalError : std::logic_error {
  using std::logic_error::logic_error;
};

namespace detail {
/** Builds the message of a failed NAPKIN_ASSERT and throws InternalError when destroyed. */
class AssertFailure {
 public:
  AssertFailure(const char* cond, const char* file, int line);
  ~AssertFailure() noexcept(false);
  template <class T>
  AssertFailure& operator<<(const T& v) {
    os_ << v;
    return *this;
  }

 private:
  std::ostringstream os_;
};
}  // namespace detail

}  // namespace napkin

/** NAPKIN_ASSERT(cond) << "context": throws napkin::InternalError when cond is false; the message
 *  is not built when it holds. */
#define NAPKIN_ASSERT(cond) \
  if (cond) {               \
  } else                    \
    ::napkin::detail::AssertFailure(#cond, __FILE__, __LINE__)
