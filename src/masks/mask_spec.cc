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

#include "video/video_spec.h"

namespace tilesplash {
namespace {

constexpr int kMaxDepth = 64;

[[noreturn]] void fail(const std::string& message) {
  throw std::invalid_argument("mask spec: " + message);
}

struct Param {
  std::string key;
  std::string value;
  bool used = false;
};

// The parameters of one atom, checked against what its mask accepts.
class Params {
 public:
  Params(std::string mask, std::vector<Param> params)
      : mask_(std::move(mask)), params_(std::move(params)) {}

  // Every key must be one of `allowed` ("left, right or offset" names them).
  void check_keys(std::initializer_list<const char*> allowed, const char* expected) const {
    for (const Param& p : params_) {
      bool known = false;
      for (const char* key : allowed) known |= p.key == key;
      if (!known) fail(mask_ + ": unknown key '" + p.key + "' (expected " + expected + ")");
    }
  }

  const Param* find(const char* key) const {
    for (const Param& p : params_) {
      if (p.key == key) return &p;
    }
    return nullptr;
  }

  const Param& require(const char* key, const char* what) const {
    const Param* p = find(key);
    if (!p) fail(mask_ + ": missing '" + key + "' (" + what + ")");
    return *p;
  }

  std::int64_t integer(const Param& p, std::int64_t min, const char* expected) const {
    std::int64_t value = 0;
    const char* begin = p.value.data();
    const char* end = begin + p.value.size();
    const auto [ptr, ec] = std::from_chars(begin, end, value);
    if (p.value.empty() || ec != std::errc() || ptr != end || value < min) {
      fail(mask_ + ": '" + p.key + "' must be " + expected + ", got '" + p.value + "'");
    }
    return value;
  }

  std::uint64_t unsigned_integer(const Param& p) const {
    std::uint64_t value = 0;
    const char* begin = p.value.data();
    const char* end = begin + p.value.size();
    const auto [ptr, ec] = std::from_chars(begin, end, value);
    if (p.value.empty() || ec != std::errc() || ptr != end) {
      fail(mask_ + ": '" + p.key + "' must be an integer in [0, 2^64), got '" + p.value + "'");
    }
    return value;
  }

  double probability(const Param& p) const {
    double value = 0.0;
    const char* begin = p.value.data();
    const char* end = begin + p.value.size();
    const auto [ptr, ec] = std::from_chars(begin, end, value);
    if (p.value.empty() || ec != std::errc() || ptr != end || !(value >= 0.0 && value <= 1.0)) {
      fail(mask_ + ": '" + p.key + "' must be a number in [0, 1], got '" + p.value + "'");
    }
    return value;
  }

 private:
  std::string mask_;
  std::vector<Param> params_;
};

[[noreturn]] void fail_unknown_mask(const std::string& name) {
  fail("unknown mask '" + name +
       "' (expected dense, causal, local, chunked, random, spatial or temporal)");
}

bool is_known_mask(const std::string& name) {
  return name == "dense" || name == "causal" || name == "local" || name == "chunked" ||
         name == "random";
}

Mask make_mask(const std::string& name, const Params& params) {
  if (name == "dense") {
    params.check_keys({}, "no parameters");
    return Mask::dense();
  }
  if (name == "causal") {
    params.check_keys({"offset"}, "offset");
    const Param* offset = params.find("offset");
    return Mask::causal(offset ? params.integer(*offset, INT64_MIN, "an integer") : 0);
  }
  if (name == "local") {
    params.check_keys({"left", "right", "offset"}, "left, right or offset");
    std::optional<std::int64_t> left;
    std::optional<std::int64_t> right;
    std::int64_t offset = 0;
    if (const Param* p = params.find("left")) left = params.integer(*p, 0, "an integer >= 0");
    if (const Param* p = params.find("right")) right = params.integer(*p, 0, "an integer >= 0");
    if (const Param* p = params.find("offset"))
      offset = params.integer(*p, INT64_MIN, "an integer");
    return Mask::local(left, right, offset);
  }
  if (name == "chunked") {
    params.check_keys({"size"}, "size");
    const Param& size = params.require("size", "the chunk length, an integer >= 1");
    return Mask::chunked_causal(params.integer(size, 1, "an integer >= 1"));
  }
  if (name == "random") {
    params.check_keys({"density", "seed"}, "density or seed");
    const Param& density = params.require("density", "a number in [0, 1]");
    const Param* seed = params.find("seed");
    return Mask::random(params.probability(density), seed ? params.unsigned_integer(*seed) : 0);
  }
  fail_unknown_mask(name);
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
    if (detail::is_video_mask_name(name)) return parse_video_atom(name);
    if (!is_known_mask(name)) fail_unknown_mask(name);
    skip_space();
    std::vector<Param> params;
    if (peek() == ':') {
      ++pos_;
      for (;;) {
        params.push_back(read_param(name, params));
        skip_space();
        if (peek() != ',') break;
        ++pos_;
      }
    }
    return make_mask(name, Params(name, std::move(params)));
  }

  // spatial / temporal take bare flags (sink, text_full), so the video module
  // parses their whole parameter text, which runs to the next | & ( or ).
  Mask parse_video_atom(const std::string& name) {
    skip_space();
    if (peek() != ':') {
      fail(name + ": expected ':' and parameters, e.g. '" + name +
           ":preset=wan2.1-1.3b-480p,density=0.25'");
    }
    const std::size_t start = ++pos_;
    while (!at_end() && std::string_view("|&()").find(text_[pos_]) == std::string_view::npos)
      ++pos_;
    return detail::parse_video_mask(name, text_.substr(start, pos_ - start));
  }

  Param read_param(const std::string& mask, const std::vector<Param>& seen) {
    skip_space();
    Param param;
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
    for (const Param& p : seen) {
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
