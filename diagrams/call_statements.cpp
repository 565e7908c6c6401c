// One call per statement (contract: call_statements.hpp).
#include "diagrams/call_statements.hpp"

#include <set>

#include "diagrams/typing.hpp"

namespace napkin {

namespace {

bool is_call(const Expr& e) { return e.kind == Expr::Kind::apply && e.op == Op::call; }

/** The call nodes of `e`, innermost first (post-order), each with whether it sits inside another
 *  call's arguments. */
void calls_of(const Expr& e, bool inside_call, std::vector<std::pair<const Expr*, bool>>& out) {
  for (const auto& a : e.args) calls_of(*a, inside_call || is_call(e), out);
  if (is_call(e)) out.emplace_back(&e, inside_call);
}

/** The first call of `calls` to move out: any but the outermost last one; nullptr when one or none. */
const Expr* call_to_hoist(const std::vector<std::pair<const Expr*, bool>>& calls) {
  if (calls.size() < 2) return nullptr;
  const Expr* kept = nullptr;
  for (const auto& [c, inside] : calls)
    if (!inside) kept = c;
  for (const auto& [c, inside] : calls)
    if (c != kept) return c;
  return nullptr;
}

}  // namespace

Diagram one_call_per_statement(const Program& p, const Diagram& d, bool& changed) {
  changed = false;
  Diagram out = d;
  std::set<std::string> taken = declared_names(d);
  for (std::size_t k = 0; k < out.items.size(); ++k) {
    for (;;) {
      auto* s = std::get_if<Statement>(&out.items[k]);
      if (!s) break;
      std::vector<std::pair<const Expr*, bool>> calls;
      calls_of(*s->expr, false, calls);
      const Expr* hoist = call_to_hoist(calls);
      if (!hoist) break;
      Typer typer(out, p.diagrams, nullptr);
      Statement moved;
      for (int i = 1;; ++i)
        if (moved.name = s->name + "_call" + std::to_string(i); taken.insert(moved.name).second) break;
      moved.axes = *typer.axes_of(*hoist);
      moved.axis_locs.assign(moved.axes.size(), hoist->loc);
      moved.expr = find_node(s->expr, hoist);
      moved.loc = hoist->loc;
      s->expr = replace_node(s->expr, hoist, make_ref(moved.name, hoist->loc));
      out.items.insert(out.items.begin() + static_cast<std::ptrdiff_t>(k), std::move(moved));
      ++k;  // the statement moved one down
      changed = true;
    }
  }
  return out;
}

}  // namespace napkin
