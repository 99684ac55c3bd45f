// The Plans view in the main window: the engine's plans listed, Apply enabled only for a plan
// the running deployment can take live, and the command it sends.
#include <gtest/gtest.h>

#include <QDockWidget>
#include <QLabel>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTest>

#include "console/app/main_window.h"
#include "console/app/plans_panel.h"
#include "gui_environment.h"

namespace sy::console {
namespace {

using nlohmann::json;

json plan(int n_a, int n_e, int tp_e, int m, int b_a, bool applicable) {
  json p = {{"n_a", n_a}, {"tp_a", 1}, {"n_e", n_e}, {"tp_e", tp_e}, {"m", m}, {"b_a", b_a},
            {"batch", n_a * m * b_a}, {"devices", n_a + n_e * tp_e}, {"tokens_per_s", 1000.0 * n_a},
            {"token_latency_ms", 12.5}, {"tokens_per_s_per_price", 300.0}, {"binding", "memory: full"},
            {"applicable", applicable}};
  if (!applicable) p["refused"] = "n_a: 6 attention devices, the deployment has 2";
  return p;
}

TEST(PlansPanel, ListsPlansAndAppliesOnlyLiveOnes) {
  ASSERT_NE(testing::gui_application(), nullptr);
  MainWindow w;
  w.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
  auto* dock = w.findChild<QDockWidget*>("plansDock");
  ASSERT_NE(dock, nullptr);
  auto* panel = w.findChild<PlansPanel*>("plansPanel");
  ASSERT_NE(panel, nullptr);
  QSignalSpy sent(panel, &PlansPanel::commandRequested);

  // Search asks the engine.
  panel->findChild<QPushButton*>("plansSearch")->click();
  ASSERT_EQ(sent.count(), 1);
  EXPECT_EQ(json::parse(sent.at(0).at(0).toString().toStdString())["cmd"], "plan");

  const json reply = {{"ok", true}, {"cmd", "plan"}, {"model", "mixtral-8x7b"},
                      {"inputs", {{"attention_hardware", "H100"}, {"expert_hardware", "H100"}}},
                      {"current", {{"n_a", 2}, {"n_e", 4}, {"colocated", false}, {"policy", "async"}, {"m", 2},
                                   {"max_batch_per_rank", 64}}},
                      {"plans", json::array({plan(2, 4, 1, 3, 100, true), plan(6, 8, 2, 4, 500, false)})}};
  // The reply comes back as the live connection delivers it: with the request it answers.
  panel->onControlReply(1, "plan", R"({"cmd":"plan","top":5})", true, QString::fromStdString(reply.dump()));
  auto* table = panel->findChild<QTableWidget*>("plansTable");
  ASSERT_EQ(table->rowCount(), 2);
  EXPECT_EQ(table->item(0, 1)->text(), "2x tp1");
  EXPECT_EQ(table->item(1, 2)->text(), "8x tp2");
  EXPECT_NE(panel->findChild<QLabel*>("plansStatus")->text().indexOf("2 attention + 4 expert devices"), -1);

  auto* apply = panel->findChild<QPushButton*>("plansApply");
  EXPECT_FALSE(apply->isEnabled());  // nothing selected
  table->selectRow(1);
  EXPECT_FALSE(apply->isEnabled());
  EXPECT_NE(apply->toolTip().indexOf("n_a: 6"), -1);
  table->selectRow(0);
  ASSERT_TRUE(apply->isEnabled());
  apply->click();
  ASSERT_EQ(sent.count(), 2);
  const json cmd = json::parse(sent.at(1).at(0).toString().toStdString());
  EXPECT_EQ(cmd["cmd"], "apply_plan");
  EXPECT_EQ(cmd["plan"]["m"], 3);
  EXPECT_EQ(cmd["plan"]["b_a"], 100);

  // A refusal is shown, the list kept; replies to other commands are not the panel's.
  panel->onControlReply(2, "plan", R"({"cmd":"plan"})", true, R"({"ok":false,"error":"plan: no profile"})");
  EXPECT_NE(panel->findChild<QLabel*>("plansStatus")->text().indexOf("no profile"), -1);
  panel->onControlReply(3, "get state", R"({"cmd":"get_state"})", true, R"({"ok":true})");
  EXPECT_EQ(table->rowCount(), 2);
}

}  // namespace
}  // namespace sy::console
