#ifndef ALLOT_CLINUX_SHIM_H
#define ALLOT_CLINUX_SHIM_H
// Linux system headers that `import Glibc` does not export to Swift, plus a few static inline
// wrappers for things Swift imports awkwardly (`struct epoll_event` is packed on x86_64, so its
// fields are read and written here in C rather than through Swift's view of the layout).
#ifdef __linux__
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

/// `accept4` is only declared by <sys/socket.h> under `_GNU_SOURCE`; the symbol is always in glibc.
extern int accept4(int sockfd, struct sockaddr *addr, socklen_t *addrlen, int flags);

/// `epoll_ctl` with the event mask and the 64-bit user data passed by value.
static inline int allot_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t data) {
    struct epoll_event event;
    event.events = events;
    event.data.u64 = data;
    return epoll_ctl(epfd, op, fd, &event);
}

/// The size of one `struct epoll_event`, so Swift can allocate an array of them as raw bytes.
static inline int allot_epoll_event_size(void) {
    return (int)sizeof(struct epoll_event);
}

/// `epoll_wait` into a raw buffer of `capacity` events.
static inline int allot_epoll_wait(int epfd, void *events, int capacity, int timeout_ms) {
    return epoll_wait(epfd, (struct epoll_event *)events, capacity, timeout_ms);
}

/// Reads the mask of the `index`th event of a buffer filled by `allot_epoll_wait`.
static inline uint32_t allot_epoll_event_mask(const void *events, int index) {
    return ((const struct epoll_event *)events)[index].events;
}

/// Reads the user data of the `index`th event of a buffer filled by `allot_epoll_wait`.
static inline uint64_t allot_epoll_event_data(const void *events, int index) {
    return ((const struct epoll_event *)events)[index].data.u64;
}

static const uint32_t ALLOT_EPOLLIN = EPOLLIN;
static const uint32_t ALLOT_EPOLLOUT = EPOLLOUT;
static const uint32_t ALLOT_EPOLLERR = EPOLLERR;
static const uint32_t ALLOT_EPOLLHUP = EPOLLHUP;
static const uint32_t ALLOT_EPOLLRDHUP = EPOLLRDHUP;
static const int ALLOT_SOCK_NONBLOCK = SOCK_NONBLOCK;
static const int ALLOT_SOCK_CLOEXEC = SOCK_CLOEXEC;
static const int ALLOT_MSG_NOSIGNAL = MSG_NOSIGNAL;
static const int ALLOT_EFD_NONBLOCK = EFD_NONBLOCK;
static const int ALLOT_EFD_CLOEXEC = EFD_CLOEXEC;
static const int ALLOT_EPOLL_CLOEXEC = EPOLL_CLOEXEC;
#endif
#endif
