#include "common/text.hpp"

#include <catch2/catch.hpp>
#include <limits>

using namespace cohort;
using std::chrono::milliseconds;

TEST_CASE("seconds become milliseconds only when a duration can hold them", "[unit][common]") {
  CHECK(parse_seconds("0") == milliseconds(0));
  CHECK(parse_seconds("1.5") == milliseconds(1500));
  CHECK(parse_seconds(" 30 ") == milliseconds(30000));
  CHECK(parse_seconds("31536000") == milliseconds(31536000000));  // a year
  for (const char* bad : {"31536001", "1e300", "inf", "-inf", "nan", "-1", "", "5s", "abc"}) {
    INFO(bad);
    CHECK_FALSE(parse_seconds(bad).has_value());
  }
  CHECK_FALSE(seconds_to_ms(std::numeric_limits<double>::quiet_NaN()).has_value());
  CHECK_FALSE(seconds_to_ms(std::numeric_limits<double>::infinity()).has_value());
  CHECK(seconds_to_ms(0.25) == milliseconds(250));
}

TEST_CASE("escape sequences reach a terminal as visible text", "[unit][common][terminal]") {
  CHECK(escape_for_terminal("\x1b[31mred\x1b[0m") == "\\x1b[31mred\\x1b[0m");
  CHECK(escape_for_terminal("\x1b]0;owned\x07") == "\\x1b]0;owned\\x07");  // sets the title
  CHECK(escape_for_terminal("\x1b"
                            "c") ==
        "\\x1b"
        "c");  // resets the terminal
  CHECK(escape_for_terminal("a\x1b") == "a\\x1b");
}

TEST_CASE("C1 controls are escaped as raw bytes and as UTF-8", "[unit][common][terminal]") {
  CHECK(escape_for_terminal("\x9b"
                            "2J") ==
        "\\x9b"
        "2J");  // 8-bit CSI
  CHECK(escape_for_terminal("\xc2\x9b"
                            "2J") ==
        "\\xc2\\x9b"
        "2J");                                                               // U+009B CSI
  CHECK(escape_for_terminal("\xc2\x80\xc2\x9f") == "\\xc2\\x80\\xc2\\x9f");  // U+0080, U+009F
  CHECK(escape_for_terminal("\xc2\xa0") == "\xc2\xa0");                      // U+00A0 is printable
}

TEST_CASE("C0 controls and DEL are escaped but newline and tab are kept",
          "[unit][common][terminal]") {
  CHECK(escape_for_terminal("ok\n\tnext\n") == "ok\n\tnext\n");
  CHECK(escape_for_terminal("bell\a") == "bell\\x07");
  CHECK(escape_for_terminal(std::string("a\0b", 3)) == "a\\x00b");
  CHECK(escape_for_terminal("x\by\x7fz") == "x\\x08y\\x7fz");
  CHECK(escape_for_terminal("\x0e\x1f") == "\\x0e\\x1f");
}

TEST_CASE("a bare CR cannot overwrite a line, a CR before LF stays", "[unit][common][terminal]") {
  CHECK(escape_for_terminal("rank 3 failed\rall good    ") == "rank 3 failed\\x0dall good    ");
  CHECK(escape_for_terminal("line\r\nnext\r") == "line\r\nnext\\x0d");
  CHECK(escape_for_terminal("\r\r\n") == "\\x0d\r\n");
}

TEST_CASE("valid UTF-8 is kept and invalid bytes are escaped", "[unit][common][terminal]") {
  std::string mixed = "h\xc3\xa9llo \xe2\x86\x92 \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x9a\x80 \\x1b";
  CHECK(escape_for_terminal(mixed) == mixed);
  CHECK(escape_for_terminal("\xc3\xa9\x1b[2J\xe2\x82\xac") == "\xc3\xa9\\x1b[2J\xe2\x82\xac");
  CHECK(escape_for_terminal("\xff\xfe") == "\\xff\\xfe");
  CHECK(escape_for_terminal("\xe2\x82") == "\\xe2\\x82");  // truncated
  CHECK(escape_for_terminal("\xe2\x82x") == "\\xe2\\x82x");
  CHECK(escape_for_terminal("\xc0\xaf") == "\\xc0\\xaf");                    // overlong '/'
  CHECK(escape_for_terminal("\xed\xa0\x80") == "\\xed\\xa0\\x80");           // surrogate U+D800
  CHECK(escape_for_terminal("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
  CHECK(escape_for_terminal("\xf4\x8f\xbf\xbf") == "\xf4\x8f\xbf\xbf");      // U+10FFFF
}

TEST_CASE("no single byte survives escaping as a control", "[unit][common][terminal]") {
  for (int value = 0; value < 256; ++value) {
    std::string escaped = escape_for_terminal(std::string(1, static_cast<char>(value)));
    INFO(value << " -> " << escaped);
    for (char c : escaped) {
      auto byte = static_cast<unsigned char>(c);
      CHECK(((byte >= 0x20 && byte < 0x7f) || byte == '\n' || byte == '\t'));
    }
  }
}

TEST_CASE("durations read as a person writes them", "[unit][common]") {
  CHECK(format_duration(milliseconds(0)) == "0.0s");
  CHECK(format_duration(milliseconds(-5)) == "0.0s");
  CHECK(format_duration(milliseconds(2450)) == "2.4s");
  CHECK(format_duration(milliseconds(9999)) == "9.9s");
  CHECK(format_duration(milliseconds(12'400)) == "12s");
  CHECK(format_duration(milliseconds(590'000)) == "9m50s");
  CHECK(format_duration(milliseconds(605'000)) == "10m05s");
  CHECK(format_duration(milliseconds(7'500'000)) == "2h05m");
}

TEST_CASE("join puts the separator between parts only", "[unit][common]") {
  CHECK(join({}, ", ").empty());
  CHECK(join({"a"}, ", ") == "a");
  CHECK(join({"a", "", "c"}, "; ") == "a; ; c");
}

TEST_CASE("bidirectional controls are shown, not obeyed", "[unit][common][terminal]") {
  // U+202E RIGHT-TO-LEFT OVERRIDE would show "exe.txt" as "txt.exe"; U+2066 LRI, U+200F RLM.
  CHECK(escape_for_terminal("a\xe2\x80\xaetxt.exe") == "a\\u202etxt.exe");
  CHECK(escape_for_terminal("\xe2\x81\xa6x\xe2\x81\xa9") == "\\u2066x\\u2069");
  CHECK(escape_for_terminal("\xe2\x80\x8f") == "\\u200f");
  // Their neighbours stay: U+2014 EM DASH, U+2030 PER MILLE, U+2070 SUPERSCRIPT ZERO.
  CHECK(escape_for_terminal("\xe2\x80\x94\xe2\x80\xb0\xe2\x81\xb0") ==
        "\xe2\x80\x94\xe2\x80\xb0\xe2\x81\xb0");
}

TEST_CASE("cut_middle keeps the start and the end within the bound", "[unit][common]") {
  CHECK(cut_middle("short", 10) == "short");
  std::string text = std::string(1000, 'a') + std::string(1000, 'z');
  std::string cut = cut_middle(text, 200);
  CHECK(cut.size() == 200);
  CHECK(cut.find("[... 2000 bytes, cut to fit ...]") != std::string::npos);
  CHECK(cut.front() == 'a');
  CHECK(cut.back() == 'z');
  CHECK(cut.find('z') > cut.find("cut to fit"));        // the end is the larger part
  CHECK(cut_middle(text, 10) == std::string(10, 'a'));  // no room for the mark
}

TEST_CASE("split_words splits on runs of any whitespace", "[unit][common]") {
  CHECK(split_words("  a\tbb \n c  ") == std::vector<std::string>{"a", "bb", "c"});
  CHECK(split_words("one") == std::vector<std::string>{"one"});
  CHECK(split_words(" \t\n").empty());
  CHECK(split_words("").empty());
}

namespace {

using Words = std::vector<std::string>;

// The words of `text` as a shell makes them; a failure as {"error: ..."}.
Words shell_words(std::string_view text) {
  std::string error;
  auto words = split_shell_words(text, error);
  return words ? *words : Words{"error: " + error};
}

}  // namespace

TEST_CASE("split_shell_words keeps quoted blanks in one word as sh does", "[unit][common]") {
  CHECK(shell_words("--comment='two words' --mem=0") == Words{"--comment=two words", "--mem=0"});
  CHECK(shell_words(R"(--comment="two words")") == Words{"--comment=two words"});
  CHECK(shell_words(R"(a\ b c)") == Words{"a b", "c"});
  CHECK(shell_words("  --gres=gpu:8 \t --mem=0  ") == Words{"--gres=gpu:8", "--mem=0"});
  CHECK(shell_words("''") == Words{""});  // an empty word, as sh gives one
  CHECK(shell_words("a''b \"\"c") == Words{"ab", "c"});
  CHECK(shell_words("").empty());
  CHECK(shell_words(" \n ").empty());
}

TEST_CASE("split_shell_words escapes as sh does and expands nothing", "[unit][common]") {
  CHECK(shell_words(R"('a\b' "a\b" "a\"b" "\$x\\")") ==
        Words{R"(a\b)", R"(a\b)", "a\"b", R"($x\)"});
  CHECK(shell_words(R"(it\'s "it's" 'say "hi"')") == Words{"it's", "it's", "say \"hi\""});
  CHECK(shell_words("$HOME ~ *.py `x`") == Words{"$HOME", "~", "*.py", "`x`"});
  CHECK(shell_words("a\\\nb \"c\\\nd\"") == Words{"ab", "cd"});  // a line continued
}

TEST_CASE("split_shell_words refuses what sh would wait for", "[unit][common]") {
  CHECK(shell_words("--comment='two words") == Words{"error: a ' is not closed"});
  CHECK(shell_words(R"(--comment="two)") == Words{"error: a \" is not closed"});
  CHECK(shell_words(R"('a' "b\")") == Words{"error: a \" is not closed"});
  CHECK(shell_words("a \\") == Words{"error: a \\ ends the text, with nothing after it to escape"});
}

TEST_CASE("one_line shows line breaks as \\n and \\r and keeps the rest", "[unit][common]") {
  CHECK(one_line("node\ncohortd: forged\r\n") == "node\\ncohortd: forged\\r\\n");
  CHECK(one_line("plain \x1b[2J\t text") == "plain \x1b[2J\t text");  // the log escapes those
  CHECK(one_line("") == "");
}
