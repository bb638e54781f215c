// CLI11's App, declared only. The headers that merely take one by reference include this rather
// than <CLI/CLI.hpp>, which costs seconds of compile time in every file that includes it; the
// files that build or read an App include CLI11 themselves.
#pragma once

namespace CLI {
class App;
}  // namespace CLI
