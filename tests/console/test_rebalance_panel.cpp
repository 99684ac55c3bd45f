// The control panel's expert rebalancing: Propose asks the engine, the reply's predicted loads
// are shown, Apply sends exactly that proposal's id (once), and the periodic setting's command.
#include <gtest/gtest.h>

#include <QCheckBox>
#include <QLabel>
#include <QPushButton>
#include <QSignalSpy>

#include "console/app/control_panel.h"
#include "gui_environment.h"

namespace sy::console {
namespace {

using nlohmann::json;

TEST(RebalancePanel, PreviewsAProposalAndAppliesExactlyIt) {
  ASSERT_NE(testing::gui_application(), nullptr);
  ControlPanel panel;
  QSignalSpy sent(&panel, &ControlPanel::commandRequested);
  auto* propose = panel.findChild<QPushButton*>("proposeRebalanceButton");
  auto* apply = panel.findChild<QPushButton*>("applyRebalanceButton");
  ASSERT_NE(propose, nullptr);
  ASSERT_NE(apply, nullptr);
  EXPECT_FALSE(apply->isEnabled());
  propose->click();
  ASSERT_EQ(sent.count(), 1);
  const json asked = json::parse(sent.at(0).at(0).toString().toStdString());
  EXPECT_EQ(asked, (json{{"cmd", "rebalance"}, {"algorithm", "greedy"}}));

  const json reply = json::parse(R"({"ok":true,"cmd":"rebalance","applied":false,"proposal":{
    "id":9,"algorithm":"greedy","placement":[[[1,2],[1],[2]]],"load_before":[0,120,30],
    "load_after":[0,70,80],"imbalance_before":1.6,"imbalance_after":1.07,"gain":0.33,"slots":2,
    "replicas_before":3,"replicas_after":4,"window_ns":1,"changes":[{"block":0,"expert":0,"old":[1],"new":[1,2]}]}})");
  panel.onControlReply(1, "propose", QString::fromStdString(asked.dump()), true, QString::fromStdString(reply.dump()));
  ASSERT_TRUE(panel.proposal().has_value());
  EXPECT_EQ(panel.proposal()->after, (std::vector<double>{0, 70, 80}));
  EXPECT_NE(panel.findChild<QLabel*>("rebalanceLabel")->text().indexOf("1.60"), -1);
  ASSERT_TRUE(apply->isEnabled());
  apply->click();
  ASSERT_EQ(sent.count(), 2);
  EXPECT_EQ(json::parse(sent.at(1).at(0).toString().toStdString()),
            (json{{"cmd", "rebalance"}, {"apply", true}, {"proposal", 9}}));
  EXPECT_FALSE(apply->isEnabled());  // a proposal is applied once

  // A refusal is shown; replies to other commands are not the panel's.
  panel.onControlReply(2, "propose", R"({"cmd":"rebalance"})", true,
                       R"({"ok":false,"error":"rebalance: no expert-load window has closed yet"})");
  EXPECT_NE(panel.findChild<QLabel*>("rebalanceLabel")->text().indexOf("no expert-load window"), -1);
  panel.onControlReply(3, "state", R"({"cmd":"get_state"})", true, QString::fromStdString(reply.dump()));
  EXPECT_FALSE(panel.proposal().has_value());
  EXPECT_NE(panel.findChild<QLabel*>("rebalanceLabel")->text().indexOf("no expert-load window"), -1);

  panel.findChild<QCheckBox*>("periodicRebalanceCheck")->setChecked(true);
  panel.findChild<QPushButton*>("setPeriodicRebalanceButton")->click();
  ASSERT_EQ(sent.count(), 3);
  const json periodic = json::parse(sent.at(2).at(0).toString().toStdString());
  EXPECT_EQ(periodic["cmd"], "set_rebalance");
  EXPECT_EQ(periodic["mode"], "periodic");
  EXPECT_EQ(periodic["interval_s"], 10.0);
  EXPECT_EQ(periodic["threshold"], 1.2);
}

}  // namespace
}  // namespace sy::console
