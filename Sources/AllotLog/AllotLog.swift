// AllotLog — see README.md, "Architecture".
