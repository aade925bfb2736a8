#pragma once
// Pieces (jinja_lexer.h) to a syntax tree (jinja_ast.h).
//
// Statements: if/elif/else, for (one or two targets, an optional "if"
// filter, an else branch), set (a name, "a, b", "ns.attribute", or a
// {% set x %}...{% endset %} block), macro (parameters with defaults;
// jinja_macro.h), break and continue (jinja2's loopcontrols, which
// transformers enables; in a for loop's body only), and
// generation/endgeneration (transformers' marker for assistant text; its
// body renders as is).
// Expressions follow jinja2's precedence: "x if c else y", or, and, not,
// comparisons and "in", + and -, ~, * / // %, **, unary minus, then
// postfix attribute, index, slice and call, then "| filter" and
// "is [not] test". Tuples are Python's: "(a, b)", "(a,)", "()", and "a, b"
// without parentheses as a set's value or in {{ }}. Call blocks, includes,
// blocks and other tags are an lt::Error naming the template and line.
#include <string>
#include <vector>

#include "data/jinja_ast.h"
#include "data/jinja_lexer.h"

namespace lt::data::jinja {

Body parse(const std::vector<Piece>& pieces, const std::string& source_name);

}  // namespace lt::data::jinja
