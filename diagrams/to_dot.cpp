#include "diagrams/to_dot.hpp"

#include <array>

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
  DotWriter(const Program& p, const Diagram& d, const SizeMap& sizes)
      : p_(p), d_(d), sizes_(sizes), typer_(d, p.diagrams, nullptr) {
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
  std::string colours(const AxisList& axes) {
    if (axes.empty()) return "#555555";
    std::string c;
    for (const auto& a : axes) c += (c.empty() ? "" : ":") + colour_[a];
    return c;
  }

  /** Wire label: array name and axes; overlined = woven by the consumer, red = reduced by it. */
  std::string wire_label(const std::string& array, const AxisList& axes, const AxisList* consumer_axes) {
    std::string s = "<<b>" + html_escape(array) + "</b> ";
    for (const auto& a : axes) {
      bool reduced = consumer_axes && !contains(*consumer_axes, a);
      if (reduced) s += "<font color=\"" + std::string(kReduced) + "\"><s>" + a + "</s></font> ";
      else if (consumer_axes) s += "<font color=\"" + colour_[a] + "\"><o>" + a + "</o></font> ";
      else s += "<font color=\"" + colour_[a] + "\">" + a + "</font> ";
    }
    return s + ">";
  }

  void wire(const std::string& from, const std::string& to, const std::string& array, const AxisList& axes,
            const AxisList* consumer_axes) {
    out_ += "  \"" + from + "\" -> \"" + to + "\" [color=\"" + colours(axes) + "\", penwidth=1.2, label=" +
            wire_label(array, axes, consumer_axes);
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
        title += (reduces ? " over " : pr->op == Op::causal ? " " : " along ") + join_axes(pr->axes);
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
      for (const auto& r : referenced_arrays(*s->expr, d_)) {
        const auto* axes = d_.array_axes(r);
        wire(d_.find_input(r) ? "in:" + r : "op:" + r, "op:" + s->name, r, *axes, &s->axes);
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
    return s + "   <o>a</o> woven over   <font color=\"" + std::string(kReduced) +
           "\"><s>a</s> ⊣</font> reduced</font></td></tr></table>";
  }

  const Program& p_;
  const Diagram& d_;
  const SizeMap& sizes_;
  Typer typer_;
  std::map<std::string, std::string> colour_;
  std::string out_;
};

}  // namespace

std::string diagram_to_dot(const Program& p, const Diagram& d, const SizeMap& sizes) {
  return DotWriter(p, d, sizes).run();
}

}  // namespace napkin
