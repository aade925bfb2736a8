#include <gtest/gtest.h>

#include "plan/hardware.h"
#include "support/errors.h"

namespace lt::plan {
namespace {

using lt::testing::error_of;

TEST(HardwareProfile, MissingKeysTakeTheDocumentedDefaults) {
  const auto p = HardwareProfile::from_yaml_text("gpu_memory_gb: 80\nbidir_gbps: 12\n", "hw.yaml");
  EXPECT_EQ(p.gpu_memory_gb, 80);
  EXPECT_EQ(p.bidir_gbps, 12);
  EXPECT_EQ(p.h2d_gbps, 53.3);  // DEVICE.md's H200 machine
  EXPECT_EQ(p.host_mem_gbps, 87.0);
  EXPECT_FALSE(p.host_activation_gb.has_value());
  EXPECT_FALSE(p.cpu_adam_beside_copies_gparams_per_s.has_value());
  EXPECT_FALSE(p.cpu_adam8bit_beside_copies_gparams_per_s.has_value());
  EXPECT_EQ(HardwareProfile::from_yaml_text("", "empty.yaml").gpu_tflops, 760.0);
}

TEST(HardwareProfile, ErrorsNameTheFileAndTheKey) {
  std::string e =
      error_of([] { HardwareProfile::from_yaml_text("gpu_memroy_gb: 80\n", "hw.yaml"); });
  EXPECT_NE(e.find("hw.yaml"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key 'gpu_memroy_gb'"), std::string::npos) << e;
  e = error_of([] { HardwareProfile::from_yaml_text("disk_gb: 2\nh2d_gbps: fast\n", "hw.yaml"); });
  EXPECT_NE(e.find("hw.yaml"), std::string::npos) << e;
  EXPECT_NE(e.find("'h2d_gbps'"), std::string::npos) << e;
  EXPECT_NE(e.find("line 2"), std::string::npos) << e;
  e = error_of([] { HardwareProfile::from_yaml_text("gpu_tflops: -3\n", "p.yaml"); });
  EXPECT_NE(e.find("p.yaml: key 'gpu_tflops'"), std::string::npos) << e;
  e = error_of([] {
    HardwareProfile::from_yaml_text("cpu_adam8bit_beside_copies_gparams_per_s: 0\n", "p.yaml");
  });
  EXPECT_NE(e.find("p.yaml: key 'cpu_adam8bit_beside_copies_gparams_per_s'"), std::string::npos)
      << e;
  e = error_of([] { HardwareProfile::from_yaml_text("host_memory_gb: [1, 2]\n", "p.yaml"); });
  EXPECT_NE(e.find("'host_memory_gb'"), std::string::npos) << e;
  e = error_of([] { HardwareProfile::from_yaml_text("- 1\n- 2\n", "p.yaml"); });
  EXPECT_NE(e.find("p.yaml"), std::string::npos) << e;
  e = error_of([] { HardwareProfile::from_file("/nonexistent/hw.yaml"); });
  EXPECT_NE(e.find("/nonexistent/hw.yaml"), std::string::npos) << e;
}

// disk_path is a path, and a profile is not expanded by a shell: "~/nvme"
// would name a folder "~" (core/shell_syntax.h).
TEST(HardwareProfile, ADiskPathOnlyAShellExpandsIsRefused) {
  const std::string e = error_of([] {
    HardwareProfile::from_yaml_text("disk_gb: 2\ndisk_path: ${LT_TEST_NO_SUCH}/x\n", "hw.yaml");
  });
  EXPECT_NE(e.find("hw.yaml: key 'disk_path' (line 2): '${LT_TEST_NO_SUCH}/x' refers to "
                   "${LT_TEST_NO_SUCH}, but a hardware profile is not expanded by a shell"),
            std::string::npos)
      << e;
}

TEST(HardwareProfile, WrittenYamlReadsBackTheSameValues) {
  HardwareProfile p;
  p.gpu_memory_gb = 70;
  p.disk_read_gbps = 2.83;
  p.disk_path = "/scratch";
  p.host_activation_gb = 15;
  p.cpu_adam8bit_beside_copies_gparams_per_s = 3.79;
  p.cpu_adam_in_run_scale = 0.8731;
  p.gpu_adam8bit_gparams_per_s = 131.5;
  p.gpu_adam_gparams_per_s = 87.25;
  const auto q = HardwareProfile::from_yaml_text(p.to_yaml(), "written");
  EXPECT_EQ(q.gpu_memory_gb, 70);
  EXPECT_EQ(q.disk_read_gbps, 2.83);
  EXPECT_EQ(q.disk_path, "/scratch");
  EXPECT_EQ(q.host_activation_gb, 15);
  EXPECT_FALSE(q.gpu_activation_gb.has_value());
  EXPECT_EQ(q.cpu_adam8bit_beside_copies_gparams_per_s, 3.79);
  EXPECT_FALSE(q.cpu_adam_beside_copies_gparams_per_s.has_value());
  EXPECT_EQ(q.cpu_adam_in_run_scale, 0.8731);
  EXPECT_EQ(q.gpu_adam8bit_gparams_per_s, 131.5);
  EXPECT_EQ(q.gpu_adam_gparams_per_s, 87.25);
  EXPECT_FALSE(q.cpu_adam8bit_in_run_scale.has_value());
}

}  // namespace
}  // namespace lt::plan
