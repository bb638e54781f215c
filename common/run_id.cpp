#include "common/run_id.hpp"

namespace cohort {
namespace {

bool run_id_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-' || c == ':' || c == '@';
}

std::string shown(char c) {
  if (c > ' ' && c < 0x7f) return std::string("'") + c + "'";
  static const char* hex = "0123456789abcdef";
  unsigned char byte = static_cast<unsigned char>(c);
  return std::string("byte 0x") + hex[byte >> 4] + hex[byte & 0xf];
}

}  // namespace

std::string run_id_problem(std::string_view id) {
  if (id.empty()) return "the run id is empty";
  if (id.size() > kMaxRunIdLength) {
    return "the run id is " + std::to_string(id.size()) + " characters long; at most " +
           std::to_string(kMaxRunIdLength) + " are allowed";
  }
  for (char c : id) {
    if (!run_id_char(c)) {
      return "the run id contains " + shown(c) + "; only letters, digits and . _ - : @ are allowed";
    }
  }
  if (id.front() == '.') return "the run id starts with '.'";
  return {};
}

std::string run_id_path_component(std::string_view id) {
  std::string component(id.substr(0, kMaxRunIdLength));
  for (char& c : component) {
    if (!run_id_char(c)) c = '_';
  }
  if (component.empty()) return "_";
  if (component.front() == '.') component.front() = '_';
  return component;
}

}  // namespace cohort
