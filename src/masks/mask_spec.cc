// Recursive-descent parser for the mask SPEC language:
//   expr   := term ('|' term)*
//   term   := factor ('&' factor)*
//   factor := '(' expr ')' | atom
//   atom   := name [':' key '=' value (',' key '=' value)*]
// Parentheses are accepted so that every OR/AND tree Mask::to_string prints
// (an OR inside an AND) parses back.
#include "tilesplash/mask_spec.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "masks/spec_params.h"

namespace tilesplash {
namespace {

constexpr int kMaxDepth = 64;

[[noreturn]] void fail(const std::string& message) { detail::spec_fail(message); }

[[noreturn]] void fail_unknown_mask(const std::string& name) {
  const std::vector<std::string_view> names = mask_spec_names();
  std::string expected;
  for (std::size_t i = 0; i < names.size(); ++i) {
    expected += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + std::string(names[i]);
  }
  fail("unknown mask '" + name + "' (expected " + expected + ")");
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Mask parse() {
    skip_space();
    if (at_end()) fail("empty specification (expected e.g. 'causal' or 'local:left=64,right=64')");
    Mask mask = parse_or();
    skip_space();
    if (!at_end()) unexpected("'|', '&' or the end");
    return mask;
  }

 private:
  Mask parse_or() {
    Mask mask = parse_and();
    for (skip_space(); peek() == '|'; skip_space()) {
      ++pos_;
      mask = mask | parse_and();
    }
    return mask;
  }

  Mask parse_and() {
    Mask mask = parse_factor();
    for (skip_space(); peek() == '&'; skip_space()) {
      ++pos_;
      mask = mask & parse_factor();
    }
    return mask;
  }

  Mask parse_factor() {
    skip_space();
    const char c = peek();
    if (at_end() || c == '|' || c == '&' || c == ')') {
      fail("empty term at position " + std::to_string(pos_) + " in '" + std::string(text_) +
           "' (expected a mask name)");
    }
    if (c != '(') return parse_atom();
    if (++depth_ > kMaxDepth) fail("parentheses nested deeper than " + std::to_string(kMaxDepth));
    const std::size_t open = pos_++;
    Mask mask = parse_or();
    skip_space();
    if (peek() != ')') {
      fail("unbalanced '(' at position " + std::to_string(open) + " in '" + std::string(text_) +
           "'");
    }
    ++pos_;
    --depth_;
    return mask;
  }

  Mask parse_atom() {
    const std::string name = read_word();
    if (name.empty()) unexpected("a mask name");
    const detail::MaskFamily* family = detail::find_mask_family(name);
    if (family == nullptr) fail_unknown_mask(name);
    if (family->from_text != nullptr) return parse_text_atom(*family, name);
    skip_space();
    std::vector<detail::Param> params;
    if (peek() == ':') {
      ++pos_;
      for (;;) {
        params.push_back(read_param(name, params));
        skip_space();
        if (peek() != ',') break;
        ++pos_;
      }
    }
    return family->from_params(detail::Params(name, std::move(params)));
  }

  // Families with bare flags (sink, text_full) parse their whole parameter
  // text themselves; it runs to the next | & ( or ).
  Mask parse_text_atom(const detail::MaskFamily& family, const std::string& name) {
    skip_space();
    if (peek() != ':') return family.from_text(name, std::nullopt);
    const std::size_t start = ++pos_;
    while (!at_end() && std::string_view("|&()").find(text_[pos_]) == std::string_view::npos)
      ++pos_;
    return family.from_text(name, text_.substr(start, pos_ - start));
  }

  detail::Param read_param(const std::string& mask, const std::vector<detail::Param>& seen) {
    skip_space();
    detail::Param param;
    param.key = read_word();
    if (param.key.empty()) {
      fail(mask + ": expected key=value at position " + std::to_string(pos_) + " in '" +
           std::string(text_) + "'");
    }
    skip_space();
    if (peek() != '=') fail(mask + ": expected '=' after '" + param.key + "'");
    ++pos_;
    skip_space();
    const std::size_t start = pos_;
    while (!at_end() && !is_delimiter(text_[pos_])) ++pos_;
    param.value = std::string(text_.substr(start, pos_ - start));
    for (const detail::Param& p : seen) {
      if (p.key == param.key) fail(mask + ": duplicate key '" + param.key + "'");
    }
    return param;
  }

  // Bytes >= 0x80 count as word characters: no name has them, so a word
  // like "causäl" is reported whole as unknown instead of cut before the 'ä'.
  std::string read_word() {
    const std::size_t start = pos_;
    while (!at_end() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) ||
                         text_[pos_] == '_' || static_cast<unsigned char>(text_[pos_]) >= 0x80)) {
      ++pos_;
    }
    return std::string(text_.substr(start, pos_ - start));
  }

  [[noreturn]] void unexpected(const char* expected) const {
    // The whole UTF-8 character, not its first byte.
    std::size_t end = pos_ + 1;
    while (end < text_.size() && (static_cast<unsigned char>(text_[end]) & 0xc0) == 0x80) ++end;
    fail("unexpected '" + std::string(text_.substr(pos_, end - pos_)) + "' at position " +
         std::to_string(pos_) + " in '" + std::string(text_) + "' (expected " + expected + ")");
  }

  static bool is_delimiter(char c) {
    return c == ',' || c == '|' || c == '&' || c == '(' || c == ')' ||
           std::isspace(static_cast<unsigned char>(c));
  }

  void skip_space() {
    while (!at_end() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  std::string_view text_;
  std::size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

Mask parse_mask_spec(std::string_view spec) { return Parser(spec).parse(); }

}  // namespace tilesplash
