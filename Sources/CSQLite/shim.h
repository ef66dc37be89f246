#ifndef ALLOT_CSQLITE_SHIM_H
#define ALLOT_CSQLITE_SHIM_H
#include <sqlite3.h>

/// `sqlite3_config` is variadic, so Swift cannot call it; these wrappers expose the forms we use.
static inline int allot_sqlite3_config_multithread(void) { return sqlite3_config(SQLITE_CONFIG_MULTITHREAD); }
static inline int allot_sqlite3_config_memstatus(int on) { return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, on); }
#endif
