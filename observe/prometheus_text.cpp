#include "observe/prometheus_text.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace cohort::observe {
namespace {

// Backslash and newline escaped, and double quotes too in a label value (not in HELP text).
std::string escape(const std::string& text, bool quotes) {
  std::string out;
  for (char c : text) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '"' && quotes)
      out += "\\\"";
    else
      out += c;
  }
  return out;
}

std::string label_text(const Labels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (const auto& [name, value] : labels) {
    if (out.size() > 1) out += ',';
    out += name + "=\"" + escape_label_value(value) + '"';
  }
  return out + "}";
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t slot = std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin();
  ++counts[slot];
  sum += value;
  ++count;
}

std::string escape_label_value(const std::string& value) { return escape(value, true); }

std::string format_sample_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[64];
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    std::snprintf(buffer, sizeof buffer, "%.0f", value);
    return buffer;
  }
  for (int precision = 1; precision <= 17; ++precision) {  // the shortest text that reads back
    std::snprintf(buffer, sizeof buffer, "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  return buffer;
}

void PrometheusText::family(const std::string& name, const std::string& type,
                            const std::string& help) {
  text_ += "# HELP " + name + " " + escape(help, false) + "\n";
  text_ += "# TYPE " + name + " " + type + "\n";
}

void PrometheusText::sample(const std::string& name, const Labels& labels, double value) {
  text_ += name + label_text(labels) + " " + format_sample_value(value) + "\n";
}

void PrometheusText::histogram(const std::string& name, const Labels& labels,
                               const Histogram& histogram) {
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= histogram.bounds.size(); ++i) {
    cumulative += histogram.counts[i];
    Labels with_le = labels;
    with_le.emplace_back(
        "le", i < histogram.bounds.size() ? format_sample_value(histogram.bounds[i]) : "+Inf");
    sample(name + "_bucket", with_le, static_cast<double>(cumulative));
  }
  sample(name + "_sum", labels, histogram.sum);
  sample(name + "_count", labels, static_cast<double>(histogram.count));
}

}  // namespace cohort::observe
