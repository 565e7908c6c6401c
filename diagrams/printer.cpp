#include "diagrams/printer.hpp"

#include <charconv>

namespace napkin {

namespace {

int precedence(const Expr& e) {
  if (e.kind != Expr::Kind::apply) return 4;
  switch (e.op) {
    case Op::add: case Op::sub: return 1;
    case Op::mul: case Op::div: return 2;
    case Op::neg: return 3;
    default: return 4;
  }
}

std::string number_text(const Number& n) {
  if (!n.spelling.empty()) return n.spelling;
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, n.value);
  (void)ec;
  return std::string(buf, p);
}

std::string binding_text(const Binding& b) {
  return b.key + "=" + (b.number ? number_text(*b.number) : b.ident);
}

std::string operand(const Expr& child, int parent_prec, bool right_side) {
  std::string s = print_expr(child);
  int p = precedence(child);
  // The right operand of an equal-precedence operator keeps its parentheses: a - (b - c).
  bool parens = p < parent_prec || (right_side && p == parent_prec);
  return parens ? "(" + s + ")" : s;
}

std::string application(const Expr& e) {
  std::string out = e.op == Op::call ? e.callee : std::string(op_name(e.op));
  out += "(";
  std::vector<std::string> parts;
  for (const auto& a : e.args) parts.push_back(print_expr(*a));
  if (e.op == Op::cast && e.dtype) parts.emplace_back(dtype_name(*e.dtype));
  std::vector<std::string> after;
  if (is_positional(e.op)) parts.insert(parts.end(), e.axes.begin(), e.axes.end());
  else after = e.axes;
  for (const auto& b : e.bindings) after.push_back(binding_text(b));
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  if (!after.empty()) {
    out += parts.empty() ? "; " : "; ";
    for (std::size_t i = 0; i < after.size(); ++i) out += (i ? ", " : "") + after[i];
  }
  return out + ")";
}

std::string level_suffix(const std::optional<MemLevel>& l) {
  return l ? " @" + std::string(level_name(*l)) : "";
}

struct Line {
  std::vector<std::optional<std::string>> leading;
  std::string code;
  std::string trailing;
};

Line line_of(const Trivia& t, std::string code) { return Line{t.leading, std::move(code), t.trailing}; }

std::string item_code(const Item& item) {
  if (const auto* a = std::get_if<AxisDecl>(&item)) {
    std::string s = "axis " + a->name + " =";
    for (std::size_t i = 0; i < a->size.size(); ++i)
      s += (i ? " * " : " ") + (a->size[i].axis.empty() ? std::to_string(a->size[i].literal) : a->size[i].axis);
    if (a->group) s += " group " + std::to_string(*a->group);
    if (a->stream) s += " stream " + std::to_string(*a->stream) + (a->stream_twice ? " twice" : "");
    if (a->warps) s += " warps " + std::to_string(*a->warps) + (a->warps_pingpong ? " pingpong" : "");
    if (a->cluster) s += " cluster " + std::to_string(*a->cluster);
    return s;
  }
  if (const auto* in = std::get_if<InputDecl>(&item))
    return "in  " + in->name + print_axes(in->axes) + " : " + std::string(dtype_name(in->dtype)) +
           level_suffix(in->level);
  if (const auto* o = std::get_if<OutputDecl>(&item))
    return "out " + o->name + " : " + std::string(dtype_name(o->dtype)) + level_suffix(o->level);
  const auto& s = std::get<Statement>(item);
  std::string code = s.name + print_axes(s.axes);
  if (s.dtype) code += " : " + std::string(dtype_name(*s.dtype));
  code += level_suffix(s.level);
  return code + " = " + print_expr(*s.expr);
}

const Trivia& item_trivia(const Item& item) {
  return std::visit([](const auto& x) -> const Trivia& { return x.trivia; }, item);
}

/** Prints lines, aligning the trailing comments of each run of consecutive commented lines. */
std::string render_lines(const std::vector<Line>& lines) {
  std::string out;
  std::size_t i = 0;
  while (i < lines.size()) {
    for (const auto& l : lines[i].leading) out += l ? "#" + *l + "\n" : "\n";
    if (lines[i].trailing.empty()) {
      out += lines[i].code + "\n";
      ++i;
      continue;
    }
    std::size_t j = i + 1;
    std::size_t width = lines[i].code.size();
    while (j < lines.size() && lines[j].leading.empty() && !lines[j].trailing.empty())
      width = std::max(width, lines[j++].code.size());
    for (std::size_t k = i; k < j; ++k)
      out += lines[k].code + std::string(width + 2 - lines[k].code.size(), ' ') + "# " + lines[k].trailing + "\n";
    i = j;
  }
  return out;
}

}  // namespace

std::string print_axes(const std::vector<std::string>& axes) {
  std::string s = "[";
  for (std::size_t i = 0; i < axes.size(); ++i) s += (i ? "," : "") + axes[i];
  return s + "]";
}

std::string print_expr(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::number: return number_text(e.number);
    case Expr::Kind::ref: {
      std::string s = e.name;
      if (e.level) s.append("@").append(level_name(*e.level));
      return s;
    }
    case Expr::Kind::apply: break;
  }
  int p = precedence(e);
  switch (e.op) {
    case Op::neg: {  // not "-" + operand(..): GCC 12 at -O3 warns of an overlap in that operator+ (-Wrestrict, GCC bug 105329)
      std::string s = "-";
      return s.append(operand(*e.args.at(0), p, false));
    }
    case Op::add: case Op::sub: case Op::mul: case Op::div: {
      const char* sym = e.op == Op::add ? " + " : e.op == Op::sub ? " - " : e.op == Op::mul ? " * " : " / ";
      return operand(*e.args.at(0), p, false) + sym + operand(*e.args.at(1), p, true);
    }
    default: return application(e);
  }
}

std::string print_file(const File& f) {
  std::vector<Line> lines;
  for (const auto& imp : f.imports) lines.push_back(line_of(imp.trivia, "import \"" + imp.path + "\""));
  for (const auto& d : f.diagrams) {
    lines.push_back(line_of(d.trivia, "diagram " + d.name));
    for (const auto& item : d.items) lines.push_back(line_of(item_trivia(item), item_code(item)));
  }
  std::string out = render_lines(lines);
  for (const auto& l : f.end.leading) out += l ? "#" + *l + "\n" : "\n";
  return out;
}

}  // namespace napkin
