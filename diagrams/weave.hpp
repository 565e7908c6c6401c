/** \file weave.hpp
 *  Weave analysis: for each statement, which axes it is woven (mapped) over, which it reduces and
 *  which it normalises along (paper §2.1: an operation is woven over every axis its result shares
 *  with its operands; NCD weaving). Relabelling is legal or not according to these roles:
 *  grouping needs a woven axis (§2.3), streaming needs a lemma for each reducing or normalising
 *  operation (§3).
 */
#pragma once
#include <map>
#include <string>
#include <vector>

#include "diagrams/program.hpp"
#include "diagrams/typing.hpp"

namespace napkin {

enum class AxisRole {
  woven,       ///< in the result; every operation maps over it
  reduced,     ///< summed (contract, sum, mean) or maxed away inside the statement
  normalised,  ///< in the result, but coupled along it (softmax, layernorm, rmsnorm)
};

std::string_view role_name(AxisRole r);

/** The operation of a statement that gives an axis a non-woven role. */
struct RoleSource {
  AxisRole role = AxisRole::woven;
  Op op = Op::add;        ///< contract, sum, max, mean, softmax, layernorm, rmsnorm (or add: woven)
  const Expr* node = nullptr;
};

/** Roles of every axis a statement touches (its result and every operand inside its expression).
 *  An axis reduced or normalised anywhere in the statement takes that role (reduced wins over
 *  normalised, which wins over woven). */
struct StatementWeave {
  const Statement* statement = nullptr;
  std::map<std::string, RoleSource> roles;
  std::vector<std::string> reads;  ///< arrays the statement reads, in order of first use
  bool has_call = false;           ///< the statement calls another diagram
  std::vector<const Expr*> causal_masks;  ///< causal(q, x) nodes inside

  AxisRole role(const std::string& axis) const;
  bool touches(const std::string& axis) const { return roles.count(axis) > 0; }
};

/** Weave analysis of every statement of a verified diagram, in item order. */
std::vector<StatementWeave> weave_analysis(const Program& p, const Diagram& d);

}  // namespace napkin
