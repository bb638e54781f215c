#include <atomic>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "common/byte_budget.hpp"

using namespace cohort;

TEST_CASE("byte budget: takes what fits and gives it back", "[unit][common]") {
  ByteBudget budget(1000);
  CHECK(budget.try_take(600));
  CHECK_FALSE(budget.try_take(401));
  CHECK(budget.used() == 600);
  CHECK(budget.room() == 400);
  CHECK(budget.try_take(400));
  CHECK(budget.room() == 0);
  CHECK_FALSE(budget.try_take(1));
  budget.take(50);  // replies already made: taken past the limit
  CHECK(budget.used() == 1050);
  CHECK(budget.room() == 0);
  CHECK_FALSE(budget.try_take(1));
  budget.give_back(1050);
  CHECK(budget.used() == 0);
  CHECK(budget.room() == 1000);
}

TEST_CASE("byte budget: threads taking and giving back at once never pass it", "[unit][common]") {
  ByteBudget budget(4000);
  std::atomic<bool> past_limit{false};
  std::atomic<int> taken{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        if (!budget.try_take(1500)) continue;
        ++taken;
        if (budget.used() > 4000) past_limit = true;  // (Catch's CHECK is for one thread)
        budget.give_back(1500);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK_FALSE(past_limit);
  CHECK(taken > 0);
  CHECK(budget.used() == 0);
}
