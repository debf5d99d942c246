// Recursive-descent parser for the Python dict literal in .npy headers. Only
// literal syntax is accepted (no expressions, escapes or names other than
// True, False and None), which is all NumPy's writer ever produces.
#include "io/npy_header.h"

#include <cstdio>
#include <limits>

#include "io/io_common.h"

namespace tilesplash::io {
namespace {

constexpr int kMaxDepth = 8;          // a header needs 2 (dict, shape tuple)
constexpr std::size_t kMaxRank = 32;  // NumPy 1.x's NPY_MAXDIMS

struct Value {
  enum class Kind { kString, kBool, kNone, kInt, kTuple, kList, kDict } kind = Kind::kNone;
  std::string text;  // string contents, or an integer's digits as written
  bool flag = false;
  std::int64_t number = 0;
  bool overflow = false;  // integer literal outside int64
  std::vector<Value> items;
};

const char* kind_name(Value::Kind kind) {
  switch (kind) {
    case Value::Kind::kString:
      return "a string";
    case Value::Kind::kBool:
      return "a bool";
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kInt:
      return "an integer";
    case Value::Kind::kTuple:
      return "a tuple";
    case Value::Kind::kList:
      return "a list";
    case Value::Kind::kDict:
      return "a dict";
  }
  return "?";
}

// A byte as it should appear in a one-line message.
std::string show(char c) {
  if (c >= 0x20 && c < 0x7f) return std::string("'") + c + "'";
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, "\\x%02x", static_cast<unsigned char>(c));
  return buffer;
}

class Parser {
 public:
  Parser(std::string_view text, std::string_view file) : text_(text), file_(file) {}

  Value parse_document() {
    skip_space();
    if (at_end() || peek() != '{') error("not a dict (expected '{')");
    Value dict = parse_value(0);
    skip_space();
    if (!at_end()) error("unexpected " + show(peek()) + " after the header dict");
    return dict;
  }

  [[noreturn]] void error(const std::string& problem) const {
    fail(file_, "bad header: " + problem + " at header offset " + std::to_string(pos_));
  }

 private:
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }
  // NumPy pads with spaces and ends with '\n'; hand-written headers may have tabs.
  void skip_space() {
    while (!at_end() && (peek() == ' ' || peek() == '\n' || peek() == '\t' || peek() == '\r')) {
      ++pos_;
    }
  }
  void expect(char c) {
    skip_space();
    if (at_end()) error(std::string("ends where '") + c + "' was expected");
    if (peek() != c) error("expected '" + std::string(1, c) + "', found " + show(peek()));
    ++pos_;
  }
  bool consume_word(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Value parse_value(int depth) {
    if (depth > kMaxDepth) error("nesting deeper than " + std::to_string(kMaxDepth));
    skip_space();
    if (at_end()) error("ends where a value was expected");
    const char c = peek();
    if (c == '\'' || c == '"') return parse_string();
    if (c == '-' || c == '+' || (c >= '0' && c <= '9')) return parse_int();
    if (c == '(') return parse_sequence(depth, ')', Value::Kind::kTuple);
    if (c == '[') return parse_sequence(depth, ']', Value::Kind::kList);
    if (c == '{') return parse_dict(depth);
    Value value;
    if (consume_word("True")) {
      value.kind = Value::Kind::kBool;
      value.flag = true;
    } else if (consume_word("False")) {
      value.kind = Value::Kind::kBool;
    } else if (!consume_word("None")) {
      error("unexpected " + show(c));
    }
    return value;
  }

  Value parse_string() {
    const char quote = peek();
    ++pos_;
    Value value;
    value.kind = Value::Kind::kString;
    while (true) {
      if (at_end()) error("ends inside a string (is the header length field too small?)");
      const char c = peek();
      ++pos_;
      if (c == quote) break;
      if (c == '\\') error("escape sequences are not supported in strings");
      if (c == '\n') error("unterminated string");
      value.text += c;
    }
    return value;
  }

  Value parse_int() {
    Value value;
    value.kind = Value::Kind::kInt;
    const std::size_t start = pos_;
    const bool negative = peek() == '-';
    if (peek() == '-' || peek() == '+') ++pos_;
    if (at_end() || peek() < '0' || peek() > '9') error("expected digits after the sign");
    // Accumulate as a negative number so that INT64_MIN parses without overflow.
    std::int64_t magnitude = 0;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      const int digit = peek() - '0';
      ++pos_;
      if (magnitude < (std::numeric_limits<std::int64_t>::min() + digit) / 10) {
        value.overflow = true;
      } else {
        magnitude = magnitude * 10 - digit;
      }
    }
    value.text = std::string(text_.substr(start, pos_ - start));
    if (!at_end() && peek() == 'L') ++pos_;  // Python 2 long, from very old writers
    if (negative) {
      value.number = magnitude;
    } else if (magnitude == std::numeric_limits<std::int64_t>::min()) {
      value.overflow = true;
    } else {
      value.number = -magnitude;
    }
    return value;
  }

  Value parse_sequence(int depth, char close, Value::Kind kind) {
    ++pos_;
    Value value;
    value.kind = kind;
    bool comma = false;
    while (true) {
      skip_space();
      if (!at_end() && peek() == close) {
        ++pos_;
        break;
      }
      value.items.push_back(parse_value(depth + 1));
      skip_space();
      if (!at_end() && peek() == ',') {
        ++pos_;
        comma = true;
        continue;
      }
      expect(close);
      break;
    }
    // In Python "(3)" is the integer 3; only "(3,)" is a one-element tuple.
    if (kind == Value::Kind::kTuple && value.items.size() == 1 && !comma) {
      return std::move(value.items.front());
    }
    return value;
  }

  Value parse_dict(int depth) {
    ++pos_;
    Value dict;
    dict.kind = Value::Kind::kDict;
    while (true) {
      skip_space();
      if (at_end()) error("ends inside the dict (is the header length field too small?)");
      if (peek() == '}') {
        ++pos_;
        break;
      }
      if (peek() != '\'' && peek() != '"')
        error("dict key must be a string, found " + show(peek()));
      Value key = parse_string();
      for (std::size_t i = 0; i < dict.items.size(); i += 2) {
        if (dict.items[i].text == key.text) error("duplicate key '" + key.text + "'");
      }
      expect(':');
      Value item = parse_value(depth + 1);
      dict.items.push_back(std::move(key));
      dict.items.push_back(std::move(item));
      skip_space();
      if (at_end()) error("ends inside the dict (is the header length field too small?)");
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect('}');
      break;
    }
    return dict;
  }

  std::string_view text_;
  std::string_view file_;
  std::size_t pos_ = 0;
};

}  // namespace

NpyHeader parse_npy_header(std::string_view text, std::string_view file) {
  Parser parser(text, file);
  const Value dict = parser.parse_document();
  const Value* descr = nullptr;
  const Value* fortran = nullptr;
  const Value* shape = nullptr;
  for (std::size_t i = 0; i < dict.items.size(); i += 2) {
    const std::string& key = dict.items[i].text;
    const Value* item = &dict.items[i + 1];
    if (key == "descr") {
      descr = item;
    } else if (key == "fortran_order") {
      fortran = item;
    } else if (key == "shape") {
      shape = item;
    } else {
      fail(file, "bad header: unknown key '" + key + "' (expected descr, fortran_order, shape)");
    }
  }
  if (descr == nullptr) fail(file, "bad header: missing key 'descr'");
  if (fortran == nullptr) fail(file, "bad header: missing key 'fortran_order'");
  if (shape == nullptr) fail(file, "bad header: missing key 'shape'");

  NpyHeader header;
  if (descr->kind != Value::Kind::kString) {
    fail(file, std::string("unsupported dtype: descr is ") + kind_name(descr->kind) +
                   " (structured dtypes are not supported; expected a string such as '<f4')");
  }
  header.descr = descr->text;
  if (fortran->kind != Value::Kind::kBool) {
    fail(file, std::string("bad header: fortran_order must be True or False, got ") +
                   kind_name(fortran->kind));
  }
  header.fortran_order = fortran->flag;
  if (shape->kind != Value::Kind::kTuple) {
    fail(file, std::string("bad header: shape must be a tuple, got ") + kind_name(shape->kind));
  }
  if (shape->items.size() > kMaxRank) {
    fail(file, "shape has " + std::to_string(shape->items.size()) + " dimensions, at most " +
                   std::to_string(kMaxRank) + " are supported");
  }
  for (const Value& extent : shape->items) {
    if (extent.kind != Value::Kind::kInt) {
      fail(file, std::string("bad header: shape entries must be integers, got ") +
                     kind_name(extent.kind));
    }
    if (extent.overflow) fail(file, "shape entry " + extent.text + " does not fit in 64 bits");
    if (extent.number < 0) fail(file, "shape entry " + extent.text + " is negative");
    header.shape.push_back(extent.number);
  }
  return header;
}

}  // namespace tilesplash::io
