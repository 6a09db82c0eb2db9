// tests: the generic key=value machinery on a small struct holding one field of each type.
#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/config/fields.hpp"

namespace demo {
struct Demo {
  std::string name = "abc";
  bool flag = false;
  std::int64_t count = 8;
  double rate = 1e-3;
  std::optional<double> decay;
  std::optional<std::int64_t> limit = 5;
};
}  // namespace demo

template <>
struct tessera::config_fields<demo::Demo> {
  static constexpr std::string_view title = "demo config";
  static constexpr std::array<FieldDoc, 6> docs{{
      {"name", "a string"},
      {"flag", "a bool"},
      {"count", "an integer"},
      {"rate", "a double"},
      {"decay", "an optional double"},
      {"limit", "an optional integer"},
  }};
};

namespace {

using demo::Demo;
using tessera::ConfigError;

Demo parse(std::vector<std::string_view> args) {
  return tessera::parse_args<Demo>(args, Demo{});
}

}  // namespace

TEST_CASE("set_field parses each field type", "[config]") {
  Demo d;
  tessera::set_field(d, "name", "hello world=1");
  CHECK(d.name == "hello world=1");
  tessera::set_field(d, "name", "");
  CHECK(d.name.empty());

  tessera::set_field(d, "flag", "true");
  CHECK(d.flag);
  tessera::set_field(d, "flag", "0");
  CHECK_FALSE(d.flag);
  tessera::set_field(d, "flag", "1");
  CHECK(d.flag);
  tessera::set_field(d, "flag", "false");
  CHECK_FALSE(d.flag);

  tessera::set_field(d, "count", "-42");
  CHECK(d.count == -42);
  tessera::set_field(d, "count", "9223372036854775807");
  CHECK(d.count == INT64_MAX);

  tessera::set_field(d, "rate", "3e-4");
  CHECK(d.rate == 3e-4);
  tessera::set_field(d, "rate", "2");
  CHECK(d.rate == 2.0);

  tessera::set_field(d, "decay", "0.1");
  REQUIRE(d.decay.has_value());
  CHECK(*d.decay == 0.1);
  tessera::set_field(d, "decay", "none");
  CHECK_FALSE(d.decay.has_value());

  tessera::set_field(d, "limit", "none");
  CHECK_FALSE(d.limit.has_value());
  tessera::set_field(d, "limit", "7");
  CHECK(d.limit == std::optional<std::int64_t>(7));
}

TEST_CASE("set_field rejects values that do not parse, naming key and value", "[config]") {
  Demo d;
  CHECK_THROWS_MATCHES(tessera::set_field(d, "count", "abc"), ConfigError,
                       Catch::Message("count=abc: expected an integer"));
  CHECK_THROWS_WITH(tessera::set_field(d, "count", "8.0"), "count=8.0: expected an integer");
  CHECK_THROWS_WITH(tessera::set_field(d, "count", ""), "count=: expected an integer");
  CHECK_THROWS_WITH(tessera::set_field(d, "count", " 8"), "count= 8: expected an integer");
  CHECK_THROWS_WITH(tessera::set_field(d, "count", "99999999999999999999"),
                    Catch::Contains("count=99999999999999999999") &&
                        Catch::Contains("out of range"));
  CHECK_THROWS_WITH(tessera::set_field(d, "rate", "1e-3x"), "rate=1e-3x: expected a number");
  CHECK_THROWS_WITH(tessera::set_field(d, "rate", "1e999"),
                    Catch::Contains("rate=1e999") && Catch::Contains("out of range"));
  CHECK_THROWS_WITH(tessera::set_field(d, "flag", "yes"),
                    "flag=yes: expected true, false, 1 or 0");
  CHECK_THROWS_WITH(tessera::set_field(d, "decay", "lots"),
                    "decay=lots: expected a number or none");
  CHECK_THROWS_WITH(tessera::set_field(d, "limit", "None"),
                    "limit=None: expected an integer or none");
  // A failed parse leaves the field as it was.
  CHECK(d.count == 8);
  CHECK(d.rate == 1e-3);
}

TEST_CASE("an unknown key suggests the closest one and lists all", "[config]") {
  Demo d;
  CHECK_THROWS_MATCHES(tessera::set_field(d, "cuont", "1"), ConfigError,
                       Catch::Message("unknown key 'cuont' (did you mean 'count'?); run with "
                                      "--help for all keys (valid keys: name, flag, count, rate, "
                                      "decay, limit)"));
  CHECK_THROWS_WITH(tessera::set_field(d, "RATE", "1"), Catch::Contains("did you mean 'rate'?"));
  CHECK_THROWS_WITH(tessera::set_field(d, "limits", "1"),
                    Catch::Contains("did you mean 'limit'?"));
  // Nothing is close: no misleading suggestion, but still the list.
  CHECK_THROWS_WITH(tessera::set_field(d, "xyzzyplugh", "1"),
                    !Catch::Contains("did you mean") && Catch::Contains("unknown key 'xyzzyplugh'") &&
                        Catch::Contains("valid keys: name, flag"));
}

TEST_CASE("format_field_value round-trips through set_field", "[config]") {
  Demo d;
  CHECK(tessera::format_field_value(d, 0) == "abc");
  CHECK(tessera::format_field_value(d, 1) == "false");
  CHECK(tessera::format_field_value(d, 2) == "8");
  CHECK(tessera::format_field_value(d, 3) == "0.001");
  CHECK(tessera::format_field_value(d, 4) == "none");
  CHECK(tessera::format_field_value(d, 5) == "5");
  CHECK_THROWS_AS(tessera::format_field_value(d, 6), std::out_of_range);

  Demo changed = parse({"name=x y", "flag=1", "count=-3", "rate=0.1", "decay=1e-05", "limit=none"});
  const auto& docs = tessera::config_fields<Demo>::docs;
  Demo copy;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    tessera::set_field(copy, docs[i].name, tessera::format_field_value(changed, i));
  }
  CHECK(copy.name == changed.name);
  CHECK(copy.flag == changed.flag);
  CHECK(copy.count == changed.count);
  CHECK(copy.rate == changed.rate);
  CHECK(copy.decay == changed.decay);
  CHECK(copy.limit == changed.limit);
}

TEST_CASE("parse_args applies overrides over the defaults", "[config]") {
  const Demo untouched = parse({});
  CHECK(untouched.name == "abc");
  CHECK(untouched.count == 8);

  const Demo d = parse({"count=3", "decay=0.5", "name=a=b"});
  CHECK(d.count == 3);
  CHECK(d.decay == std::optional<double>(0.5));
  CHECK(d.name == "a=b");  // only the first '=' splits
  CHECK(d.rate == 1e-3);
}

TEST_CASE("parse_args rejects malformed and repeated arguments", "[config]") {
  CHECK_THROWS_MATCHES(parse({"count"}), ConfigError,
                       Catch::Message("'count': arguments must have the form key=value (e.g. "
                                      "name=abc); run with --help for all keys"));
  CHECK_THROWS_WITH(parse({"=3"}), Catch::Contains("'=3'") && Catch::Contains("key=value"));
  CHECK_THROWS_WITH(parse({"--help"}), Catch::Contains("'--help'") && Catch::Contains("key=value"));
  CHECK_THROWS_MATCHES(parse({"count=3", "rate=1", "count=4"}), ConfigError,
                       Catch::Message("count=4: key 'count' was already given as count=3; give "
                                      "each key once"));
  CHECK_THROWS_WITH(parse({"count=3", "cont=4"}), Catch::Contains("did you mean 'count'?"));
}

TEST_CASE("config_table and config_help show every key", "[config]") {
  Demo d;
  d.count = 12345;
  d.name = "";
  const std::string table = tessera::config_table(d);
  CHECK(table ==
        "demo config\n"
        "  key   | value\n"
        "  ------+------\n"
        "  name  | \"\"\n"
        "  flag  | false\n"
        "  count | 12345\n"
        "  rate  | 0.001\n"
        "  decay | none\n"
        "  limit | 5\n");

  const std::string help = tessera::config_help(Demo{});
  CHECK(help ==
        "demo config: arguments are key=value\n"
        "  key    default  meaning\n"
        "  name   abc      a string\n"
        "  flag   false    a bool\n"
        "  count  8        an integer\n"
        "  rate   0.001    a double\n"
        "  decay  none     an optional double\n"
        "  limit  5        an optional integer\n");
}
