#include "tests/support/flight_recorder_dump_writer.hpp"

#include <string_view>

namespace cohort::test {

namespace {

// The opcodes PyTorch's pickler writes for a dump, as protocol 2.
class Pickler {
 public:
  Pickler() { out_ += "\x80\x02"; }

  void empty_dict() { out_ += '}'; }
  void empty_list() { out_ += ']'; }
  void mark() { out_ += '('; }
  void setitems() { out_ += 'u'; }
  void appends() { out_ += 'e'; }
  void tuple2() { out_ += '\x86'; }
  void none() { out_ += 'N'; }
  void boolean(bool value) { out_ += value ? '\x88' : '\x89'; }
  std::string stop() { return out_ + '.'; }

  // A string: BINUNICODE and BINPUT the first time, BINGET after.
  void text(std::string_view value) {
    auto found = memo_.find(std::string(value));
    if (found != memo_.end()) {
      index_op('h', 'j', found->second);
      return;
    }
    out_ += 'X';
    le(value.size(), 4);
    out_ += value;
    uint32_t index = static_cast<uint32_t>(memo_.size());
    memo_.emplace(std::string(value), index);
    index_op('q', 'r', index);
  }

  void integer(int64_t value) {
    if (value >= 0 && value < 256) {
      out_ += 'K';
      le(static_cast<uint64_t>(value), 1);
    } else if (value >= 0 && value < 65536) {
      out_ += 'M';
      le(static_cast<uint64_t>(value), 2);
    } else if (value >= INT32_MIN && value <= INT32_MAX) {
      out_ += 'J';
      le(static_cast<uint64_t>(value), 4);
    } else {
      int bytes = 1;  // LONG1: little-endian two's complement, as few bytes as hold the sign
      while (bytes < 8 && (value >> (8 * bytes - 1)) != 0 && (value >> (8 * bytes - 1)) != -1) {
        ++bytes;
      }
      out_ += '\x8a';
      le(static_cast<uint64_t>(bytes), 1);
      le(static_cast<uint64_t>(value), bytes);
    }
  }

 private:
  void le(uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) out_ += static_cast<char>((value >> (8 * i)) & 0xff);
  }
  void index_op(char short_op, char long_op, uint32_t index) {
    if (index < 256) {
      out_ += short_op;
      le(index, 1);
    } else {
      out_ += long_op;
      le(index, 4);
    }
  }

  std::string out_;
  std::map<std::string, uint32_t> memo_;
};

void sizes(Pickler& p, const std::vector<std::vector<int64_t>>& tensors) {
  p.empty_list();
  if (tensors.empty()) return;
  p.mark();
  for (const auto& dims : tensors) {
    p.empty_list();
    if (dims.empty()) continue;
    p.mark();
    for (int64_t dim : dims) p.integer(dim);
    p.appends();
  }
  p.appends();
}

void dtypes(Pickler& p, const std::string& dtype, size_t count) {
  p.empty_list();
  if (count == 0) return;
  p.mark();
  for (size_t i = 0; i < count; ++i) p.text(dtype);
  p.appends();
}

void frames(Pickler& p, const std::string& op) {
  p.empty_list();
  p.mark();
  const std::string torch = "/opt/torch/.venv/lib/python3.12/site-packages/torch/distributed/";
  struct Frame {
    std::string name, filename;
    int64_t line;
  };
  const Frame stack[] = {{op, torch + "distributed_c10d.py", 3068},
                         {"wrapper", torch + "c10d_logger.py", 83},
                         {"<module>", "<string>", 8}};
  for (const Frame& frame : stack) {
    p.empty_dict();
    p.mark();
    p.text("name");
    p.text(frame.name);
    p.text("filename");
    p.text(frame.filename);
    p.text("line");
    p.integer(frame.line);
    p.setitems();
  }
  p.appends();
}

}  // namespace

std::string write_flight_recorder_dump(const RankDumpSpec& spec) {
  Pickler p;
  p.empty_dict();
  p.mark();
  p.text("version");
  p.text(spec.version);
  p.text("pg_config");
  p.empty_dict();
  if (!spec.groups.empty()) {
    p.mark();
    for (const DumpGroup& group : spec.groups) {
      p.text(group.name);
      p.empty_dict();
      p.mark();
      p.text("name");
      p.text(group.name);
      p.text("desc");
      p.text(group.desc);
      p.text("ranks");
      p.text(group.ranks);
      p.setitems();
    }
    p.setitems();
  }
  p.text("comm_lib_version");
  p.text(spec.comm_lib_version);
  p.text("pg_status");
  p.empty_dict();
  if (!spec.groups.empty()) {
    p.mark();
    for (const DumpGroup& group : spec.groups) {
      p.text(group.name);
      p.empty_dict();
      p.mark();
      p.text("last_enqueued_collective");
      p.integer(group.last_enqueued);
      p.text("last_started_collective");
      p.integer(group.last_started);
      p.text("last_completed_collective");
      p.integer(group.last_completed);
      p.setitems();
    }
    p.setitems();
  }
  p.text("entries");
  p.empty_list();
  int64_t record_id = 0;
  int64_t time_ns = 1795666249896155146;
  bool any = false;
  for (const DumpGroup& group : spec.groups) {
    for (int64_t seq = group.first_seq; seq <= group.last_enqueued; ++seq) {
      if (!any) p.mark();
      any = true;
      auto op_found = group.ops.find(seq);
      const std::string& op = op_found == group.ops.end() ? group.op : op_found->second;
      auto sizes_found = group.sizes_at.find(seq);
      const auto& input = sizes_found == group.sizes_at.end() ? group.sizes : sizes_found->second;
      bool completed = seq <= group.last_completed;
      bool started = completed || seq <= group.last_started;
      time_ns += 1000;
      p.empty_dict();
      p.mark();
      p.text("frames");
      frames(p, op);
      p.text("record_id");
      p.integer(record_id++);
      p.text("pg_id");
      p.integer(group.pg_id);
      p.text("process_group");
      p.text(group.name);
      p.text(group.desc);
      p.tuple2();
      p.text("thread_name");
      p.text("python3");
      p.text("thread_id");
      p.text("140006176420160");
      p.text("collective_seq_id");
      p.integer(seq);
      p.text("p2p_seq_id");
      p.integer(0);
      p.text("op_id");
      p.integer(seq);
      p.text("profiling_name");
      p.text("nccl:" + op);
      p.text("time_created_ns");
      p.integer(time_ns);
      p.text("input_sizes");
      sizes(p, input);
      p.text("input_dtypes");
      dtypes(p, group.dtype, input.size());
      p.text("output_sizes");
      sizes(p, input);
      p.text("output_dtypes");
      dtypes(p, group.dtype, input.size());
      p.text("state");
      p.text(completed ? "completed" : started ? "started" : "scheduled");
      p.text("time_discovered_started_ns");
      if (started && group.last_started >= 0) {
        p.integer(time_ns + 10);
      } else {
        p.none();
      }
      p.text("time_discovered_completed_ns");
      if (completed) {
        p.integer(time_ns + 80000000);
      } else {
        p.none();
      }
      p.text("retired");
      p.boolean(completed);
      p.text("timeout_ms");
      p.integer(600000);
      p.text("is_p2p");
      p.boolean(false);
      p.setitems();
    }
  }
  if (any) p.appends();
  p.setitems();
  return p.stop();
}

}  // namespace cohort::test
