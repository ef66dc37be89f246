// AllotSQLite — see README.md, "Architecture".
