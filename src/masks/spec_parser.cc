// Recursive-descent parser for the mask SPEC grammar (spec_parser.h).
// Parentheses are accepted so that every OR/AND tree Mask::to_string prints
// (an OR inside an AND) parses back.
#include "masks/spec_parser.h"

#include <cctype>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tilesplash::detail {
namespace {

[[noreturn]] void fail(const std::string& message) {
  throw std::invalid_argument("mask spec: " + message);
}

class Parser {
 public:
  Parser(std::string_view text, std::span<const SpecFamily> families)
      : text_(text), families_(families) {}

  Mask parse() {
    skip_space();
    if (at_end()) fail("empty specification (expected e.g. 'causal' or 'local:left=64,right=64')");
    Mask mask = parse_or();
    skip_space();
    if (!at_end()) unexpected("'|', '&' or the end");
    return mask;
  }

 private:
  // The operands of a chain are collected and combined once: folding them
  // one by one (a | b, then | c, ...) copies the growing child list at every
  // step, O(n^2) in the number of terms.
  Mask parse_or() {
    std::vector<Mask> terms{parse_and()};
    for (skip_space(); peek() == '|'; skip_space()) {
      ++pos_;
      terms.push_back(parse_and());
    }
    return Mask::any_of(terms);
  }

  Mask parse_and() {
    std::vector<Mask> factors{parse_factor()};
    for (skip_space(); peek() == '&'; skip_space()) {
      ++pos_;
      factors.push_back(parse_factor());
    }
    return Mask::all_of(factors);
  }

  Mask parse_factor() {
    skip_space();
    const char c = peek();
    if (at_end() || c == '|' || c == '&' || c == ')') {
      fail("empty term at position " + std::to_string(pos_) + " in '" + std::string(text_) +
           "' (expected a mask name)");
    }
    if (c != '(') return parse_atom();
    if (++depth_ > kMaxMaskNesting) {
      fail("parentheses nested deeper than " + std::to_string(kMaxMaskNesting));
    }
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

  // The parameter text runs to the next | & ( or ); the family reads it.
  Mask parse_atom() {
    // Counted here, so an absurd SPEC is refused after kMaxMaskTerms terms,
    // not after all of them are built.
    if (++terms_ > kMaxMaskTerms) {
      fail("more than " + std::to_string(kMaxMaskTerms) + " terms (at position " +
           std::to_string(pos_) + " of " + std::to_string(text_.size()) + " characters)");
    }
    const std::string name = read_word();
    if (name.empty()) unexpected("a mask name");
    const SpecFamily* family = find(name);
    const std::string context = "mask spec: " + name;
    skip_space();
    if (peek() != ':') {
      SpecParams none(context);
      return family->parse(none);
    }
    const std::size_t start = ++pos_;
    while (!at_end() && std::string_view("|&()").find(text_[pos_]) == std::string_view::npos) {
      ++pos_;
    }
    SpecParams params = SpecParams::split(text_.substr(start, pos_ - start), context);
    return family->parse(params);
  }

  const SpecFamily* find(const std::string& name) const {
    for (const SpecFamily& family : families_) {
      if (family.name == name) return &family;
    }
    std::string expected;
    for (std::size_t i = 0; i < families_.size(); ++i) {
      expected += (i == 0                      ? ""
                   : i + 1 == families_.size() ? " or "
                                               : ", ") +
                  std::string(families_[i].name);
    }
    fail("unknown mask '" + name + "' (expected " + expected + ")");
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

  void skip_space() {
    while (!at_end() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  std::string_view text_;
  std::span<const SpecFamily> families_;
  std::size_t pos_ = 0;
  int depth_ = 0;
  std::int64_t terms_ = 0;
};

}  // namespace

Mask parse_spec(std::string_view text, std::span<const SpecFamily> families) {
  return Parser(text, families).parse();
}

}  // namespace tilesplash::detail
