#include "agent/hang_report.hpp"

#include <cstdio>
#include <ctime>
#include <sstream>

namespace cohort {
namespace {

std::string clock_time(std::chrono::system_clock::time_point time) {
  std::time_t seconds = std::chrono::system_clock::to_time_t(time);
  std::tm local{};
  ::localtime_r(&seconds, &local);
  char text[32];
  std::strftime(text, sizeof text, "%H:%M:%S", &local);
  return text;
}

std::string seconds(std::chrono::milliseconds duration) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", static_cast<double>(duration.count()) / 1000.0);
  return text;
}

std::string last_signal(const HangReport& hang) {
  if (!hang.last_signal) return "none since it started";
  std::string text = hang.step ? "step " + std::to_string(*hang.step) + " at " : "at ";
  return text + clock_time(*hang.last_signal);
}

std::string trim(const std::string& line) {
  size_t first = line.find_first_not_of(' ');
  return first == std::string::npos ? std::string() : line.substr(first);
}

// eu-stack's: "TID 123:" then "#0  0x00007f... function" lines; the first thread's.
std::vector<std::string> native_frames(const std::string& stacks, size_t count) {
  std::istringstream lines(stacks);
  std::string line;
  std::vector<std::string> frames;
  bool in_thread = false;
  while (std::getline(lines, line) && frames.size() < count) {
    if (line.rfind("TID ", 0) == 0) {
      if (in_thread) break;
      in_thread = true;
    } else if (in_thread && line.rfind("#", 0) == 0) {
      frames.push_back(line);
    }
  }
  return frames;
}

std::vector<std::string> python_frames(const std::string& traceback, size_t count) {
  std::istringstream lines(traceback);
  std::string line;
  std::vector<std::string> first_thread, current_thread, *into = nullptr;
  while (std::getline(lines, line)) {
    if (line.find("(most recent call first):") != std::string::npos) {
      bool current = line.rfind("Current thread", 0) == 0;
      into = current ? &current_thread : (first_thread.empty() ? &first_thread : nullptr);
      continue;
    }
    std::string frame = trim(line);
    if (frame.rfind("File \"", 0) != 0) {
      if (frame.empty()) into = nullptr;  // the end of a thread's block
      continue;
    }
    if (into && into->size() < count) into->push_back(frame);
  }
  return current_thread.empty() ? first_thread : current_thread;
}

}  // namespace

std::string hang_line(const WorkerFailure& failure, const HangReport& hang) {
  return "rank " + std::to_string(failure.rank) + " (local rank " +
         std::to_string(failure.local_rank) + ", pid " + std::to_string(failure.pid) +
         ") made no progress for " + seconds(hang.silent_for) +
         " s (last signal: " + last_signal(hang) + ")";
}

std::vector<std::string> innermost_frames(const std::string& stacks, size_t count) {
  std::vector<std::string> frames = python_frames(stacks, count);
  return frames.empty() ? native_frames(stacks, count) : frames;
}

}  // namespace cohort
