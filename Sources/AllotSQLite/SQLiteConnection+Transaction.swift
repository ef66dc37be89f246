import CSQLite

/// How a transaction takes its locks.
///
/// SQLite documentation: <https://www.sqlite.org/lang_transaction.html>
public enum TransactionKind: String, Sendable {
    /// Locks are taken on first use. For read-only transactions: a consistent snapshot for
    /// several SELECTs without blocking anyone.
    case deferred = "DEFERRED"
    /// The write lock is taken at BEGIN (waiting up to `busy_timeout`). The right kind for
    /// writes: a deferred transaction that reads and then writes can fail with `SQLITE_BUSY`
    /// at the upgrade, which no busy timeout can avoid.
    case immediate = "IMMEDIATE"
    /// Same as immediate in WAL mode.
    case exclusive = "EXCLUSIVE"
}

extension SQLiteConnection {
    /// Runs `body` in a transaction: commits when it returns, rolls back when it throws.
    ///
    /// - A call inside another `transaction` (on the same connection) becomes a savepoint: its
    ///   work is undone alone when its body throws, and committed only with the outer
    ///   transaction. `kind` is ignored for nested calls.
    /// - When `body` throws, the transaction is rolled back and the body's error rethrown.
    ///   SQLite may already have rolled back by itself (after `SQLITE_FULL`, `SQLITE_IOERR`,
    ///   `SQLITE_BUSY`, `SQLITE_NOMEM`); then no ROLLBACK is attempted.
    /// - If the body caught such an error and returned normally, the transaction is already gone:
    ///   nothing is committed and a ``SQLiteError`` with `SQLITE_ABORT` is thrown, rather than
    ///   pretending the work was saved.
    /// - If COMMIT fails, the transaction is rolled back and COMMIT's error thrown.
    /// - Before COMMIT, a writable connection checks that its file is still the one at its path
    ///   (one `stat`): in WAL mode SQLite would otherwise "commit" into a deleted file, and a
    ///   commit that is acknowledged must be durable (SPEC section 13). Such a transaction is rolled
    ///   back with `SQLITE_READONLY_DBMOVED`.
    /// - If a ROLLBACK itself fails (the disk went away), the body's error is still the one thrown;
    ///   the connection remembers the open transaction and rolls it back before the next
    ///   transaction begins, throwing then if it still cannot.
    ///
    /// Do not mix with raw `BEGIN`/`COMMIT` statements on the same connection.
    ///
    /// SQLite documentation: <https://www.sqlite.org/lang_transaction.html>,
    /// <https://www.sqlite.org/lang_savepoint.html>
    public func transaction<T>(
        _ kind: TransactionKind = .immediate,
        _ body: (SQLiteConnection) throws -> T
    ) throws -> T {
        if transactionDepth > 0 { return try savepoint(body) }

        if needsRollback {
            if isInTransaction { try run("ROLLBACK") }
            needsRollback = false
        }
        try run("BEGIN \(kind.rawValue)")
        transactionDepth = 1
        transactionPoisoned = false
        defer {
            transactionDepth = 0
            transactionPoisoned = false
        }

        let value: T
        do {
            value = try body(self)
        } catch {
            rollbackAfterFailure()
            throw error
        }
        if transactionPoisoned {
            rollbackAfterFailure()
            throw SQLiteError(
                code: SQLITE_ABORT,
                message: "a nested transaction could not be rolled back, so the whole transaction was rolled back"
            )
        }
        if !configuration.readOnly && databaseFileHasMoved() {
            rollbackAfterFailure()
            let aside = setAsideLogOfReplacedDatabase()
            throw movedError(detail: "the transaction was rolled back" + (aside.map { "; " + $0 } ?? ""))
        }
        guard isInTransaction else {
            throw SQLiteError(
                code: SQLITE_ABORT,
                message: "the transaction was rolled back by SQLite after an earlier error; nothing was committed"
            )
        }
        do {
            try run("COMMIT")
        } catch {
            rollbackAfterFailure()
            throw error
        }
        if !configuration.readOnly { committedLog = Self.identity(ofFileAt: (filePath ?? path) + "-wal") }
        return value
    }

    /// The nested form of ``transaction(_:_:)``: `SAVEPOINT` … `RELEASE`, or `ROLLBACK TO` on throw.
    private func savepoint<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        let name = "allot_savepoint_\(transactionDepth)"
        try run("SAVEPOINT \(name)")
        transactionDepth += 1
        defer { transactionDepth -= 1 }

        let value: T
        do {
            value = try body(self)
        } catch {
            rollback(toSavepoint: name)
            throw error
        }
        do {
            try run("RELEASE \(name)")
        } catch {
            rollback(toSavepoint: name)
            throw error
        }
        return value
    }

    /// Undoes a savepoint's work. If SQLite already rolled the whole transaction back there is
    /// nothing to undo; if undoing fails, the outer transaction is marked so it cannot commit.
    private func rollback(toSavepoint name: String) {
        guard isInTransaction else { return }
        do {
            try run("ROLLBACK TO \(name)")
            try run("RELEASE \(name)")
        } catch {
            transactionPoisoned = true
        }
    }

    /// Rolls back after a failure, unless SQLite already did. A failed ROLLBACK is remembered.
    private func rollbackAfterFailure() {
        guard isInTransaction else { return }
        do {
            try run("ROLLBACK")
        } catch {
            needsRollback = isInTransaction
        }
    }
}
