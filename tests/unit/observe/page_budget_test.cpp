#include "observe/page_budget.hpp"

#include <catch2/catch.hpp>

using cohort::SteadyTime;
using cohort::observe::PageBudget;
using namespace std::chrono_literals;

TEST_CASE("pages are built while their time stays under the limit, draining at their share",
          "[unit][http]") {
  PageBudget budget(250ms, 0.25);
  SteadyTime t = SteadyTime{} + 100s;
  REQUIRE(budget.allows(t));
  budget.spent(t, t + 100ms);
  t += 100ms;
  CHECK(budget.allows(t));     // 100 ms owed
  budget.spent(t, t + 300ms);  // a big page
  t += 300ms;
  // 325 ms owed (of the first 100, 75 were paid meanwhile): 503 until 75 ms are paid, 300 ms on.
  CHECK_FALSE(budget.allows(t));
  CHECK_FALSE(budget.allows(t + 299ms));
  CHECK(budget.allows(t + 301ms));
}

TEST_CASE("small pages, however many, take at most their share of the thread", "[unit][http]") {
  PageBudget budget(250ms, 0.25);
  SteadyTime t = SteadyTime{} + 100s;
  std::chrono::milliseconds built{0};
  for (int i = 0; i < 10000; ++i) {  // 10 s of clients asking as fast as they can
    if (budget.allows(t)) {
      budget.spent(t, t + 5ms);
      built += 5ms;
      t += 5ms;
    } else {
      t += 1ms;  // a 503 costs next to nothing
    }
  }
  auto elapsed = t - (SteadyTime{} + 100s);
  CHECK(built.count() <=
        0.25 * std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count() +
            255);      // + the last
  CHECK(built >= 1s);  // and they are served, not refused for good
}
