/** \file lexer.hpp
 *  Diagram text -> tokens. The language is line-oriented: a newline ends an item, except inside
 *  parentheses or brackets, where newlines are skipped. Comments run from '#' to the end of the
 *  line and are returned as tokens so that the parser can keep them as trivia. Inside ( or [ a
 *  line break continues the item only when the next line is indented, so that one unclosed
 *  parenthesis cannot swallow the rest of the file.
 *
 *  Lexical errors (unexpected characters, one per character however many bytes its UTF-8 takes;
 *  unterminated strings; integers too large; reals that fp64 would make infinite or zero; NUL
 *  bytes) are reported to the DiagnosticEngine; the lexer never throws on user input and always
 *  ends with an end-of-file token. A byte-order mark never reaches it (SourceFile drops it).
 */
#pragma once
#include <string>
#include <vector>

#include "diagrams/diagnostics.hpp"
#include "diagrams/source.hpp"

namespace napkin {

enum class Tok {
  ident, integer, real, string, comment, newline, eof,
  lbracket, rbracket, lparen, rparen, comma, semicolon, colon, equals, at, plus, minus, star, slash,
};

struct Token {
  Tok kind = Tok::eof;
  std::string text;        ///< identifier, number spelling, string contents, or comment text
  std::int64_t int_value = 0;
  double real_value = 0;
  SourceLoc loc;
};

/** Splits `file` into tokens. A line holding only a comment yields `comment newline`; a blank line
 *  yields a lone `newline`. */
std::vector<Token> lex(const SourceFile& file, DiagnosticEngine& diags);

/** Human name of a token kind, for messages ("']'", "end of line"). */
std::string token_description(const Token& t);

}  // namespace napkin
