#include "diagrams/to_dot.hpp"

#include <array>
#include <optional>

#include "diagrams/graph_view.hpp"
#include "diagrams/printer.hpp"
#include "diagrams/typing.hpp"

namespace napkin {

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else out += c;
  }
  return out;
}

namespace {

// Colour-blind-safe qualitative palette (Okabe & Ito 2008, then Tol's "muted").
constexpr std::array<const char*, 12> kPalette{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00",
                                               "#332288", "#999933", "#882255", "#44AA99", "#AA4499", "#117733"};
constexpr const char* kReduced = "#C0392B";

/** The operation that characterises a statement: the first non-element-wise application in
 *  pre-order (contract, softmax, a call, ...), or null for a purely element-wise statement. */
const Expr* principal(const Expr& e) {
  const Expr* found = nullptr;
  walk(e, [&](const Expr& n) {
    if (!found && n.kind == Expr::Kind::apply && !is_elementwise(n.op)) found = &n;
  });
  return found;
}

std::string join_axes(const std::vector<std::string>& a) {
  std::string s;
  for (std::size_t i = 0; i < a.size(); ++i) s += (i ? ", " : "") + a[i];
  return s;
}

class DotWriter {
 public:
  DotWriter(const Program& p, const Diagram& d, const SizeMap& sizes, const DotRelabelling* r)
      : d_(d), sizes_(sizes), typer_(d, p.diagrams, nullptr), r_(r) {
    std::size_t i = 0;
    for (const auto* a : d.axes()) colour_[a->name] = kPalette[i++ % kPalette.size()];
  }

  std::string run() {
    out_ += "digraph \"" + d_.name + "\" {\n";
    out_ += "  graph [rankdir=LR, fontname=\"Helvetica\", nodesep=0.3, ranksep=0.55, labelloc=t, labeljust=l,\n";
    out_ += "         label=<" + title() + ">];\n";
    out_ += "  node [fontname=\"Helvetica\", fontsize=11];\n";
    out_ += "  edge [fontname=\"Helvetica\", fontsize=9, arrowsize=0.5];\n";
    inputs();
    statements();
    outputs();
    out_ += "}\n";
    return out_;
  }

 private:
  std::string colours(const AxisList& axes, std::optional<MemLevel> level = std::nullopt) {
    if (axes.empty()) return level ? level_colour(*level) : "#555555";
    std::string c;
    for (const auto& a : axes) {  // appended piece by piece: GCC 12 at -O3 warns of an overlap in "literal" + string (-Wrestrict, GCC bug 105329)
      if (!c.empty()) c += ':';
      c += level ? level_colour(*level) : colour_[a];
    }
    return c;
  }
  static std::string level_colour(MemLevel l) {
    switch (l) {
      case MemLevel::hbm: return "#222222";
      case MemLevel::l2: return "#7F7F7F";
      case MemLevel::smem: return "#00897B";
      case MemLevel::reg: return "#E67E22";
    }
    return "#222222";
  }
  /** Level of `array` where `kernel` reads it (HBM for diagram inputs and outputs outside). */
  std::optional<MemLevel> level_in(const std::string& kernel, const std::string& array) const {
    if (!r_) return std::nullopt;
    auto k = r_->level.find(kernel);
    if (k == r_->level.end()) return MemLevel::hbm;
    auto a = k->second.find(array);
    return a == k->second.end() ? MemLevel::hbm : a->second;
  }
  std::string axis_text(const std::string& kernel, const std::string& a) const {
    if (!r_) return a;
    auto k = r_->axis_note.find(kernel);
    if (k == r_->axis_note.end()) return a;
    auto n = k->second.find(a);
    return n == k->second.end() ? a : a + "<sub>" + n->second + "</sub>";
  }

  /** Wire label: array name and axes; overlined = woven by the consumer, red = reduced by it. */
  std::string wire_label(const std::string& array, const AxisList& axes, const AxisList* consumer_axes,
                         const std::string& kernel, std::optional<MemLevel> level) {
    std::string s = "<<b>" + html_escape(array) + "</b>" +
                    (level ? "<font color=\"" + level_colour(*level) + "\">@" + std::string(level_name(*level)) + "</font>" : "") + " ";
    for (const auto& a : axes) {
      std::string name = axis_text(kernel, a);
      bool reduced = consumer_axes && !contains(*consumer_axes, a);
      if (reduced) s += "<font color=\"" + std::string(kReduced) + "\"><s>" + name + "</s></font> ";
      else if (consumer_axes) s += "<font color=\"" + colour_[a] + "\"><o>" + name + "</o></font> ";
      else s += "<font color=\"" + colour_[a] + "\">" + name + "</font> ";
    }
    return s + ">";
  }

  void wire(const std::string& from, const std::string& to, const std::string& array, const AxisList& axes,
            const AxisList* consumer_axes, const std::string& kernel = "") {
    auto level = r_ ? (kernel.empty() ? std::optional<MemLevel>(MemLevel::hbm) : level_in(kernel, array)) : std::nullopt;
    out_ += "  \"" + from + "\" -> \"" + to + "\" [color=\"" + colours(axes, level) + "\", penwidth=1.2, label=" +
            wire_label(array, axes, consumer_axes, kernel, level);
    AxisList ended;
    if (consumer_axes)
      for (const auto& a : axes)
        if (!contains(*consumer_axes, a)) ended.push_back(a);
    if (!ended.empty())
      out_ += ", headlabel=<<font color=\"" + std::string(kReduced) + "\">" + join_axes(ended) +
              " ⊣</font>>, labeldistance=1.6, labelangle=25";
    out_ += "];\n";
  }

  /** Inputs read by one operation only (weights, typically) are placed beside it; the others
   *  (activations, shared operands) start at the left edge. */
  void inputs() {
    std::map<std::string, int> readers;
    for (const auto* s : d_.statements())
      for (const auto& r : referenced_arrays(*s->expr, d_)) ++readers[r];
    std::string edge, near;
    auto ins = d_.inputs();
    for (std::size_t i = 0; i < ins.size(); ++i) {
      const auto* in = ins[i];
      std::string node = "    \"in:" + in->name + "\" [shape=cds, style=filled, fillcolor=\"#F2F2F2\", label=<<b>" +
                         html_escape(in->name) + "</b> <font point-size=\"9\">" +
                         std::string(dtype_name(in->dtype)) + "</font>>];\n";
      (i == 0 || readers[in->name] != 1 ? edge : near) += node;
    }
    out_ += "  { rank=source;\n" + edge + "  }\n" + near;
  }

  void statements() {
    if (r_) {  // one region per kernel, in execution order
      for (const auto& k : r_->kernels) {
        out_ += "  subgraph \"cluster_" + k + "\" {\n    style=\"rounded,dashed\"; color=\"#00897B\"; fontsize=10; labeljust=l;\n"
                "    label=<<b>kernel " + html_escape(k) + "</b><br align=\"left\"/>" + r_->caption.at(k) + ">;\n";
        for (const auto* s : d_.statements())
          if (r_->kernel_of.count(s->name) && r_->kernel_of.at(s->name) == k) out_ += "    \"op:" + s->name + "\";\n";
        out_ += "  }\n";
      }
    }
    for (const auto* s : d_.statements()) {
      const Expr* pr = principal(*s->expr);
      std::string title, detail = html_escape(print_expr(*s->expr));
      if (detail.size() > 60) detail = detail.substr(0, 57) + "...";
      bool call = pr && pr->op == Op::call;
      if (!pr) title = "map";
      else if (call) title = pr->callee;
      else title = std::string(op_name(pr->op));
      if (pr && !call && !pr->axes.empty()) {
        bool reduces = pr->op == Op::contract || pr->op == Op::sum || pr->op == Op::max || pr->op == Op::mean;
        title += (reduces ? " over " : is_positional(pr->op) ? " " : " along ") + join_axes(pr->axes);
      }
      if (call) {
        std::vector<AxisList> args;
        for (const auto& a : pr->args) args.push_back(typer_.axes_of(*a).value_or(AxisList{}));
        if (auto shape = typer_.call_shape(*pr, args); shape && !shape->woven.empty())
          title += " woven over " + join_axes(shape->woven);
      }
      out_ += "  \"op:" + s->name + "\" [shape=box, style=\"rounded,filled\", fillcolor=\"" +
              std::string(call ? "#FFF4DC" : "#EAF1FB") + "\"" + (call ? ", peripheries=2" : "") + ", label=<<b>" +
              html_escape(title) + "</b><br/><font point-size=\"9\" color=\"#444444\">" + html_escape(s->name) +
              " = " + detail + "</font>>];\n";
      std::string kernel = r_ && r_->kernel_of.count(s->name) ? r_->kernel_of.at(s->name) : "";
      for (const auto& r : referenced_arrays(*s->expr, d_)) {
        const auto* axes = d_.array_axes(r);
        wire(d_.find_input(r) ? "in:" + r : "op:" + r, "op:" + s->name, r, *axes, &s->axes, kernel);
      }
    }
  }

  void outputs() {
    out_ += "  { rank=sink;\n";
    for (const auto* o : d_.outputs())
      out_ += "    \"out:" + o->name + "\" [shape=cds, style=filled, fillcolor=\"#E3F4E8\", label=<<b>" +
              html_escape(o->name) + "</b> <font point-size=\"9\">" + std::string(dtype_name(o->dtype)) + "</font>>];\n";
    out_ += "  }\n";
    for (const auto* o : d_.outputs()) {
      const auto* axes = d_.array_axes(o->name);
      if (!axes) continue;
      wire(d_.find_input(o->name) ? "in:" + o->name : "op:" + o->name, "out:" + o->name, o->name, *axes, nullptr);
    }
  }

  /** Title and legend: the diagram's name, then every axis in its colour with its size. */
  std::string title() {
    std::string s = "<table border=\"0\" cellborder=\"0\" cellspacing=\"2\"><tr><td align=\"left\"><b>" +
                    html_escape(d_.name) + "</b>  <font point-size=\"10\" color=\"#666666\">napkin diagram</font>"
                    "</td></tr><tr><td align=\"left\"><font point-size=\"9\">axes: ";
    for (const auto* a : d_.axes()) {
      auto it = sizes_.find(a->name);
      std::string size = it == sizes_.end() ? "?" : std::to_string(it->second);
      s += "<font color=\"" + colour_[a->name] + "\"><b>" + a->name + "</b>=" + size + "</font>  ";
    }
    s += "   <o>a</o> woven over   <font color=\"" + std::string(kReduced) + "\"><s>a</s> ⊣</font> reduced</font></td></tr>";
    if (r_) {
      s += "<tr><td align=\"left\"><font point-size=\"9\">levels: ";
      for (auto l : {MemLevel::hbm, MemLevel::smem, MemLevel::reg})
        s += "<font color=\"" + level_colour(l) + "\"><b>" + std::string(level_name(l)) + "</b></font>  ";
      s += "   partitions: g128 = group of 128 (thread blocks), s64 = stream of 64 (loop)</font></td></tr>";
    }
    return s + "</table>";
  }

  const Diagram& d_;
  const SizeMap& sizes_;
  Typer typer_;
  const DotRelabelling* r_;
  std::map<std::string, std::string> colour_;
  std::string out_;
};

}  // namespace

std::string diagram_to_dot(const Program& p, const Diagram& d, const SizeMap& sizes, const DotRelabelling* relabelling) {
  return DotWriter(p, d, sizes, relabelling).run();
}

}  // namespace napkin
