// AllotSQLite — Allot's small typed layer over libsqlite3 (the `CSQLite` system library).
//
// - `SQLiteConnection`: one `sqlite3*`, configured for the service (WAL, synchronous, foreign
//   keys, busy timeout), with a prepared-statement cache, typed binding and column access,
//   scripts, transactions and savepoints, and operational helpers (integrity check, WAL
//   checkpoint, file sizes, the `/readyz` probe).
// - `SQLiteError`: every failure, as a value (result codes, message, SQL).
// - `DatabaseQueue` (one connection behind an actor on its own dispatch queue) and
//   `DatabasePool` (a writer and a reader on the same WAL file) for async code.
// - `Migration` / `Migrator`: the numbered `migrations/*.sql` files, applied once each.
//
// Modelled on GRDB's habits (groue/GRDB.swift), written for Allot's needs only.
