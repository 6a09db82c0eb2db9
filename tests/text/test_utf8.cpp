// tests: text/utf8.hpp: one character at a time, invalid sequences by their maximal subpart, lossy conversion.
#include <catch2/catch.hpp>

#include "tessera/text/utf8.hpp"

using namespace tessera::text;

TEST_CASE("decode_utf8 reads one to four bytes and refuses what UTF-8 forbids", "[text]") {
  CHECK(decode_utf8("a", 0).code == U'a');
  const Utf8Char e = decode_utf8("caf\xc3\xa9", 3);
  CHECK((e.valid && e.code == U'\u00e9' && e.length == 2));
  const Utf8Char euro = decode_utf8("\xe2\x82\xac", 0);
  CHECK((euro.valid && euro.code == U'\u20ac' && euro.length == 3));
  const Utf8Char smile = decode_utf8("\xf0\x9f\x99\x82", 0);
  CHECK((smile.valid && smile.code == U'\U0001F642' && smile.length == 4));
  // Invalid: the length is the maximal subpart one U+FFFD replaces.
  CHECK((!decode_utf8("\x80", 0).valid && decode_utf8("\x80", 0).length == 1));        // stray continuation byte
  CHECK((!decode_utf8("\xe2\x82", 0).valid && decode_utf8("\xe2\x82", 0).length == 2));  // truncated
  CHECK((!decode_utf8("\xe2\x82x", 0).valid && decode_utf8("\xe2\x82x", 0).length == 2));
  CHECK((!decode_utf8("\xc0\xaf", 0).valid && decode_utf8("\xc0\xaf", 0).length == 1));  // overlong lead
  CHECK((!decode_utf8("\xe0\x80\xaf", 0).valid && decode_utf8("\xe0\x80\xaf", 0).length == 1));
  CHECK((!decode_utf8("\xed\xa0\x80", 0).valid && decode_utf8("\xed\xa0\x80", 0).length == 1));  // surrogate
  CHECK((!decode_utf8("\xf4\x90\x80\x80", 0).valid && decode_utf8("\xf4\x90\x80\x80", 0).length == 1));  // > U+10FFFF
  CHECK((!decode_utf8("\xf0\x9f\x99", 0).valid && decode_utf8("\xf0\x9f\x99", 0).length == 3));
  CHECK(!decode_utf8("\xff", 0).valid);
}

TEST_CASE("first_invalid_utf8 names the first bad byte, lossy_utf8 replaces maximal subparts", "[text]") {
  CHECK_FALSE(first_invalid_utf8(""));
  CHECK_FALSE(first_invalid_utf8("plain ascii \xc3\xa9 \xf0\x9f\x99\x82"));
  CHECK(first_invalid_utf8("ab\xff").value() == 2);
  CHECK(first_invalid_utf8("\xc3\xa9\xe2\x82 ").value() == 2);
  // As Rust's String::from_utf8_lossy (tokenizers' decode) and Python's bytes.decode(errors="replace") do.
  CHECK(lossy_utf8("a\xff" "b") == "a\xef\xbf\xbd" "b");
  CHECK(lossy_utf8("\xe2\x82") == "\xef\xbf\xbd");
  CHECK(lossy_utf8("\xed\xa0\x80") == "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
  CHECK(lossy_utf8("\xf0\x9f\x99x") == "\xef\xbf\xbdx");
  CHECK(lossy_utf8("ok \xc3\xa9") == "ok \xc3\xa9");
  std::string out;
  for (const char32_t c : {U'a', U'\u00e9', U'\u20ac', U'\U0001F642'}) append_utf8(out, c);
  CHECK(out == "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x99\x82");
}
