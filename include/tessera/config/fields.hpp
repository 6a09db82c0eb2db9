#pragma once
// defines: the generic key=value config machinery. Any aggregate T plus a config_fields<T>
// table of names and meanings gets: setting a field from text, formatting it back, a printed
// table, --help text and command-line parsing. Boost.PFR (1.81) gives field access by index
// but no field names, hence the parallel table, checked against the struct at compile time.
#include <algorithm>
#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <boost/pfr/core.hpp>
#include <boost/pfr/tuple_size.hpp>

#include "tessera/core/error.hpp"

namespace tessera {

struct FieldDoc {
  std::string_view name;
  std::string_view meaning;
};

// An enum field type E is spelled by config_enum<E>, specialized next to E:
//   static constexpr std::array<std::pair<E, std::string_view>, N> values = {{{E::a, "a"}, ...}};
// so that its legal values are parsed once, at the command line, and named in the error.
template <class E>
struct config_enum;

// Specialize per config struct with, in the struct's field order:
//   static constexpr std::string_view title = "...";        // first line of the table
//   static constexpr std::array<FieldDoc, N> docs = {...};  // one entry per field
template <class T>
struct config_fields;

namespace detail {

template <class>
inline constexpr bool kUnsupportedField = false;

template <class F>
concept ConfigEnum = std::is_enum_v<F> && requires { config_enum<F>::values; };

template <class F>
struct is_optional : std::false_type {};
template <class U>
struct is_optional<std::optional<U>> : std::true_type {};

template <std::size_t N>
constexpr bool names_are_keys(const std::array<FieldDoc, N>& docs) {
  for (std::size_t i = 0; i < N; ++i) {
    if (docs[i].name.empty() || docs[i].name.find('=') != std::string_view::npos) return false;
    for (std::size_t j = 0; j < i; ++j) {
      if (docs[i].name == docs[j].name) return false;
    }
  }
  return true;
}

// Every entry point goes through here, so a table that drifts from its struct fails to compile.
template <class T>
constexpr const auto& docs_of() {
  constexpr const auto& docs = config_fields<T>::docs;
  static_assert(docs.size() == boost::pfr::tuple_size_v<T>,
                "config_fields<T>::docs needs exactly one entry per field of T, in field order");
  static_assert(names_are_keys(docs), "config field names must be unique, non-empty, without '='");
  return docs;
}

// Calls fn(field) on field number `index`; PFR only indexes at compile time, so test each.
template <class T, class Fn>
void visit_field(T& cfg, std::size_t index, Fn&& fn) {
  if (index >= boost::pfr::tuple_size_v<std::remove_const_t<T>>) {
    throw std::out_of_range("config field index " + std::to_string(index) + " out of range");
  }
  boost::pfr::for_each_field(cfg, [&](auto& field, auto i) {
    if (i == index) fn(field);
  });
}

// Typos are usually a swapped, dropped or doubled letter, or '-' for '_' and wrong case.
inline std::size_t key_distance(std::string_view a, std::string_view b) {
  const auto norm = [](char c) {
    return c == '-' ? '_' : (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  };
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      const std::size_t substitute = diagonal + (norm(a[i - 1]) == norm(b[j - 1]) ? 0 : 1);
      row[j] = std::min({above + 1, row[j - 1] + 1, substitute});
      diagonal = above;
    }
  }
  return row[b.size()];
}

[[noreturn]] inline void throw_bad_value(std::string_view key, std::string_view value,
                                         std::string_view what) {
  throw ConfigError(std::string(key) + "=" + std::string(value) + ": " + std::string(what));
}

// Whole-string number parse; from_chars rejects leading spaces and '+', and we reject trailing text.
template <class N>
N parse_number(std::string_view key, std::string_view value, std::string_view expected) {
  N out{};
  const char* end = value.data() + value.size();
  const auto [ptr, ec] = std::from_chars(value.data(), end, out);
  if (ec == std::errc::result_out_of_range) {
    throw_bad_value(key, value, std::is_integral_v<N> ? "out of range for a 64-bit integer"
                                                      : "out of range for a double");
  }
  if (ec != std::errc{} || ptr != end) throw_bad_value(key, value, expected);
  return out;
}

// `or_none` extends the message when the field is optional and "none" would also be accepted.
template <class F>
F parse_value(std::string_view key, std::string_view value, std::string_view or_none = "") {
  if constexpr (std::is_same_v<F, std::string>) {
    return std::string(value);
  } else if constexpr (std::is_same_v<F, bool>) {
    if (value == "true" || value == "1") return true;
    if (value == "false" || value == "0") return false;
    throw_bad_value(key, value, "expected true, false, 1 or 0");
  } else if constexpr (std::is_same_v<F, std::int64_t>) {
    return parse_number<std::int64_t>(key, value, "expected an integer" + std::string(or_none));
  } else if constexpr (std::is_same_v<F, double>) {
    return parse_number<double>(key, value, "expected a number" + std::string(or_none));
  } else if constexpr (ConfigEnum<F>) {
    std::string allowed;
    for (const auto& [e, name] : config_enum<F>::values) {
      if (name == value) return e;
      allowed += (allowed.empty() ? "" : ", ") + std::string(name);
    }
    throw_bad_value(key, value, "must be one of " + allowed);
  } else if constexpr (is_optional<F>::value) {
    if (value == "none") return F{};
    return F{parse_value<typename F::value_type>(key, value, " or none")};
  } else {
    static_assert(kUnsupportedField<F>,
                  "config fields may be std::string, bool, std::int64_t, double, an enum with a config_enum<E> "
                  "table, or optional double/int64_t");
  }
}

// The inverse of parse_value: the text that parses back to the same value.
template <class F>
std::string format_value(const F& value) {
  if constexpr (std::is_same_v<F, std::string>) {
    return value;
  } else if constexpr (std::is_same_v<F, bool>) {
    return value ? "true" : "false";
  } else if constexpr (std::is_same_v<F, std::int64_t>) {
    return std::to_string(value);
  } else if constexpr (std::is_same_v<F, double>) {
    std::array<char, 32> buf{};  // shortest round-trip form: 1e-3 prints as 0.001, not 0.001000
    const auto [ptr, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), value);
    return std::string(buf.data(), ec == std::errc{} ? ptr : buf.data());
  } else if constexpr (ConfigEnum<F>) {
    for (const auto& [e, name] : config_enum<F>::values)
      if (e == value) return std::string(name);
    return "?";
  } else if constexpr (is_optional<F>::value) {
    return value ? format_value(*value) : "none";
  } else {
    static_assert(kUnsupportedField<F>, "unsupported config field type");
  }
}

// Tables show an empty string as "" so that a blank cell is not mistaken for a missing one.
inline std::string displayed(std::string text) { return text.empty() ? "\"\"" : text; }

inline std::string padded(std::string_view text, std::size_t width) {
  std::string out(text);
  if (out.size() < width) out.append(width - out.size(), ' ');
  return out;
}

}  // namespace detail

// Index of field `key` in T; an unknown key names the closest valid one and lists them all.
template <class T>
std::size_t field_index(std::string_view key) {
  const auto& docs = detail::docs_of<T>();
  std::size_t best = 0;
  std::size_t best_distance = std::string_view::npos;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    if (docs[i].name == key) return i;
    const std::size_t d = detail::key_distance(key, docs[i].name);
    if (d < best_distance) {
      best = i;
      best_distance = d;
    }
  }
  std::string message = "unknown key '" + std::string(key) + "'";
  // Only suggest what plausibly was meant; a far-off "closest" key would mislead.
  if (best_distance <= std::max<std::size_t>(2, key.size() / 3)) {
    message += " (did you mean '" + std::string(docs[best].name) + "'?)";
  }
  message += "; run with --help for all keys (valid keys:";
  for (std::size_t i = 0; i < docs.size(); ++i) {
    message += (i == 0 ? " " : ", ") + std::string(docs[i].name);
  }
  throw ConfigError(message + ")");
}

template <class T>
void set_field(T& cfg, std::string_view key, std::string_view value) {
  detail::visit_field(cfg, field_index<T>(key), [&](auto& field) {
    field = detail::parse_value<std::remove_cvref_t<decltype(field)>>(key, value);
  });
}

template <class T>
std::string format_field_value(const T& cfg, std::size_t index) {
  std::string out;
  detail::visit_field(cfg, index, [&](const auto& field) { out = detail::format_value(field); });
  return out;
}

// The key | value table of cfg, then the `extra` rows (key, value) in the same columns.
template <class T>
std::string config_table(const T& cfg, std::span<const std::pair<std::string, std::string>> extra = {}) {
  const auto& docs = detail::docs_of<T>();
  std::vector<std::pair<std::string, std::string>> rows;
  for (std::size_t i = 0; i < docs.size(); ++i)
    rows.emplace_back(std::string(docs[i].name), detail::displayed(format_field_value(cfg, i)));
  rows.insert(rows.end(), extra.begin(), extra.end());
  std::size_t key_width = 3;    // "key"
  std::size_t value_width = 5;  // "value"
  for (const auto& [key, value] : rows) {
    key_width = std::max(key_width, key.size());
    value_width = std::max(value_width, value.size());
  }
  std::string out = std::string(config_fields<T>::title) + "\n";
  out += "  " + detail::padded("key", key_width) + " | value\n";
  out += "  " + std::string(key_width, '-') + "-+-" + std::string(value_width, '-') + "\n";
  for (const auto& [key, value] : rows) out += "  " + detail::padded(key, key_width) + " | " + value + "\n";
  return out;
}

template <class T>
std::string config_help(const T& defaults) {
  const auto& docs = detail::docs_of<T>();
  std::vector<std::string> values;
  std::size_t key_width = 3;      // "key"
  std::size_t default_width = 7;  // "default"
  for (std::size_t i = 0; i < docs.size(); ++i) {
    values.push_back(detail::displayed(format_field_value(defaults, i)));
    key_width = std::max(key_width, docs[i].name.size());
    default_width = std::max(default_width, values.back().size());
  }
  std::string out = std::string(config_fields<T>::title) + ": arguments are key=value\n";
  out += "  " + detail::padded("key", key_width) + "  " + detail::padded("default", default_width) +
         "  meaning\n";
  for (std::size_t i = 0; i < docs.size(); ++i) {
    out += "  " + detail::padded(docs[i].name, key_width) + "  " +
           detail::padded(values[i], default_width) + "  " + std::string(docs[i].meaning) + "\n";
  }
  return out;
}

template <class T>
T parse_args(std::span<const std::string_view> args, T defaults) {
  const auto& docs = detail::docs_of<T>();
  std::vector<std::string_view> given(docs.size());  // the argument that set each field, if any
  for (const std::string_view arg : args) {
    const std::size_t eq = arg.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      throw ConfigError("'" + std::string(arg) + "': arguments must have the form key=value (e.g. " +
                        std::string(docs[0].name) + "=" + format_field_value(defaults, 0) +
                        "); run with --help for all keys");
    }
    const std::string_view key = arg.substr(0, eq);
    const std::size_t index = field_index<T>(key);
    if (!given[index].empty()) {
      throw ConfigError(std::string(arg) + ": key '" + std::string(key) + "' was already given as " +
                        std::string(given[index]) + "; give each key once");
    }
    given[index] = arg;
    set_field(defaults, key, arg.substr(eq + 1));
  }
  return defaults;
}

}  // namespace tessera
