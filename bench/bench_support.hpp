// What the worker-store load generators share (store_bench, bootstrap_storm): time, the
// descriptor limit, this process's CPU time, quantiles and JSON strings for their one output
// line, and raw TCPStore requests (docs/tcpstore-protocol.md §1) with the opcode passed in.
// Header-only; any thread.
#pragma once

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

inline Clock::duration to_duration(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

/// Raises the soft descriptor limit to the hard one; returns the soft limit now in force.
inline rlim_t raise_descriptor_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
    getrlimit(RLIMIT_NOFILE, &limit);
  }
  return limit.rlim_cur;
}

/// CPU seconds (user + system) of every thread of this process so far.
inline double process_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& time) { return time.tv_sec + time.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

/// The value at `fraction` of the samples, those equal to -1 (never reached) left out; 0 where
/// none is left.
inline double quantile(std::vector<double> samples, double fraction) {
  samples.erase(std::remove(samples.begin(), samples.end(), -1.0), samples.end());
  if (samples.empty()) return 0;
  size_t rank = std::min(samples.size() - 1, static_cast<size_t>(fraction * samples.size()));
  std::nth_element(samples.begin(), samples.begin() + static_cast<ptrdiff_t>(rank), samples.end());
  return samples[rank];
}

inline std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (static_cast<unsigned char>(c) >= 0x20) out.push_back(c);
  }
  return out + "\"";
}

inline void put_u32(std::string& out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

inline void put_u64(std::string& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

inline void put_bytes(std::string& out, std::string_view bytes) {
  put_u64(out, bytes.size());
  out.append(bytes);
}

inline uint64_t get_u64(const uint8_t* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

inline std::string add_request(uint8_t op, std::string_view key, int64_t delta) {
  std::string out(1, static_cast<char>(op));
  put_bytes(out, key);
  put_u64(out, static_cast<uint64_t>(delta));
  return out;
}

inline std::string set_request(uint8_t op, std::string_view key, std::string_view value) {
  std::string out(1, static_cast<char>(op));
  put_bytes(out, key);
  put_bytes(out, value);
  return out;
}

/// WAIT on one key.
inline std::string wait_request(uint8_t op, std::string_view key) {
  std::string out(1, static_cast<char>(op));
  put_u64(out, 1);
  put_bytes(out, key);
  return out;
}

}  // namespace cohort::bench
