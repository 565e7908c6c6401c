#include "diagrams/graph_view.hpp"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/depth_first_search.hpp>
#include <boost/graph/topological_sort.hpp>
#include <deque>

namespace napkin {

struct NamedGraph::Impl {
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS>;
  Graph g;
};

NamedGraph::NamedGraph(std::vector<std::string> names, const std::vector<std::pair<std::size_t, std::size_t>>& edges)
    : names_(std::move(names)), impl_(std::make_unique<Impl>()) {
  impl_->g = Impl::Graph(names_.size());
  for (auto [u, v] : edges) boost::add_edge(u, v, impl_->g);
}
NamedGraph::~NamedGraph() = default;
NamedGraph::NamedGraph(NamedGraph&&) noexcept = default;

std::optional<std::size_t> NamedGraph::index(const std::string& name) const {
  for (std::size_t i = 0; i < names_.size(); ++i)
    if (names_[i] == name) return i;
  return std::nullopt;
}

std::optional<std::vector<std::size_t>> NamedGraph::topological_order() const {
  std::vector<std::size_t> rev;
  try {
    boost::topological_sort(impl_->g, std::back_inserter(rev));  // reverse topological order
  } catch (const boost::not_a_dag&) {
    return std::nullopt;
  }
  return std::vector<std::size_t>(rev.rbegin(), rev.rend());
}

namespace {
struct BackEdgeRecorder : boost::default_dfs_visitor {
  std::optional<std::pair<std::size_t, std::size_t>>* found;
  template <class E, class G>
  void back_edge(E e, const G& g) const {
    if (!*found) *found = std::pair<std::size_t, std::size_t>(boost::source(e, g), boost::target(e, g));
  }
};
}  // namespace

std::vector<std::size_t> NamedGraph::find_cycle() const {
  std::optional<std::pair<std::size_t, std::size_t>> back;
  BackEdgeRecorder vis;
  vis.found = &back;
  boost::depth_first_search(impl_->g, boost::visitor(vis));
  if (!back) return {};
  // The back edge u -> v closes a cycle v -> ... -> u -> v: find the path v -> u breadth first.
  auto [u, v] = *back;
  std::vector<std::ptrdiff_t> parent(names_.size(), -1);
  std::deque<std::size_t> queue{v};
  parent[v] = static_cast<std::ptrdiff_t>(v);
  while (!queue.empty() && parent[u] < 0) {
    std::size_t x = queue.front();
    queue.pop_front();
    for (std::size_t y : successors(x))
      if (parent[y] < 0) parent[y] = static_cast<std::ptrdiff_t>(x), queue.push_back(y);
  }
  std::vector<std::size_t> path{u};
  while (path.back() != v) path.push_back(static_cast<std::size_t>(parent[path.back()]));
  return std::vector<std::size_t>(path.rbegin(), path.rend());
}

bool NamedGraph::reaches(std::size_t from, std::size_t to) const {
  std::vector<boost::default_color_type> color(names_.size(), boost::white_color);
  boost::breadth_first_visit(impl_->g, from,
                             boost::color_map(boost::make_iterator_property_map(
                                 color.begin(), boost::get(boost::vertex_index, impl_->g))));
  return color[to] != boost::white_color;
}

std::vector<std::size_t> NamedGraph::successors(std::size_t v) const {
  std::vector<std::size_t> out;
  for (auto e : boost::make_iterator_range(boost::out_edges(v, impl_->g))) out.push_back(boost::target(e, impl_->g));
  return out;
}

std::vector<std::size_t> NamedGraph::predecessors(std::size_t v) const {
  std::vector<std::size_t> out;
  for (auto e : boost::make_iterator_range(boost::in_edges(v, impl_->g))) out.push_back(boost::source(e, impl_->g));
  return out;
}

void walk(const Expr& e, const std::function<void(const Expr&)>& fn) {
  fn(e);
  for (const auto& a : e.args) walk(*a, fn);
}

std::vector<std::string> referenced_arrays(const Expr& e, const Diagram& d) {
  std::vector<std::string> out;
  walk(e, [&](const Expr& n) {
    if (n.kind == Expr::Kind::ref && d.array_axes(n.name) && !contains(out, n.name)) out.push_back(n.name);
  });
  return out;
}

std::vector<std::string> called_diagrams(const Expr& e) {
  std::vector<std::string> out;
  walk(e, [&](const Expr& n) {
    if (n.kind == Expr::Kind::apply && n.op == Op::call && !contains(out, n.callee)) out.push_back(n.callee);
  });
  return out;
}

NamedGraph dataflow_graph(const Diagram& d) {
  std::vector<std::string> names;
  for (const auto* i : d.inputs()) names.push_back(i->name);
  for (const auto* s : d.statements()) names.push_back(s->name);
  std::vector<std::pair<std::size_t, std::size_t>> edges;
  auto index_of = [&](const std::string& n) -> std::optional<std::size_t> {
    for (std::size_t i = 0; i < names.size(); ++i)
      if (names[i] == n) return i;
    return std::nullopt;
  };
  auto stmts = d.statements();
  for (std::size_t k = 0; k < stmts.size(); ++k) {
    std::size_t v = d.inputs().size() + k;
    for (const auto& r : referenced_arrays(*stmts[k]->expr, d))
      if (auto u = index_of(r)) edges.emplace_back(*u, v);
  }
  return NamedGraph(std::move(names), edges);
}

NamedGraph call_graph(const DiagramTable& table) {
  std::vector<std::string> names;
  for (const auto& [n, _] : table) names.push_back(n);
  std::vector<std::pair<std::size_t, std::size_t>> edges;
  std::size_t u = 0;
  for (const auto& [n, d] : table) {
    for (const auto* s : d->statements())
      for (const auto& c : called_diagrams(*s->expr)) {
        auto it = table.find(c);
        if (it != table.end()) edges.emplace_back(u, static_cast<std::size_t>(std::distance(table.begin(), it)));
      }
    ++u;
  }
  return NamedGraph(std::move(names), edges);
}

}  // namespace napkin
