#include "dist/tcp_rendezvous.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

#include "core/error.h"

namespace lt::dist {

namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point deadline_after(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// A socket closed on scope exit.
struct Socket {
  int fd = -1;
  explicit Socket(int f) : fd(f) {}
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() {
    if (fd >= 0) ::close(fd);
  }
};

std::string endpoint(const World& w) {
  return w.master_addr + ":" + std::to_string(w.master_port) + " (MASTER_ADDR:MASTER_PORT)";
}

int ms_left(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::max<int64_t>(0, left));
}

// Waits until `fd` is ready for `events` or the deadline passes.
bool wait_ready(int fd, short events, Clock::time_point deadline) {
  pollfd p{fd, events, 0};
  while (true) {
    const int n = ::poll(&p, 1, ms_left(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return false;
  }
}

void send_all(int fd, const std::vector<char>& bytes, Clock::time_point deadline,
              const std::string& what) {
  size_t done = 0;
  while (done < bytes.size()) {
    LT_CHECK(wait_ready(fd, POLLOUT, deadline), what, ": timed out sending");
    const ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    LT_CHECK(n > 0 || errno == EINTR, what, ": send failed: ", std::strerror(errno));
    if (n > 0) done += static_cast<size_t>(n);
  }
}

std::vector<char> serve(const World& w, const std::vector<char>& bytes, double timeout_s) {
  const auto deadline = deadline_after(timeout_s);
  Socket s(::socket(AF_INET6, SOCK_STREAM, 0));
  bool v6 = s.fd >= 0;
  if (!v6) s.fd = ::socket(AF_INET, SOCK_STREAM, 0);
  LT_CHECK(s.fd >= 0, "rank 0: no socket for ", endpoint(w), ": ", std::strerror(errno));
  const int one = 1, zero = 0;
  ::setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int bound = -1;
  if (v6) {
    ::setsockopt(s.fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);  // IPv4 too
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons(static_cast<uint16_t>(w.master_port));
    bound = ::bind(s.fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<uint16_t>(w.master_port));
    bound = ::bind(s.fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  LT_CHECK(bound == 0, "rank 0: cannot listen on port ", w.master_port, " of ", endpoint(w), ": ",
           std::strerror(errno),
           errno == EADDRINUSE ? " (another process holds it: with torchrun, set "
                                 "TORCHELASTIC_USE_AGENT_STORE=False or pick another MASTER_PORT)"
                               : "");
  LT_CHECK(::listen(s.fd, w.size) == 0, "rank 0: listen on ", endpoint(w), ": ",
           std::strerror(errno));
  for (int served = 1; served < w.size; ++served) {
    LT_CHECK(wait_ready(s.fd, POLLIN, deadline), "rank 0: ", w.size - served, " of the ",
             w.size - 1, " other ranks did not connect to ", endpoint(w), " within ", timeout_s,
             " s (dist.timeout_s)");
    Socket peer(::accept(s.fd, nullptr, nullptr));
    LT_CHECK(peer.fd >= 0, "rank 0: accept on ", endpoint(w), ": ", std::strerror(errno));
    send_all(peer.fd, bytes, deadline, "rank 0: handing the NCCL id to a rank");
  }
  return bytes;
}

std::vector<char> fetch(const World& w, size_t size, double timeout_s) {
  const auto deadline = deadline_after(timeout_s);
  const std::string where = "rank " + std::to_string(w.rank) + ": " + endpoint(w);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc =
      ::getaddrinfo(w.master_addr.c_str(), std::to_string(w.master_port).c_str(), &hints, &found);
  LT_CHECK(rc == 0, where, ": cannot resolve MASTER_ADDR: ", ::gai_strerror(rc));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(found, ::freeaddrinfo);
  // Rank 0 may not listen yet: retry every 50 ms until the deadline.
  while (true) {
    for (addrinfo* a = found; a; a = a->ai_next) {
      Socket s(::socket(a->ai_family, a->ai_socktype, a->ai_protocol));
      if (s.fd < 0 || ::connect(s.fd, a->ai_addr, a->ai_addrlen) != 0) continue;
      std::vector<char> bytes(size);
      size_t done = 0;
      while (done < size) {
        LT_CHECK(wait_ready(s.fd, POLLIN, deadline), where, ": rank 0 sent ", done, " of ", size,
                 " bytes within ", timeout_s, " s (dist.timeout_s)");
        const ssize_t n = ::recv(s.fd, bytes.data() + done, size - done, 0);
        LT_CHECK(n > 0 || (n < 0 && errno == EINTR), where, ": rank 0 closed the connection after ",
                 done, " of ", size, " bytes");
        if (n > 0) done += static_cast<size_t>(n);
      }
      return bytes;
    }
    LT_CHECK(Clock::now() < deadline, where, ": rank 0 did not accept a connection within ",
             timeout_s, " s (dist.timeout_s); is rank 0 running, and MASTER_ADDR its address?");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

std::vector<char> share_from_rank0(const World& world, std::vector<char> bytes, size_t size,
                                   double timeout_s) {
  if (world.rank == 0) {
    LT_CHECK(bytes.size() == size, "share_from_rank0: rank 0 passed ", bytes.size(),
             " bytes, expected ", size);
    return serve(world, bytes, timeout_s);
  }
  return fetch(world, size, timeout_s);
}

}  // namespace lt::dist
