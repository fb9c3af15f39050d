/*
 * Listening sockets for `--loops N` with SO_REUSEPORT: every serving loop opens its own listening
 * socket on the one data port and accepts from it (the kernel spreads new connections over the
 * group by a hash of their addresses), so no connection waits on another process to reach its
 * loop. The owner holds one more socket on the port, bound but never listening: it reserves the
 * port (its real number when asked for port 0) while loops come and go, and takes no connections
 * (only listening sockets join the group). Node 20's net has no reusePort option, hence this.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "plane.h"

#define CHECK(call) NAPI_CHECK("talon_sendfile", call)

/*
 * reusePortSocket(host: numeric IPv4/IPv6, port, backlog) -> fd | -errno: a non-blocking,
 * close-on-exec TCP socket with SO_REUSEPORT, bound to host:port, listening (and SO_REUSEADDR)
 * when backlog > 0, only bound when 0.
 */
static napi_value ReusePortSocket(napi_env env, napi_callback_info info) {
  NAPI_ARGS(3);
  char host[64];
  size_t hostLen = 0;
  int64_t port, backlog;
  if (argc < 3 || napi_get_value_string_utf8(env, argv[0], host, sizeof host, &hostLen) != napi_ok ||
      !arg_i64(env, argv[1], &port) || !arg_i64(env, argv[2], &backlog) || port < 0 || port > 65535 || backlog < 0) {
    napi_throw_type_error(env, NULL, "reusePortSocket(host, port, backlog)");
    return NULL;
  }
  struct sockaddr_storage addr;
  socklen_t addrLen;
  memset(&addr, 0, sizeof addr);
  struct sockaddr_in *v4 = (struct sockaddr_in *)&addr;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&addr;
  if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons((uint16_t)port);
    addrLen = sizeof *v4;
  } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons((uint16_t)port);
    addrLen = sizeof *v6;
  } else {
    return make_int(env, -EINVAL);
  }
  int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return make_int(env, -errno);
  int one = 1;
  /*
   * SO_REUSEADDR on listeners only (a restarted loop binds past the port's TIME_WAIT connections);
   * never on the reservation: two SO_REUSEADDR sockets may share a port while neither listens, so
   * it would let any other server (Node sets SO_REUSEADDR on every listener) take the port
   * whenever no loop listens.
   */
  if ((backlog > 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) ||
      setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0 ||
      bind(fd, (struct sockaddr *)&addr, addrLen) != 0 || (backlog > 0 && listen(fd, (int)backlog) != 0)) {
    int e = errno;
    close(fd);
    return make_int(env, -e);
  }
  return make_int(env, fd);
}

/* localPort(fd) -> the port a socket is bound to, or -errno. */
static napi_value LocalPort(napi_env env, napi_callback_info info) {
  NAPI_ARGS(1);
  int64_t fd;
  if (argc < 1 || !arg_i64(env, argv[0], &fd) || fd < 0) {
    napi_throw_type_error(env, NULL, "localPort(fd)");
    return NULL;
  }
  struct sockaddr_storage addr;
  socklen_t len = sizeof addr;
  if (getsockname((int)fd, (struct sockaddr *)&addr, &len) != 0) return make_int(env, -errno);
  if (addr.ss_family == AF_INET) return make_int(env, ntohs(((struct sockaddr_in *)&addr)->sin_port));
  if (addr.ss_family == AF_INET6) return make_int(env, ntohs(((struct sockaddr_in6 *)&addr)->sin6_port));
  return make_int(env, -EAFNOSUPPORT);
}

napi_value listen_export(napi_env env, napi_value exports) {
  NAPI_EXPORT("reusePortSocket", ReusePortSocket);
  NAPI_EXPORT("localPort", LocalPort);
  return exports;
}
