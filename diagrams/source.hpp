/** \file source.hpp
 *  Source files and locations. Every token and IR node carries a SourceLoc so that any user error
 *  can be reported as `file:line:col: error: ...` with the offending line and a caret.
 */
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace napkin {

/** A position in a source file: 1-based line and column. Columns count characters: a UTF-8
 *  sequence is one column, and so is each byte that is not valid UTF-8 (utf8_length).
 *  Locations are not part of a diagram's value: two SourceLocs always compare equal, so that
 *  structural equality of IR values (parse(print(d)) == d) ignores where things were written. */
struct SourceLoc {
  const struct SourceFile* file = nullptr;  ///< null for nodes built in code
  int line = 0;
  int col = 0;
  bool valid() const { return file != nullptr && line > 0; }
  friend bool operator==(const SourceLoc&, const SourceLoc&) { return true; }
};

/** Bytes of the UTF-8 sequence that starts at `s[i]` (2 to 4) when it is a valid, shortest-form
 *  encoding of a code point; 1 otherwise (ASCII, or a byte that is not UTF-8). */
std::size_t utf8_length(std::string_view s, std::size_t i);

/** The text of one input file and the offsets of its lines. Owned by a SourceManager and never
 *  moved, so SourceLoc can point at it. A UTF-8 byte-order mark at the start is dropped. */
struct SourceFile {
  std::string path;  ///< as given by the user ("-" is shown as "<stdin>")
  std::string text;
  std::vector<std::size_t> line_starts;  ///< byte offset of each line's first character

  SourceFile(std::string path_, std::string text_);
  /** The text of 1-based line `line`, without its newline; empty when out of range. */
  std::string_view line_text(int line) const;
};

/** Owns every SourceFile loaded in a run (the main file and its imports). */
class SourceManager {
 public:
  /** Adds a file and returns a pointer that stays valid for the manager's lifetime. */
  const SourceFile* add(std::string path, std::string text);
  const std::vector<std::unique_ptr<SourceFile>>& files() const { return files_; }

 private:
  std::vector<std::unique_ptr<SourceFile>> files_;
};

}  // namespace napkin
