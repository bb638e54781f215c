// A LibTorch c10d::TCPStore client that runs the worker store's basic operations against a
// server at HOST PORT and exits 0 when every answer is right (1 with a message otherwise). Used
// by the store server's component test; built only where LibTorch is installed.
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

namespace {

using Bytes = std::vector<uint8_t>;

Bytes bytes(const std::string& text) { return Bytes(text.begin(), text.end()); }

int failures = 0;

void expect(bool condition, const std::string& what) {
  if (condition) return;
  std::cerr << "libtorch_store_client: FAILED " << what << "\n";
  ++failures;
}

void run(const std::string& host, uint16_t port) {
  c10d::TCPStoreOptions options;
  options.port = port;
  options.isServer = false;
  options.numWorkers = 1;  // sends ADD "init/" +1 as every agent-store worker does
  options.timeout = std::chrono::seconds(20);
  c10d::TCPStore store(host, options);

  store.set("k1", bytes("v1"));
  expect(store.get("k1") == bytes("v1"), "get k1");
  expect(store.add("cnt", 5) == 5, "add 5");
  expect(store.add("cnt", -2) == 3, "add -2");
  expect(store.compareSet("cs", {}, bytes("first")) == bytes("first"), "compare_set create");
  expect(store.compareSet("cs", bytes("wrong"), bytes("x")) == bytes("first"),
         "compare_set mismatch");
  expect(store.compareSet("cs", bytes("first"), bytes("second")) == bytes("second"),
         "compare_set swap");
  expect(store.compareSet("absent", bytes("exp"), bytes("d")) == bytes("exp"),
         "compare_set absent with expected");
  expect(store.check({"k1", "cnt"}), "check present");
  expect(!store.check({"k1", "nope"}), "check missing");
  store.wait({"k1", "cnt"});
  store.wait({"k1"}, std::chrono::milliseconds(2000));

  // A wait that times out, then more requests on the same store (1.13 stray-reply case).
  bool timed_out = false;
  try {
    store.wait({"never"}, std::chrono::milliseconds(300));
  } catch (const std::exception&) {
    timed_out = true;
  }
  expect(timed_out, "wait on a missing key times out");
  store.set("never", bytes("now"));
  expect(store.get("k1") == bytes("v1"), "get after a timed-out wait");
  expect(store.add("cnt", 0) == 3, "add 0 after a timed-out wait");
  expect(store.get("never") == bytes("now"), "get the key a wait timed out on");

  expect(store.deleteKey("k1"), "delete k1");
  expect(!store.deleteKey("k1"), "delete k1 again");
  // init/, /cnt, /cs, /never
  int64_t keys = store.getNumKeys();
  expect(keys == 4, "num_keys is 4, got " + std::to_string(keys));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: libtorch_store_client HOST PORT\n";
    return 2;
  }
  try {
    run(argv[1], static_cast<uint16_t>(std::atoi(argv[2])));
  } catch (const std::exception& error) {
    std::cerr << "libtorch_store_client: " << error.what() << "\n";
    return 1;
  }
  if (failures > 0) return 1;
  std::cout << "libtorch_store_client: ok\n";
  return 0;
}
