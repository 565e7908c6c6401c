#include "diagrams/lexer.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace napkin {

namespace {
bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool digit(char c) { return c >= '0' && c <= '9'; }

std::string show_byte(char c) {
  auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return std::string("'") + c + "'";
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", u);
  return std::string("byte ") + buf;
}

/** "U+00E9" for the valid UTF-8 sequence of `n` bytes at `s[i]`. */
std::string code_point(const std::string& s, std::size_t i, std::size_t n) {
  static constexpr unsigned kLeadMask[] = {0, 0x7f, 0x1f, 0x0f, 0x07};
  unsigned cp = static_cast<unsigned char>(s[i]) & kLeadMask[n];
  for (std::size_t k = 1; k < n; ++k) cp = cp << 6 | (static_cast<unsigned char>(s[i + k]) & 0x3fu);
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", cp);
  return buf;
}

class Lexer {
 public:
  Lexer(const SourceFile& f, DiagnosticEngine& d) : file_(f), text_(f.text), diags_(d) {}

  std::vector<Token> run() {
    if (text_.find('\0') != std::string::npos) {
      diags_.error(loc_at(text_.find('\0')), "file is not text: it contains a NUL byte");
      push(Tok::eof, "", text_.size());
      return std::move(out_);
    }
    while (pos_ < text_.size() && !diags_.saturated()) step();
    if (!out_.empty() && out_.back().kind != Tok::newline) push(Tok::newline, "", text_.size());
    push(Tok::eof, "", text_.size());
    return std::move(out_);
  }

 private:
  SourceLoc loc_at(std::size_t offset) {
    // line_starts is sorted: binary search for the line holding offset.
    const auto& ls = file_.line_starts;
    auto it = std::upper_bound(ls.begin(), ls.end(), offset);
    auto line = static_cast<int>(it - ls.begin());
    // Columns count characters (source.hpp). Tokens come in order, so the count goes on from the
    // last one on the same line: linear in the line's length, however many tokens it holds.
    if (col_line_ != line || col_offset_ > offset) {
      col_line_ = line;
      col_offset_ = ls[static_cast<std::size_t>(line - 1)];
      col_ = 1;
    }
    for (; col_offset_ < offset; ++col_) col_offset_ += utf8_length(text_, col_offset_);
    return SourceLoc{&file_, line, col_};
  }

  Token& push(Tok k, std::string text, std::size_t at) {
    out_.push_back(Token{k, std::move(text), 0, 0, loc_at(at)});
    return out_.back();
  }

  void step() {
    char c = text_[pos_];
    std::size_t start = pos_;
    if (c == '\n') {
      // Inside ( or [ a newline continues the item only when the next line is indented.
      bool continues = depth_ > 0 && pos_ + 1 < text_.size() &&
                       (text_[pos_ + 1] == ' ' || text_[pos_ + 1] == '\t');
      if (!continues) {
        depth_ = 0;
        push(Tok::newline, "", start);
      }
      ++pos_;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      ++pos_;
    } else if (c == '#') {
      std::size_t end = text_.find('\n', pos_);
      if (end == std::string::npos) end = text_.size();
      std::string body = text_.substr(pos_ + 1, end - pos_ - 1);
      while (!body.empty() && (body.back() == '\r' || body.back() == ' ' || body.back() == '\t')) body.pop_back();
      if (depth_ == 0) push(Tok::comment, body, start);  // comments inside ( ) are not kept
      pos_ = end;
    } else if (ident_start(c)) {
      while (pos_ < text_.size() && ident_char(text_[pos_])) ++pos_;
      push(Tok::ident, text_.substr(start, pos_ - start), start);
    } else if (digit(c) || (c == '.' && pos_ + 1 < text_.size() && digit(text_[pos_ + 1]))) {
      number();
    } else if (c == '"') {
      string();
    } else {
      punct(c);
    }
  }

  void number() {
    std::size_t start = pos_;
    bool real = false;
    while (pos_ < text_.size() && digit(text_[pos_])) ++pos_;
    if (pos_ < text_.size() && text_[pos_] == '.') {
      real = true;
      ++pos_;
      while (pos_ < text_.size() && digit(text_[pos_])) ++pos_;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      std::size_t save = pos_++;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (pos_ < text_.size() && digit(text_[pos_])) {
        real = true;
        while (pos_ < text_.size() && digit(text_[pos_])) ++pos_;
      } else {
        pos_ = save;
      }
    }
    std::string spelling = text_.substr(start, pos_ - start);
    if (pos_ < text_.size() && ident_char(text_[pos_])) {
      while (pos_ < text_.size() && ident_char(text_[pos_])) ++pos_;
      diags_.error(loc_at(start), "malformed number '" + text_.substr(start, pos_ - start) + "'");
      return;
    }
    Token& t = push(real ? Tok::real : Tok::integer, spelling, start);
    if (real) {
      t.real_value = std::strtod(spelling.c_str(), nullptr);
      if (std::isinf(t.real_value)) {
        diags_.error(t.loc, "number '" + spelling + "' is too large for fp64 (it would be infinite)");
        t.real_value = 1;
      } else if (t.real_value == 0 && spelling.find_first_of("123456789") < spelling.find_first_of("eE")) {
        diags_.error(t.loc, "number '" + spelling + "' is too small for fp64 (it would be zero)");
      }
    } else {
      auto [p, ec] = std::from_chars(spelling.data(), spelling.data() + spelling.size(), t.int_value);
      (void)p;
      if (ec != std::errc()) {
        diags_.error(t.loc, "integer '" + spelling + "' is too large (at most 2^63 - 1)");
        t.int_value = 1;
      }
      t.real_value = static_cast<double>(t.int_value);
    }
  }

  void string() {
    std::size_t start = pos_++;
    std::string value;
    while (pos_ < text_.size() && text_[pos_] != '"' && text_[pos_] != '\n') value += text_[pos_++];
    if (pos_ >= text_.size() || text_[pos_] != '"') {
      diags_.error(loc_at(start), "unterminated string: expected '\"' before the end of the line");
      return;
    }
    ++pos_;
    push(Tok::string, value, start);
  }

  void punct(char c) {
    static constexpr std::pair<char, Tok> table[] = {
        {'[', Tok::lbracket}, {']', Tok::rbracket}, {'(', Tok::lparen}, {')', Tok::rparen},
        {',', Tok::comma},    {';', Tok::semicolon}, {':', Tok::colon},  {'=', Tok::equals},
        {'@', Tok::at},       {'+', Tok::plus},      {'-', Tok::minus},  {'*', Tok::star},
        {'/', Tok::slash}};
    for (auto [ch, k] : table) {
      if (ch != c) continue;
      if (k == Tok::lparen || k == Tok::lbracket) ++depth_;
      if ((k == Tok::rparen || k == Tok::rbracket) && depth_ > 0) --depth_;
      push(k, std::string(1, c), pos_++);
      return;
    }
    std::size_t n = utf8_length(text_, pos_);
    diags_.error(loc_at(pos_), n > 1 ? "unexpected character " + code_point(text_, pos_, n) + "; names, numbers and operators are ASCII"
                                     : "unexpected character " + show_byte(c));
    pos_ += n;  // one error per character, however many bytes it takes
  }

  const SourceFile& file_;
  const std::string& text_;
  DiagnosticEngine& diags_;
  std::vector<Token> out_;
  std::size_t pos_ = 0;
  int depth_ = 0;  ///< open ( and [; newlines inside are not tokens
  int col_line_ = 0, col_ = 1;  ///< the column count of loc_at: col_ is the column of col_offset_
  std::size_t col_offset_ = 0;
};
}  // namespace

std::vector<Token> lex(const SourceFile& file, DiagnosticEngine& diags) { return Lexer(file, diags).run(); }

std::string token_description(const Token& t) {
  switch (t.kind) {
    case Tok::ident: return "'" + t.text + "'";
    case Tok::integer: case Tok::real: return "number '" + t.text + "'";
    case Tok::string: return "string \"" + t.text + "\"";
    case Tok::comment: return "comment";
    case Tok::newline: return "end of line";
    case Tok::eof: return "end of file";
    default: return "'" + t.text + "'";
  }
}

}  // namespace napkin
