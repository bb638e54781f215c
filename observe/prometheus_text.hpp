// Writes metrics in Prometheus' text exposition format (version 0.0.4): each family's HELP and
// TYPE lines once, then its samples, label values escaped, histograms as cumulative _bucket
// lines with le="+Inf", _sum and _count. Pure string building; whoever renders /metrics owns
// one for the length of a request, on its own thread.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cohort::observe {

using Labels = std::vector<std::pair<std::string, std::string>>;

/// Observations sorted into fixed upper bounds (in the unit the metric's name says).
struct Histogram {
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);

  std::vector<double> bounds;
  std::vector<uint64_t> counts;  ///< per bound, not cumulative; size bounds.size() + 1 (+Inf)
  double sum = 0;
  uint64_t count = 0;
};

class PrometheusText {
 public:
  /// Starts a family: `type` is counter, gauge or histogram. Names must match
  /// [a-zA-Z_:][a-zA-Z0-9_:]* (the caller's constants; not checked at run time).
  void family(const std::string& name, const std::string& type, const std::string& help);
  void sample(const std::string& name, const Labels& labels, double value);
  void sample(const std::string& name, double value) { sample(name, {}, value); }
  void histogram(const std::string& name, const Labels& labels, const Histogram& histogram);

  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

/// The escaping of a label value: backslash, double quote and newline.
std::string escape_label_value(const std::string& value);
/// A sample value as Prometheus reads it: integers without a fraction, NaN, +Inf, -Inf.
std::string format_sample_value(double value);

}  // namespace cohort::observe
