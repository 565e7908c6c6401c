#include "diagrams/parser.hpp"

#include "diagrams/lexer.hpp"

namespace napkin {

namespace {

constexpr int kMaxDepth = 256;
constexpr int kMaxNodes = 4096;

/** Thrown inside the parser to abandon the current line; never escapes parse_file. */
struct SyntaxError {};

class Parser {
 public:
  Parser(std::vector<Token> toks, DiagnosticEngine& d) : toks_(std::move(toks)), diags_(d) {}

  ParseResult run() {
    while (peek().kind != Tok::eof && !diags_.saturated()) line();
    result_.file.end.leading = take_pending();
    while (!result_.file.end.leading.empty() && !result_.file.end.leading.back())
      result_.file.end.leading.pop_back();  // blank lines at the end of a file carry nothing
    return std::move(result_);
  }

 private:
  // ---------------------------------------------------------------- token access
  const Token& peek(int ahead = 0) const {
    std::size_t i = std::min(pos_ + static_cast<std::size_t>(ahead), toks_.size() - 1);
    return toks_[i];
  }
  const Token& next() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool at(Tok k) const { return peek().kind == k; }
  bool at_word(std::string_view w) const { return at(Tok::ident) && peek().text == w; }
  bool accept(Tok k) {
    if (!at(k)) return false;
    next();
    return true;
  }
  /** Reports a syntax error, unless the line already has one (a lexical error, typically): one
   *  message per bad line, not a cascade. Abandons the line. */
  [[noreturn]] void fail(const Token& t, const std::string& what) {
    bool line_has_error = false;
    for (const auto& d : diags_.diagnostics())
      line_has_error |= d.severity == Severity::error && d.loc.file == t.loc.file && d.loc.line == t.loc.line;
    if (!line_has_error) diags_.error(t.loc, "expected " + what + ", found " + token_description(t));
    throw SyntaxError{};
  }
  const Token& expect(Tok k, const std::string& what) {
    if (!at(k)) fail(peek(), what);
    return next();
  }
  std::string expect_ident(const std::string& what) { return expect(Tok::ident, what).text; }
  void skip_line() {
    while (!at(Tok::newline) && !at(Tok::eof)) next();
    accept(Tok::newline);
  }

  // ---------------------------------------------------------------- trivia
  std::vector<std::optional<std::string>> take_pending() {
    auto p = std::move(pending_);
    pending_.clear();
    return p;
  }
  Trivia finish_item() {
    Trivia t;
    t.leading = take_pending();
    if (at(Tok::comment)) {
      std::string c = next().text;
      std::size_t b = c.find_first_not_of(" \t");
      t.trailing = b == std::string::npos ? "" : c.substr(b);
    }
    if (!at(Tok::eof)) expect(Tok::newline, "end of line");
    return t;
  }

  // ---------------------------------------------------------------- lines
  void line() {
    if (at(Tok::newline)) {  // blank line
      next();
      bool started = !result_.file.imports.empty() || !result_.file.diagrams.empty() || !pending_.empty();
      if (started && !(pending_.size() && !pending_.back())) pending_.push_back(std::nullopt);
      return;
    }
    if (at(Tok::comment) && (peek(1).kind == Tok::newline || peek(1).kind == Tok::eof)) {
      pending_.push_back(next().text);
      accept(Tok::newline);
      return;
    }
    std::size_t start = pos_;
    item_name_.clear();
    try {
      item();
    } catch (const SyntaxError&) {
      // The item is dropped; remember its name so that its uses are not reported as undefined.
      if (!item_name_.empty() && !result_.file.diagrams.empty())
        result_.broken.insert(result_.file.diagrams.back().name + "." + item_name_);
      pending_.clear();
      if (pos_ == start) next();
      skip_line();
    }
  }

  void item() {
    const Token& first = peek();
    if (first.kind != Tok::ident) fail(first, "a declaration ('diagram', 'axis', 'in', 'out', 'import') or a statement");
    if (first.text == "import") return import_decl();
    if (first.text == "diagram") return diagram_decl();
    if (result_.file.diagrams.empty()) {
      diags_.error(first.loc, "'" + first.text + "' outside a diagram; start one with 'diagram NAME'");
      throw SyntaxError{};
    }
    if (first.text == "axis") return axis_decl();
    if (first.text == "in") return input_decl();
    if (first.text == "out") return output_decl();
    statement();
  }

  void import_decl() {
    Import imp;
    imp.loc = next().loc;
    if (!result_.file.diagrams.empty()) {
      diags_.error(imp.loc, "'import' must come before the first diagram of the file");
      throw SyntaxError{};
    }
    imp.path = expect(Tok::string, "a quoted file name after 'import'").text;
    imp.trivia = finish_item();
    result_.file.imports.push_back(std::move(imp));
  }

  void diagram_decl() {
    Diagram d;
    d.loc = next().loc;
    d.name = expect_ident("a diagram name after 'diagram'");
    d.trivia = finish_item();
    // Canonical form puts a blank line before every diagram that follows other items.
    bool follows = !result_.file.imports.empty() || !result_.file.diagrams.empty();
    if (follows && (d.trivia.leading.empty() || d.trivia.leading.front()))
      d.trivia.leading.insert(d.trivia.leading.begin(), std::nullopt);
    if (!follows && !d.trivia.leading.empty() && !d.trivia.leading.front())
      d.trivia.leading.erase(d.trivia.leading.begin());
    result_.file.diagrams.push_back(std::move(d));
  }

  void axis_decl() {
    AxisDecl a;
    a.loc = next().loc;
    a.name = item_name_ = expect_ident("an axis name after 'axis'");
    expect(Tok::equals, "'=' and the axis size");
    do {
      SizeFactor f;
      f.loc = peek().loc;
      if (at(Tok::integer)) f.literal = next().int_value;
      else if (at(Tok::ident)) f.axis = next().text;
      else fail(peek(), "an integer size or an axis name");
      a.size.push_back(std::move(f));
    } while (accept(Tok::star));
    while (at_word("group") || at_word("stream") || at_word("warps") || at_word("cluster")) {
      const Token& word = next();
      if (!a.label_loc.line) a.label_loc = word.loc;
      const Token& n = expect(Tok::integer, "a size after '" + word.text + "'");
      if (word.text == "group") a.group = n.int_value;
      else if (word.text == "warps") {
        a.warps = n.int_value;
        if (at_word("pingpong")) next(), a.warps_pingpong = true;
      }
      else if (word.text == "cluster") a.cluster = n.int_value;
      else {
        a.stream = n.int_value;
        if (at_word("twice")) next(), a.stream_twice = true;
      }
    }
    a.trivia = finish_item();
    result_.file.diagrams.back().items.push_back(std::move(a));
  }

  std::vector<std::string> axis_list(std::vector<SourceLoc>& locs) {
    expect(Tok::lbracket, "'[' and the array's axes");
    std::vector<std::string> axes;
    if (!at(Tok::rbracket)) {
      do {
        locs.push_back(peek().loc);
        axes.push_back(expect_ident("an axis name"));
      } while (accept(Tok::comma));
    }
    expect(Tok::rbracket, "',' or ']'");
    return axes;
  }

  DType dtype() {
    const Token& t = expect(Tok::ident, "a dtype (" + dtype_list() + ")");
    auto d = parse_dtype(t.text);
    if (!d) {
      diags_.error(t.loc, "unknown dtype '" + t.text + "'; expected one of " + dtype_list());
      throw SyntaxError{};
    }
    return *d;
  }

  std::optional<MemLevel> opt_level() {
    if (!accept(Tok::at)) return std::nullopt;
    const Token& t = expect(Tok::ident, "a memory level (" + level_list() + ") after '@'");
    auto l = parse_level(t.text);
    if (!l) {
      diags_.error(t.loc, "unknown memory level '" + t.text + "'; expected one of " + level_list());
      throw SyntaxError{};
    }
    return l;
  }

  void input_decl() {
    InputDecl in;
    in.loc = next().loc;
    in.name = item_name_ = expect_ident("an array name after 'in'");
    in.axes = axis_list(in.axis_locs);
    expect(Tok::colon, "':' and the input's dtype");
    in.dtype = dtype();
    in.level = opt_level();
    in.trivia = finish_item();
    result_.file.diagrams.back().items.push_back(std::move(in));
  }

  void output_decl() {
    OutputDecl o;
    o.loc = next().loc;
    o.name = item_name_ = expect_ident("an array name after 'out'");
    expect(Tok::colon, "':' and the output's dtype");
    o.dtype = dtype();
    o.level = opt_level();
    o.trivia = finish_item();
    result_.file.diagrams.back().items.push_back(std::move(o));
  }

  void statement() {
    Statement s;
    s.loc = peek().loc;
    s.name = item_name_ = next().text;
    s.axes = axis_list(s.axis_locs);
    if (accept(Tok::colon)) s.dtype = dtype();
    s.level = opt_level();
    expect(Tok::equals, "'=' and an expression");
    depth_ = 0;
    nodes_ = 0;
    s.expr = expr();
    s.trivia = finish_item();
    result_.file.diagrams.back().items.push_back(std::move(s));
  }

  // ---------------------------------------------------------------- expressions
  /** Counts nodes so that one statement cannot build a tree deep enough to exhaust the stack of
   *  the recursive walkers (a + a + ... is left-deep without any parenthesis). */
  void count_node(const Token& t) {
    if (++nodes_ > kMaxNodes) {
      diags_.error(t.loc, "expression too long (more than " + std::to_string(kMaxNodes) + " operations)");
      throw SyntaxError{};
    }
  }

  void enter(const Token& t) {
    if (++depth_ > kMaxDepth) {
      diags_.error(t.loc, "expression nested too deeply (more than " + std::to_string(kMaxDepth) + " levels)");
      throw SyntaxError{};
    }
  }

  ExprPtr expr() {
    ExprPtr lhs = term();
    while (at(Tok::plus) || at(Tok::minus)) {
      const Token& op = next();
      count_node(op);
      lhs = make_apply(op.kind == Tok::plus ? Op::add : Op::sub, {lhs, term()}, op.loc);
    }
    return lhs;
  }

  ExprPtr term() {
    ExprPtr lhs = unary();
    while (at(Tok::star) || at(Tok::slash)) {
      const Token& op = next();
      count_node(op);
      lhs = make_apply(op.kind == Tok::star ? Op::mul : Op::div, {lhs, unary()}, op.loc);
    }
    return lhs;
  }

  ExprPtr unary() {
    if (at(Tok::minus)) {
      const Token& m = next();
      enter(m);
      ExprPtr e = make_apply(Op::neg, {unary()}, m.loc);
      --depth_;
      return e;
    }
    return primary();
  }

  ExprPtr primary() {
    const Token& t = peek();
    if (t.kind == Tok::integer || t.kind == Tok::real) {
      next();
      return make_number(Number{t.real_value, t.text}, t.loc);
    }
    if (t.kind == Tok::lparen) {
      next();
      enter(t);
      ExprPtr e = expr();
      --depth_;
      expect(Tok::rparen, "')'");
      return e;
    }
    if (t.kind != Tok::ident) fail(t, "an expression");
    next();
    if (at(Tok::lparen)) return application(t);
    return make_ref(t.text, t.loc, opt_level());
  }

  ExprPtr application(const Token& name) {
    const Token& open = next();
    enter(open);
    auto op = builtin_op(name.text);
    auto e = std::make_shared<Expr>();
    e->kind = Expr::Kind::apply;
    e->loc = name.loc;
    e->op = op.value_or(Op::call);
    if (!op) e->callee = name.text;
    if (!at(Tok::rparen) && !at(Tok::semicolon)) {
      do {
        if (e->op == Op::cast && e->args.size() == 1) e->dtype = dtype();
        else if (is_positional(e->op)) {
          e->axis_locs.push_back(peek().loc);
          e->axes.push_back(expect_ident("an axis name"));
        } else e->args.push_back(expr());
      } while (accept(Tok::comma));
    }
    // max(A, B) (two operands, nothing after ';') is the element-wise maximum; max(X; v) reduces.
    if (e->op == Op::max && e->args.size() == 2 && !at(Tok::semicolon)) e->op = Op::maximum;
    if (accept(Tok::semicolon)) {
      do {
        const Token& key = expect(Tok::ident, "an axis name or 'name=value'");
        if (accept(Tok::equals)) {
          Binding b{key.text, "", std::nullopt, key.loc};
          bool negative = accept(Tok::minus);
          if (at(Tok::integer) || at(Tok::real)) {
            const Token& n = next();
            b.number = Number{negative ? -n.real_value : n.real_value, (negative ? "-" : "") + n.text};
          } else if (!negative) {
            b.ident = expect_ident("a number or an axis name after '='");
          } else {
            fail(peek(), "a number after '-'");
          }
          e->bindings.push_back(std::move(b));
        } else {
          e->axes.push_back(key.text);
          e->axis_locs.push_back(key.loc);
        }
      } while (accept(Tok::comma));
    }
    expect(Tok::rparen, "',' or ')'");
    --depth_;
    return {std::move(e)};
  }

  std::vector<Token> toks_;
  std::size_t pos_ = 0;
  DiagnosticEngine& diags_;
  ParseResult result_;
  std::vector<std::optional<std::string>> pending_;
  int depth_ = 0;
  int nodes_ = 0;
  std::string item_name_;  ///< name of the item being parsed, once known
};

}  // namespace

ParseResult parse_file(const SourceFile& src, DiagnosticEngine& diags) {
  return Parser(lex(src, diags), diags).run();
}

}  // namespace napkin
