// AllotJSON — see README.md, "Architecture".
