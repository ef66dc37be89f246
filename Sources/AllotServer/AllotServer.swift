// AllotServer — see README.md, "Architecture".
