// The torchrun-style bootstrap's exchange on loopback: rank 0's bytes reach
// every other rank whichever starts first, and a missing rank 0 is an error
// naming MASTER_ADDR:MASTER_PORT within the timeout, not a hang.
#include "dist/tcp_rendezvous.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <thread>

#include "core/error.h"

namespace lt::dist {
namespace {

// A port nothing listens on now (the kernel's pick, released).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

World rank_of(int rank, int size, int port) {
  World w;
  w.launcher = Launcher::Torchrun;
  w.rank = rank;
  w.size = size;
  w.master_addr = "127.0.0.1";
  w.master_port = port;
  return w;
}

TEST(TcpRendezvous, RankZerosBytesReachEveryRank) {
  const int port = free_port();
  const int size = 4;
  std::vector<char> id(128);
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<char>(i * 37 + 11);
  // The others start first and retry until rank 0 listens.
  std::vector<std::future<std::vector<char>>> others;
  for (int r = 1; r < size; ++r)
    others.push_back(std::async(std::launch::async, [=] {
      return share_from_rank0(rank_of(r, size, port), {}, id.size(), 20);
    }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(share_from_rank0(rank_of(0, size, port), id, id.size(), 20), id);
  for (auto& f : others) EXPECT_EQ(f.get(), id);
}

TEST(TcpRendezvous, NoRankZeroIsAnErrorWithinTheTimeout) {
  const int port = free_port();
  const auto start = std::chrono::steady_clock::now();
  try {
    share_from_rank0(rank_of(1, 2, port), {}, 128, 0.3);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("rank 1: 127.0.0.1:" + std::to_string(port) + " (MASTER_ADDR:MASTER_PORT)"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("did not accept a connection within 0.3 s"), std::string::npos) << m;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(TcpRendezvous, RankZeroAloneTimesOutNamingTheMissingRanks) {
  const int port = free_port();
  try {
    share_from_rank0(rank_of(0, 3, port), std::vector<char>(128), 128, 0.2);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("2 of the 2 other ranks did not connect"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace lt::dist
