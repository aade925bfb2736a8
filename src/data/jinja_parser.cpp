#include "data/jinja_parser.h"

#include <algorithm>
#include <charconv>
#include <initializer_list>
#include <optional>
#include <set>
#include <utility>

#include "core/error.h"
#include "data/jinja_numbers.h"

namespace lt::data::jinja {

namespace {

// Nesting deeper than this ("((((...", "{% if %}" in "{% if %}" ...) is
// refused rather than recursing until the stack runs out; real templates
// nest a handful of levels.
constexpr int kMaxNesting = 200;

bool is_keyword(const std::string& name) {
  static const char* kKeywords[] = {"and", "or", "not", "in", "is", "if", "else"};
  return std::find(std::begin(kKeywords), std::end(kKeywords), name) != std::end(kKeywords);
}

// Parses the tokens of one piece.
class ExprParser {
 public:
  ExprParser(const std::vector<Token>& tokens, size_t start, const std::string& source_name,
             int line)
      : tokens_(tokens), pos_(start), name_(source_name), line_(line) {}

  bool done() const { return pos_ >= tokens_.size(); }
  size_t position() const { return pos_; }

  bool at(std::string_view text) const {
    return !done() && tokens_[pos_].kind != TokenKind::kString && tokens_[pos_].text == text;
  }
  bool accept(std::string_view text) {
    if (!at(text)) return false;
    ++pos_;
    return true;
  }
  void expect(std::string_view text) {
    if (!accept(text)) fail_here("expected '", text, "'");
  }
  std::string expect_name() {
    if (done() || tokens_[pos_].kind != TokenKind::kName) fail_here("expected a name");
    return tokens_[pos_++].text;
  }
  void expect_end() {
    if (!done()) fail_here("unexpected '", tokens_[pos_].text, "'");
  }

  ExprPtr expression() {
    NestingGuard guard(depth_, kMaxNesting, [&] { fail_here("expressions nest too deeply"); });
    ExprPtr value = or_expr();
    if (!accept("if")) return value;
    ExprPtr condition = or_expr();
    ExprPtr otherwise = accept("else") ? expression() : nullptr;
    return make(Expr::Kind::kConditional, "", std::move(value), std::move(condition),
                std::move(otherwise));
  }

  // What {{ ... }} and a set's value read: an expression, or jinja2's
  // tuple without parentheses (`a, b`, `a,`).
  ExprPtr expression_or_tuple() {
    ExprPtr first = expression();
    if (!at(",")) return first;
    return rest_of_tuple(std::move(first), "");
  }

  // An expression without a trailing "if" (a for loop's iterable, where
  // "if" starts the loop filter).
  ExprPtr or_expr() {
    ExprPtr left = and_expr();
    while (accept("or")) left = make(Expr::Kind::kBinary, "or", std::move(left), and_expr());
    return left;
  }

  template <typename... Args>
  [[noreturn]] void fail_here(const Args&... what) const {
    const int line = done() ? line_ : tokens_[pos_].line;
    fail(name_, ":", line, ": ", what...);
  }

 private:
  ExprPtr make(Expr::Kind kind, std::string name, ExprPtr a = nullptr, ExprPtr b = nullptr,
               ExprPtr c = nullptr) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = done() ? line_ : tokens_[pos_].line;
    e->name = std::move(name);
    for (ExprPtr* operand : {&a, &b, &c}) {
      if (*operand || kind == Expr::Kind::kConditional || kind == Expr::Kind::kSlice) {
        e->operands.push_back(std::move(*operand));
      }
    }
    if (kind == Expr::Kind::kConditional) e->operands.resize(3);
    return e;
  }

  // The tuple whose first item was `first`: ", item" up to `end` (")", or
  // "" for the end of the tag), a trailing comma allowed.
  ExprPtr rest_of_tuple(ExprPtr first, std::string_view end) {
    ExprPtr tuple = make(Expr::Kind::kTuple, "", std::move(first));
    while (accept(",")) {
      if (end.empty() ? done() : at(end)) break;
      tuple->operands.push_back(expression());
    }
    return tuple;
  }

  ExprPtr and_expr() {
    ExprPtr left = not_expr();
    while (accept("and")) left = make(Expr::Kind::kBinary, "and", std::move(left), not_expr());
    return left;
  }

  ExprPtr not_expr() {
    NestingGuard guard(depth_, kMaxNesting, [&] { fail_here("expressions nest too deeply"); });
    if (accept("not")) return make(Expr::Kind::kUnary, "not", not_expr());
    return compare();
  }

  // Comparisons chain as in Python (jinja2 compiles them to Python's own
  // chain): `a < b < c` is `a < b and b < c` with b evaluated once. One
  // comparison stays a kBinary.
  ExprPtr compare() {
    ExprPtr first = math1();
    std::vector<std::string> operators;
    std::vector<ExprPtr> operands;
    const int line = done() ? line_ : tokens_[pos_].line;
    while (true) {
      std::string op;
      for (const char* candidate : {"==", "!=", "<=", ">=", "<", ">", "in"}) {
        if (accept(candidate)) {
          op = candidate;
          break;
        }
      }
      if (op.empty() && at("not") && pos_ + 1 < tokens_.size() && tokens_[pos_ + 1].text == "in") {
        pos_ += 2;
        op = "not in";
      }
      if (op.empty()) break;
      operators.push_back(std::move(op));
      operands.push_back(math1());
    }
    if (operators.empty()) return first;
    if (operators.size() == 1) {
      return make(Expr::Kind::kBinary, operators[0], std::move(first), std::move(operands[0]));
    }
    auto chain = std::make_unique<Expr>();
    chain->kind = Expr::Kind::kCompare;
    chain->line = line;
    chain->comparisons = std::move(operators);
    chain->operands.push_back(std::move(first));
    for (ExprPtr& operand : operands) chain->operands.push_back(std::move(operand));
    return chain;
  }

  ExprPtr math1() {
    ExprPtr left = concat();
    while (at("+") || at("-")) {
      std::string op = tokens_[pos_++].text;
      left = make(Expr::Kind::kBinary, op, std::move(left), concat());
    }
    return left;
  }

  ExprPtr concat() {
    ExprPtr left = math2();
    while (accept("~")) left = make(Expr::Kind::kBinary, "~", std::move(left), math2());
    return left;
  }

  ExprPtr math2() {
    ExprPtr left = power();
    while (at("*") || at("/") || at("//") || at("%")) {
      std::string op = tokens_[pos_++].text;
      left = make(Expr::Kind::kBinary, op, std::move(left), power());
    }
    return left;
  }

  ExprPtr power() {
    ExprPtr left = unary();
    while (accept("**")) left = make(Expr::Kind::kBinary, "**", std::move(left), unary());
    return left;
  }

  // Unary minus binds tighter than filters: -3|abs is (-3)|abs, as in jinja2.
  ExprPtr unary(bool with_filters = true) {
    NestingGuard guard(depth_, kMaxNesting, [&] { fail_here("expressions nest too deeply"); });
    ExprPtr value;
    if (at("-") || at("+")) {
      std::string op = tokens_[pos_++].text;
      value = make(Expr::Kind::kUnary, op, unary(false));
    } else {
      value = postfix(primary());
    }
    while (with_filters) {
      if (accept("|")) {
        ExprPtr filter = make(Expr::Kind::kFilter, expect_name(), std::move(value));
        if (accept("(")) arguments(*filter);
        value = postfix(std::move(filter));
      } else if (accept("is")) {
        const bool negated = accept("not");
        ExprPtr test = make(Expr::Kind::kTest, expect_name(), std::move(value));
        test->negated = negated;
        if (accept("(")) {
          arguments(*test);
        } else if (starts_test_argument()) {
          test->operands.push_back(postfix(primary()));
        }
        value = std::move(test);
      } else {
        break;
      }
    }
    return value;
  }

  // "x is divisibleby 3", "x is sameas false": a test's one bare argument.
  bool starts_test_argument() const {
    if (done()) return false;
    const Token& t = tokens_[pos_];
    if (t.kind == TokenKind::kName) return !is_keyword(t.text);
    return t.kind != TokenKind::kOperator;
  }

  ExprPtr postfix(ExprPtr value) {
    while (true) {
      if (accept(".")) {
        if (!done() && tokens_[pos_].kind == TokenKind::kInteger) {
          // jinja2 reads x.0 as x[0] (a decimal integer after the dot).
          ExprPtr index = primary();
          value = make(Expr::Kind::kSubscript, "", std::move(value), std::move(index));
          continue;
        }
        value = make(Expr::Kind::kAttribute, expect_name(), std::move(value));
      } else if (accept("[")) {
        value = subscript(std::move(value));
      } else if (accept("(")) {
        ExprPtr call = make(Expr::Kind::kCall, "", std::move(value));
        arguments(*call);
        value = std::move(call);
      } else {
        return value;
      }
    }
  }

  ExprPtr subscript(ExprPtr value) {
    ExprPtr parts[3];
    int colons = 0;
    while (!at("]")) {
      if (accept(":")) {
        if (++colons > 2) fail_here("a slice has at most two ':'");
        continue;
      }
      if (parts[colons]) fail_here("expected ':' or ']'");
      parts[colons] = expression();
    }
    expect("]");
    if (colons == 0) {
      if (!parts[0]) fail_here("an empty index []");
      return make(Expr::Kind::kSubscript, "", std::move(value), std::move(parts[0]));
    }
    ExprPtr slice = make(Expr::Kind::kSlice, "", std::move(value));
    slice->operands.resize(1);
    for (ExprPtr& part : parts) slice->operands.push_back(std::move(part));
    return slice;
  }

  // Arguments after "(": positional, then name=value; consumes the ")".
  void arguments(Expr& call) {
    while (!accept(")")) {
      // operands[0] is the callee, the filtered or the tested value.
      if (call.operands.size() - 1 + call.keywords.size() > 0) expect(",");
      if (accept(")")) return;
      if (!done() && tokens_[pos_].kind == TokenKind::kName && pos_ + 1 < tokens_.size() &&
          tokens_[pos_ + 1].text == "=" && tokens_[pos_ + 1].kind == TokenKind::kOperator) {
        std::string key = tokens_[pos_].text;
        for (const auto& keyword : call.keywords) {
          if (keyword.first == key) fail_here("keyword argument repeated: ", key);
        }
        pos_ += 2;
        call.keywords.emplace_back(std::move(key), expression());
      } else {
        if (!call.keywords.empty()) fail_here("a positional argument after a keyword argument");
        call.operands.push_back(expression());
      }
    }
  }

  ExprPtr literal(Value value) {
    ExprPtr e = make(Expr::Kind::kLiteral, "");
    e->literal = std::move(value);
    return e;
  }

  ExprPtr primary() {
    if (done()) fail_here("an expression is missing");
    const Token& t = tokens_[pos_++];
    switch (t.kind) {
      case TokenKind::kString: {
        std::string text = t.text;
        // Adjacent literals join, as in Python: 'a' 'b' is 'ab'.
        while (!done() && tokens_[pos_].kind == TokenKind::kString) text += tokens_[pos_++].text;
        return literal(Value(std::move(text)));
      }
      case TokenKind::kInteger: {
        // The lexer's literal as Python reads one (int(text, 0)): '_' groups,
        // 0b/0o/0x prefixes, and no leading zero on a nonzero decimal.
        std::optional<int64_t> value;
        try {
          value = python_int(t.text, 0);
        } catch (const Error&) {
          --pos_;
          fail_here("the integer ", t.text, " is too large");
        }
        if (!value) {
          --pos_;  // jinja2's decimal literals are [1-9](_?\d)* or 0(_?0)*
          fail_here("the integer ", t.text, " has a leading zero");
        }
        return literal(Value(*value));
      }
      case TokenKind::kFloat:
        // Past the doubles' range Python's literal is inf, or 0.0 below it.
        return literal(Value(*python_float(t.text)));
      case TokenKind::kName:
        if (t.text == "true" || t.text == "True") return literal(Value(true));
        if (t.text == "false" || t.text == "False") return literal(Value(false));
        if (t.text == "none" || t.text == "None") return literal(Value(nullptr));
        if (is_keyword(t.text)) {
          --pos_;
          fail_here("unexpected '", t.text, "'");
        }
        return make(Expr::Kind::kName, t.text);
      case TokenKind::kOperator:
        break;
    }
    if (t.text == "(") {
      if (accept(")")) return make(Expr::Kind::kTuple, "");
      ExprPtr first = expression();
      if (accept(")")) return first;
      ExprPtr tuple = rest_of_tuple(std::move(first), ")");
      expect(")");
      return tuple;
    }
    if (t.text == "[") {
      ExprPtr list = make(Expr::Kind::kList, "");
      while (!accept("]")) {
        if (!list->operands.empty()) expect(",");
        if (accept("]")) break;
        list->operands.push_back(expression());
      }
      return list;
    }
    if (t.text == "{") {
      ExprPtr dict = make(Expr::Kind::kDict, "");
      while (!accept("}")) {
        if (!dict->operands.empty()) expect(",");
        if (accept("}")) break;
        dict->operands.push_back(expression());
        expect(":");
        dict->operands.push_back(expression());
      }
      return dict;
    }
    --pos_;
    fail_here("unexpected '", t.text, "'");
  }

  const std::vector<Token>& tokens_;
  size_t pos_;
  const std::string& name_;
  int line_;
  int depth_ = 0;
};

// Parses the statement structure of the pieces.
class StatementParser {
 public:
  StatementParser(const std::vector<Piece>& pieces, const std::string& name)
      : pieces_(pieces), name_(name) {}

  Body parse_all() {
    Body body = parse_until({});
    if (pos_ < pieces_.size())
      fail_at(pieces_[pos_], "unexpected {% ", tag_name(pieces_[pos_]), " %}");
    return body;
  }

 private:
  static std::string tag_name(const Piece& piece) { return piece.tokens.front().text; }

  template <typename... Args>
  [[noreturn]] void fail_at(const Piece& piece, const Args&... what) const {
    fail(name_, ":", piece.line, ": ", what...);
  }

  // Statements up to (not past) a tag named in `ends`.
  Body parse_until(std::initializer_list<std::string_view> ends) {
    NestingGuard guard(depth_, kMaxNesting,
                       [&] { fail_at(pieces_[pos_ - 1], "tags nest too deeply"); });
    Body body;
    while (pos_ < pieces_.size()) {
      const Piece& piece = pieces_[pos_];
      if (piece.kind == PieceKind::kText) {
        body.push_back(Node{Node::Kind::kText, piece.line, piece.text});
        ++pos_;
        continue;
      }
      if (piece.kind == PieceKind::kOutput) {
        ExprParser p(piece.tokens, 0, name_, piece.line);
        Node node{Node::Kind::kOutput, piece.line};
        node.value = p.expression_or_tuple();
        p.expect_end();
        body.push_back(std::move(node));
        ++pos_;
        continue;
      }
      const std::string tag = tag_name(piece);
      if (std::find(ends.begin(), ends.end(), tag) != ends.end()) return body;
      ++pos_;
      if (tag == "if") {
        body.push_back(parse_if(piece));
      } else if (tag == "for") {
        body.push_back(parse_for(piece));
      } else if (tag == "set") {
        body.push_back(parse_set(piece));
      } else if (tag == "macro") {
        body.push_back(parse_macro(piece));
      } else if (tag == "break" || tag == "continue") {
        // jinja2's loopcontrols know the tags only in a for loop's body.
        if (loop_body_depth_ == 0) fail_at(piece, "{% ", tag, " %} outside a for loop's body");
        ExprParser p(piece.tokens, 1, name_, piece.line);
        p.expect_end();
        body.push_back(
            Node{tag == "break" ? Node::Kind::kBreak : Node::Kind::kContinue, piece.line});
      } else if (tag == "generation") {
        Body inner = parse_until({"endgeneration"});
        expect_end_tag(piece, "endgeneration");
        for (Node& node : inner) body.push_back(std::move(node));
      } else {
        fail_at(piece, "unsupported tag {% ", tag,
                " %} (the chat-template renderer knows if, for, set, macro, break, continue "
                "and generation)");
      }
    }
    return body;
  }

  void expect_end_tag(const Piece& opener, std::string_view end) {
    if (pos_ >= pieces_.size())
      fail_at(opener, "{% ", tag_name(opener), " %} is never closed by {% ", end, " %}");
    ExprParser p(pieces_[pos_].tokens, 1, name_, pieces_[pos_].line);
    p.expect_end();
    ++pos_;
  }

  Node parse_if(const Piece& opener) {
    Node node{Node::Kind::kIf, opener.line};
    const Piece* branch = &opener;
    while (true) {
      ExprParser p(branch->tokens, 1, name_, branch->line);
      ExprPtr condition = tag_name(*branch) == "else" ? nullptr : p.expression();
      p.expect_end();
      Body body = parse_until({"elif", "else", "endif"});
      node.branches.emplace_back(std::move(condition), std::move(body));
      if (pos_ >= pieces_.size()) fail_at(opener, "{% if %} is never closed by {% endif %}");
      const std::string tag = tag_name(pieces_[pos_]);
      if (tag == "endif") break;
      if (tag_name(*branch) == "else") fail_at(pieces_[pos_], "{% ", tag, " %} after {% else %}");
      branch = &pieces_[pos_++];
    }
    expect_end_tag(opener, "endif");
    return node;
  }

  Node parse_for(const Piece& opener) {
    Node node{Node::Kind::kFor, opener.line};
    ExprParser p(opener.tokens, 1, name_, opener.line);
    node.targets.push_back(p.expect_name());
    while (p.accept(",")) node.targets.push_back(p.expect_name());
    refuse_loop_target(opener, node.targets, true);
    p.expect("in");
    node.value = p.or_expr();
    if (p.accept("if")) node.filter = p.expression();
    if (p.accept("recursive")) p.fail_here("recursive loops are not supported");
    p.expect_end();
    ++for_depth_;
    ++loop_body_depth_;
    node.body = parse_until({"else", "endfor"});
    --loop_body_depth_;
    if (pos_ < pieces_.size() && tag_name(pieces_[pos_]) == "else") {
      ++pos_;
      node.else_body = parse_until({"endfor"});
    }
    --for_depth_;
    if (pos_ >= pieces_.size()) fail_at(opener, "{% for %} is never closed by {% endfor %}");
    expect_end_tag(opener, "endfor");
    return node;
  }

  Node parse_set(const Piece& opener) {
    Node node{Node::Kind::kSet, opener.line};
    ExprParser p(opener.tokens, 1, name_, opener.line);
    node.targets.push_back(p.expect_name());
    if (p.accept(".")) {
      node.attribute = p.expect_name();
    } else {
      while (p.accept(",")) node.targets.push_back(p.expect_name());
      refuse_loop_target(opener, node.targets, for_depth_ > 0);
    }
    if (p.done() && node.attribute.empty() && node.targets.size() == 1) {
      node.kind = Node::Kind::kSetBlock;
      node.body = parse_until({"endset"});
      if (pos_ >= pieces_.size()) fail_at(opener, "{% set %} is never closed by {% endset %}");
      expect_end_tag(opener, "endset");
      return node;
    }
    p.expect("=");
    node.value = p.expression_or_tuple();
    p.expect_end();
    return node;
  }

  // {% macro name(parameter, parameter=default, ...) %}body{% endmacro %}
  Node parse_macro(const Piece& opener) {
    Node node{Node::Kind::kMacro, opener.line};
    ExprParser p(opener.tokens, 1, name_, opener.line);
    node.text = assignable_name(p);
    p.expect("(");
    while (!p.accept(")")) {
      if (!node.targets.empty()) p.expect(",");
      std::string parameter = assignable_name(p);
      if (std::find(node.targets.begin(), node.targets.end(), parameter) != node.targets.end())
        p.fail_here("the macro has two parameters named '", parameter, "'");
      node.targets.push_back(std::move(parameter));
      if (p.accept("=")) {
        node.defaults.push_back(p.expression());
      } else if (!node.defaults.empty()) {
        p.fail_here("a parameter without a default after one with a default");
      }
    }
    p.expect_end();
    // break and continue in the body would leave the macro, not a loop
    // around it: jinja2 does not know them there.
    const int loop_bodies_outside = std::exchange(loop_body_depth_, 0);
    node.body = parse_until({"endmacro"});
    loop_body_depth_ = loop_bodies_outside;
    if (pos_ >= pieces_.size()) fail_at(opener, "{% macro %} is never closed by {% endmacro %}");
    expect_end_tag(opener, "endmacro");
    const std::set<std::string> reads =
        read_before_bound(node.body, {"varargs", "kwargs", "caller"});
    if (reads.count("caller"))
      fail_at(opener, "macro '", node.text,
              "' reads 'caller', which only {% call %} gives; {% call %} is not supported");
    // A parameter named varargs or kwargs is an ordinary one.
    auto takes = [&](const char* name) {
      return reads.count(name) &&
             std::find(node.targets.begin(), node.targets.end(), name) == node.targets.end();
    };
    node.takes_varargs = takes("varargs");
    node.takes_kwargs = takes("kwargs");
    return node;
  }

  // A name a macro or its parameter may take: jinja2 cannot assign to its
  // constants.
  static std::string assignable_name(ExprParser& p) {
    std::string name = p.expect_name();
    for (const char* constant : {"true", "false", "none", "True", "False", "None"}) {
      if (name == constant) p.fail_here("cannot assign to '", name, "'");
    }
    return name;
  }

  // jinja2 refuses to bind the name `loop` anywhere in a for loop: as its
  // target, and by `set` in its body or its else.
  void refuse_loop_target(const Piece& piece, const std::vector<std::string>& targets,
                          bool inside_loop) const {
    if (inside_loop && std::find(targets.begin(), targets.end(), "loop") != targets.end())
      fail_at(piece, "cannot assign to the special variable 'loop' inside a for loop");
  }

  const std::vector<Piece>& pieces_;
  const std::string& name_;
  size_t pos_ = 0;
  int depth_ = 0;
  int for_depth_ = 0;        // how many for loops (body or else) enclose the statement
  int loop_body_depth_ = 0;  // how many for bodies: where break and continue may stand
};

}  // namespace

Body parse(const std::vector<Piece>& pieces, const std::string& source_name) {
  Body body = StatementParser(pieces, source_name).parse_all();
  walk(
      body, [](const std::string&) {}, [](Expr& e) { note_calls(e); });
  return body;
}

}  // namespace lt::data::jinja
