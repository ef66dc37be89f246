#ifndef ALLOT_CLINUX_SHIM_H
#define ALLOT_CLINUX_SHIM_H
// Linux system headers that `import Glibc` does not export to Swift.
#ifdef __linux__
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <netinet/tcp.h>
#endif
#endif
