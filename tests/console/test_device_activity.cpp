// device_activity: the per-device table of where time goes, from window summaries.
#include <gtest/gtest.h>

#include "console/model/device_activity.h"
#include "console/model/summary_history.h"
#include "console/model/summary_store.h"

namespace sy::console {
namespace {

SummaryPoint parse(const std::string& json) {
  auto p = parse_summary(json);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return *p;
}

std::vector<const SummaryPoint*> pointers(const SummaryStore& store) {
  std::vector<const SummaryPoint*> out;
  for (const SummaryPoint& p : store.points()) out.push_back(&p);
  return out;
}

RunMeta two_devices() {
  RunMeta m;
  DeviceInfo a;
  a.index = 0;
  a.name = "a0";
  a.rank = 0;
  DeviceInfo e;
  e.index = 1;
  e.name = "e0";
  e.rank = -1;
  m.devices = {a, e};
  return m;
}

TEST(DeviceActivity, ParsesTrafficAndQueueWaitsAndNotesTheirAbsence) {
  const SummaryPoint with = parse(R"({"t_begin_ns": 0, "t_end_ns": 500000000, "devices": [
      {"device": 0, "busy": 0.5, "stall": {"queue_empty": 0.5}, "executions": 10, "rows_per_execution": 4,
       "transfers": 20, "rows_per_transfer": 2.5, "queue_takes": 10, "queue_wait_ms": {"mean": 1.5, "max": 4}}]})");
  ASSERT_EQ(with.devices.size(), 1u);
  EXPECT_TRUE(with.devices[0].has_traffic);
  EXPECT_EQ(with.devices[0].transfers, 20);
  EXPECT_DOUBLE_EQ(with.devices[0].rows_per_transfer, 2.5);
  EXPECT_EQ(with.devices[0].queue_takes, 10);
  EXPECT_DOUBLE_EQ(with.devices[0].queue_wait_mean_ms, 1.5);
  EXPECT_DOUBLE_EQ(with.devices[0].queue_wait_max_ms, 4);
  const SummaryPoint old = parse(R"({"t_begin_ns": 0, "t_end_ns": 500000000, "devices": [
      {"device": 0, "busy": 0.5, "executions": 10, "rows_per_execution": 4}]})");
  EXPECT_FALSE(old.devices[0].has_traffic);
}

TEST(DeviceActivity, WeighsRatesByTimeAndRowsByExecutions) {
  SummaryStore store;
  // Two windows of 0.5 s and one of 1 s; the 1 s one has few, large executions.
  store.add(parse(R"({"t_begin_ns": 0, "t_end_ns": 500000000, "devices": [
      {"device": 0, "busy": 0.8, "stall": {"queue_empty": 0.2}, "executions": 100, "rows_per_execution": 2,
       "transfers": 50, "rows_per_transfer": 4, "queue_takes": 100, "queue_wait_ms": {"mean": 1, "max": 3}},
      {"device": 1, "busy": 0.4, "stall": {"barrier": 0.6}, "executions": 10, "rows_per_execution": 8,
       "transfers": 10, "rows_per_transfer": 8, "queue_takes": 10, "queue_wait_ms": {"mean": 2, "max": 2}}]})"));
  store.add(parse(R"({"t_begin_ns": 500000000, "t_end_ns": 1000000000, "devices": [
      {"device": 0, "busy": 0.6, "stall": {"transfer": 0.4}, "executions": 100, "rows_per_execution": 2,
       "transfers": 50, "rows_per_transfer": 4, "queue_takes": 100, "queue_wait_ms": {"mean": 3, "max": 9}},
      {"device": 1, "busy": 0.4, "stall": {"barrier": 0.6}, "executions": 10, "rows_per_execution": 8,
       "transfers": 10, "rows_per_transfer": 8, "queue_takes": 10, "queue_wait_ms": {"mean": 2, "max": 2}}]})"));
  store.add(parse(R"({"t_begin_ns": 1000000000, "t_end_ns": 2000000000, "devices": [
      {"device": 0, "busy": 1.0, "executions": 50, "rows_per_execution": 20,
       "transfers": 0, "rows_per_transfer": 0, "queue_takes": 0, "queue_wait_ms": {"mean": 0, "max": 0}},
      {"device": 1, "busy": 0.1, "stall": {"queue_empty": 0.9}, "executions": 5, "rows_per_execution": 4,
       "transfers": 5, "rows_per_transfer": 4, "queue_takes": 5, "queue_wait_ms": {"mean": 0, "max": 0}}]})"));
  const RunMeta meta = two_devices();
  const ActivityTable t = device_activity(pointers(store), &meta, 0, 2'000'000'000);
  EXPECT_EQ(t.windows, 3);
  EXPECT_EQ(t.t0_ns, 0);
  EXPECT_EQ(t.t1_ns, 2'000'000'000);
  ASSERT_EQ(t.devices.size(), 2u);
  const DeviceActivity& a = t.devices[0];
  EXPECT_EQ(a.name, "a0");
  EXPECT_TRUE(a.attention);
  EXPECT_DOUBLE_EQ(a.seconds, 2.0);
  EXPECT_NEAR(a.busy, (0.8 * 0.5 + 0.6 * 0.5 + 1.0) / 2, 1e-12);
  EXPECT_NEAR(a.stall_queue_empty, 0.1 * 0.5, 1e-12);
  EXPECT_NEAR(a.stall_transfer, 0.2 * 0.5, 1e-12);
  EXPECT_NEAR(a.executions_per_s, 250.0 / 2, 1e-12);
  EXPECT_NEAR(a.rows_per_execution, (200.0 * 2 + 50 * 20) / 250, 1e-12);  // 5.6, not the mean of means
  EXPECT_NEAR(a.transfers_per_s, 100.0 / 2, 1e-12);
  EXPECT_NEAR(a.rows_per_transfer, 4, 1e-12);
  EXPECT_NEAR(a.queue_wait_mean_ms, (100.0 * 1 + 100 * 3) / 200, 1e-12);
  EXPECT_DOUBLE_EQ(a.queue_wait_max_ms, 9);
  EXPECT_EQ(a.main_stall(), "transfer");
  EXPECT_DOUBLE_EQ(a.host(), 0);  // busy and stalled all along
  const DeviceActivity& e = t.devices[1];
  EXPECT_FALSE(e.attention);
  EXPECT_EQ(e.main_stall(), "queue_empty");  // 0.45 s against 0.3 s of barrier
  EXPECT_DOUBLE_EQ(e.host(), 0);
  // A window of a real backend: 30 % busy, 20 % stalled, the rest waiting on the host.
  SummaryStore real;
  real.add(parse(R"({"t_begin_ns": 0, "t_end_ns": 1000000000, "devices": [
      {"device": 0, "busy": 0.3, "stall": {"queue_empty": 0.2}, "executions": 10, "rows_per_execution": 4}]})"));
  const ActivityTable r = device_activity(pointers(real), &meta, 0, 1'000'000'000);
  ASSERT_FALSE(r.devices.empty());
  EXPECT_NEAR(r.devices[0].host(), 0.5, 1e-12);
  EXPECT_EQ(r.devices[0].main_stall(), "queue_empty");
  EXPECT_EQ(r.devices[0].main_idle(), "host");  // 50 % against 20 % of queue_empty
  EXPECT_EQ(a.main_idle(), "transfer");         // no host time: the largest stall

  ASSERT_EQ(t.groups.size(), 2u);
  EXPECT_EQ(t.groups[0].label, "attention");
  EXPECT_EQ(t.groups[1].label, "expert");
  EXPECT_EQ(t.groups[1].devices, 1);
  EXPECT_NEAR(t.groups[1].mean.rows_per_execution, e.rows_per_execution, 1e-12);

  // A range holds only the windows ending inside it.
  const ActivityTable last = device_activity(pointers(store), &meta, 1'000'000'000, 2'000'000'000);
  EXPECT_EQ(last.windows, 1);
  EXPECT_NEAR(last.devices[0].rows_per_execution, 20, 1e-12);
  EXPECT_DOUBLE_EQ(last.devices[0].queue_wait_mean_ms, 0);
}

TEST(DeviceActivity, GroupsAveragePerDeviceAndWithoutMetaThereAreNone) {
  SummaryStore store;
  store.add(parse(R"({"t_begin_ns": 0, "t_end_ns": 1000000000, "devices": [
      {"device": 0, "busy": 1.0, "executions": 100, "rows_per_execution": 2},
      {"device": 1, "busy": 0.5, "executions": 10, "rows_per_execution": 10},
      {"device": 2, "busy": 0.0, "stall": {"queue_empty": 1.0}, "executions": 0, "rows_per_execution": 0}]})"));
  RunMeta meta = two_devices();
  DeviceInfo e1;
  e1.index = 2;
  e1.name = "e1";
  meta.devices.push_back(e1);
  const ActivityTable t = device_activity(pointers(store), &meta, 0, 1'000'000'000);
  ASSERT_EQ(t.groups.size(), 2u);
  const DeviceActivity& experts = t.groups[1].mean;
  EXPECT_EQ(t.groups[1].devices, 2);
  EXPECT_NEAR(experts.busy, 0.25, 1e-12);
  EXPECT_NEAR(experts.executions_per_s, 5, 1e-12);  // per device
  EXPECT_NEAR(experts.rows_per_execution, 10, 1e-12);
  EXPECT_FALSE(experts.has_traffic);
  EXPECT_TRUE(device_activity(pointers(store), nullptr, 0, 1'000'000'000).groups.empty());
  EXPECT_EQ(device_activity(pointers(store), nullptr, 0, 1'000'000'000).devices[1].name, "device 1");
}


TEST(DeviceActivity, FoldedWindowsKeepShipmentsAndWaitsWeighted) {
  SummaryPoint a = parse(R"({"t_begin_ns": 0, "t_end_ns": 1000000000, "devices": [
      {"device": 0, "executions": 10, "rows_per_execution": 2,
       "transfers": 30, "rows_per_transfer": 2, "queue_takes": 10, "queue_wait_ms": {"mean": 1, "max": 5}}]})");
  const SummaryPoint b = parse(R"({"t_begin_ns": 1000000000, "t_end_ns": 2000000000, "devices": [
      {"device": 0, "executions": 30, "rows_per_execution": 6,
       "transfers": 10, "rows_per_transfer": 6, "queue_takes": 30, "queue_wait_ms": {"mean": 3, "max": 4}}]})");
  fold_summary(a, b);
  ASSERT_EQ(a.devices.size(), 1u);
  const DeviceWindow& d = a.devices[0];
  EXPECT_TRUE(d.has_traffic);
  EXPECT_EQ(d.transfers, 40);
  EXPECT_DOUBLE_EQ(d.rows_per_transfer, (30.0 * 2 + 10 * 6) / 40);
  EXPECT_EQ(d.queue_takes, 40);
  EXPECT_DOUBLE_EQ(d.queue_wait_mean_ms, (10.0 * 1 + 30 * 3) / 40);
  EXPECT_DOUBLE_EQ(d.queue_wait_max_ms, 5);
  EXPECT_DOUBLE_EQ(d.rows_per_execution, (10.0 * 2 + 30 * 6) / 40);
}

}  // namespace
}  // namespace sy::console
