/** \file graph_view.hpp
 *  Boost.Graph views of diagrams: the dataflow graph of one diagram (arrays as vertices, an edge
 *  from each array to every statement that reads it) and the call graph between diagrams.
 *  Used for topological order, cycle detection and reachability. The only file that includes BGL.
 */
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "diagrams/ir.hpp"
#include "diagrams/typing.hpp"

namespace napkin {

/** A directed graph over named vertices, in insertion order (so results are deterministic). */
class NamedGraph {
 public:
  NamedGraph(std::vector<std::string> names, const std::vector<std::pair<std::size_t, std::size_t>>& edges);
  ~NamedGraph();
  NamedGraph(NamedGraph&&) noexcept;

  const std::vector<std::string>& names() const { return names_; }
  std::optional<std::size_t> index(const std::string& name) const;
  /** Vertices in dependency order (sources first); nullopt when the graph has a cycle. */
  std::optional<std::vector<std::size_t>> topological_order() const;
  /** The vertices of one cycle, in edge order, or empty when there is none. */
  std::vector<std::size_t> find_cycle() const;
  bool reaches(std::size_t from, std::size_t to) const;
  std::vector<std::size_t> successors(std::size_t v) const;
  std::vector<std::size_t> predecessors(std::size_t v) const;

 private:
  struct Impl;
  std::vector<std::string> names_;
  std::unique_ptr<Impl> impl_;
};

/** Names of the arrays an expression reads (each once, in order of first use). */
std::vector<std::string> referenced_arrays(const Expr& e, const Diagram& d);
/** Names of the diagrams an expression calls. */
std::vector<std::string> called_diagrams(const Expr& e);
/** Calls `fn` on every node of `e`, parents before children. */
void walk(const Expr& e, const std::function<void(const Expr&)>& fn);

/** Dataflow graph of `d`: vertices are its inputs then its statements, in item order. */
NamedGraph dataflow_graph(const Diagram& d);
/** Call graph: a vertex per diagram of `table`, an edge from caller to callee. */
NamedGraph call_graph(const DiagramTable& table);

}  // namespace napkin
